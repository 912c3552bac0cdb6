"""End-to-end ``Runner`` runs with a scripted model, on the SDK's SQLiteSession and on ours.

Every test runs the same script on the SDK's ``SQLiteSession`` (the reference) and on
``AgentsSession`` over each store, and checks what the model was sent and what was stored.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, SessionSettings, function_tool, handoff
from agents.memory import Session
from agents.testing import ScriptedModel, assistant_message, function_call
from agents_support import SessionFactory

from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.service import SessionService

RUNNERS = [pytest.param("run", id="run"), pytest.param("run_streamed", id="streamed")]


async def run(method: str, agent: Agent[Any], text: Any, session: Session, **options: Any) -> Any:
    """One run through ``Runner.run`` or ``Runner.run_streamed`` (consumed to its end)."""
    if method == "run":
        return await Runner.run(agent, text, session=session, **options)
    result = Runner.run_streamed(agent, text, session=session, **options)
    async for _ in result.stream_events():
        pass
    return result


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@pytest.mark.parametrize("method", RUNNERS)
async def test_second_turn_sees_the_first(any_session: SessionFactory, method: str) -> None:
    """The second run's model input is the first run's items plus the new input."""
    session = any_session("two-turns")
    model = ScriptedModel([[assistant_message("San Francisco")], [assistant_message("California")]])
    agent = Agent(name="test", model=model)
    first = await run(method, agent, "Which city has the Golden Gate?", session)
    second = await run(method, agent, "Which state is it in?", session)
    assert (first.final_output, second.final_output) == ("San Francisco", "California")
    stored = await session.get_items()
    assert [item.get("role") for item in stored] == ["user", "assistant", "user", "assistant"]
    assert model.calls[-1].input == stored[:3]
    model.assert_complete()


@pytest.mark.parametrize("method", RUNNERS)
async def test_tool_round_is_stored_and_replayed(any_session: SessionFactory, method: str) -> None:
    """A tool call, its output and the final reply are stored, and the next run replays them."""
    session = any_session("tools")
    model = ScriptedModel(
        [
            [function_call("weather", {"city": "Paris"}, call_id="call_1")],
            [assistant_message("It is sunny in Paris")],
            [assistant_message("You asked about Paris")],
        ]
    )
    agent = Agent(name="test", model=model, tools=[weather])
    await run(method, agent, "Weather in Paris?", session)
    result = await run(method, agent, "What did I ask?", session)
    assert result.final_output == "You asked about Paris"
    stored = await session.get_items()
    kinds = [item.get("type", "message") for item in stored]
    assert kinds == [
        "message",
        "function_call",
        "function_call_output",
        "message",
        "message",
        "message",
    ]
    assert stored[2]["output"] == "sunny in Paris"  # type: ignore[typeddict-item]
    assert model.calls[-1].input == stored[:5]


@pytest.mark.parametrize("method", RUNNERS)
async def test_handoff_is_stored(any_session: SessionFactory, method: str) -> None:
    """A handoff's call and output are stored with the reply of the agent handed to."""
    session = any_session("handoff")
    specialist_model = ScriptedModel([[assistant_message("Bonjour, specialist here")]])
    specialist = Agent(name="specialist", model=specialist_model)
    triage_model = ScriptedModel(
        [[function_call("transfer_to_specialist", {}, call_id="h1")], [assistant_message("Back")]]
    )
    triage = Agent(name="triage", model=triage_model, handoffs=[handoff(specialist)])
    result = await run(method, triage, "Parlez-vous français?", session)
    assert result.final_output == "Bonjour, specialist here"
    assert result.last_agent is specialist
    stored = await session.get_items()
    assert [item.get("type", "message") for item in stored] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]
    assert specialist_model.calls[-1].input == stored[:3]
    await run(method, triage, "Merci", session)
    assert triage_model.calls[-1].input == [*stored, {"role": "user", "content": "Merci"}]


@pytest.mark.parametrize("method", RUNNERS)
async def test_run_config_limit_windows_the_history(
    any_session: SessionFactory, method: str
) -> None:
    """``RunConfig(session_settings=...)`` limits the history the model gets to the newest items."""
    session = any_session("run-limit")
    model = ScriptedModel([[assistant_message(f"Reply {n}")] for n in range(3)])
    agent = Agent(name="test", model=model)
    for n in range(2):
        await run(method, agent, f"Message {n}", session)
    config = RunConfig(session_settings=SessionSettings(limit=2))
    await run(method, agent, "Message 2", session, run_config=config)
    stored = await session.get_items()
    assert model.calls[-1].input == [*stored[2:4], {"role": "user", "content": "Message 2"}]
    assert len(stored) == 6


@pytest.mark.parametrize("method", RUNNERS)
async def test_limit_drops_an_output_without_its_call(
    any_session: SessionFactory, method: str
) -> None:
    """A window that starts at a function-call output does not send it without its call."""
    session = any_session("limit-pair")
    history: Any = [
        {"role": "user", "content": "What is the weather?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "It is sunny.", "annotations": []}],
        },
    ]
    await session.add_items(history)
    assert await session.get_items(limit=2) == history[-2:]
    model = ScriptedModel([[assistant_message("Tomorrow is sunny too.")]])
    config = RunConfig(session_settings=SessionSettings(limit=2))
    await run(method, Agent(name="test", model=model), "And tomorrow?", session, run_config=config)
    assert model.calls[-1].input == [history[-1], {"role": "user", "content": "And tomorrow?"}]


@pytest.mark.parametrize("method", RUNNERS)
async def test_list_input_is_appended(any_session: SessionFactory, method: str) -> None:
    """A list input follows the stored history in the model input and in the session."""
    session = any_session("list-input")
    earlier: Any = [
        {"role": "user", "content": "Earlier message"},
        {"role": "assistant", "content": "Saved reply"},
    ]
    await session.add_items(earlier)
    model = ScriptedModel([[assistant_message("This should run")]])
    new: Any = [{"role": "user", "content": "Test message"}]
    await run(method, Agent(name="test", model=model), new, session)
    assert model.calls[-1].input == earlier + new
    assert (await session.get_items())[:3] == earlier + new


@pytest.mark.parametrize("method", RUNNERS)
async def test_input_callback_repeating_history_does_not_grow_it(
    any_session: SessionFactory, method: str
) -> None:
    """A session input callback that repeats history items does not store them again."""
    session = any_session("callback")
    model = ScriptedModel([[assistant_message(f"assistant {n}")] for n in range(3)])
    agent = Agent(name="test", model=model)

    def repeat_first(history: list[Any], new_input: list[Any]) -> list[Any]:
        return [*history, history[0], *new_input] if history else new_input

    config = RunConfig(session_input_callback=repeat_first)
    for n in range(3):
        await run(method, agent, f"user {n}", session, run_config=config)
    stored = await session.get_items()
    assert [item.get("content") for item in stored if item.get("role") == "user"] == [
        "user 0",
        "user 1",
        "user 2",
    ]
    assert len(stored) == 6


@pytest.mark.parametrize("shared", [True, False], ids=["one-object", "an-object-each"])
async def test_concurrent_runs_store_every_item_once(
    make_session: SessionFactory, shared: bool
) -> None:
    """Twelve concurrent runs of one session store every input and every reply exactly once."""
    model = ScriptedModel(
        [[assistant_message(f"answer {n}", item_id=f"msg_{n}")] for n in range(12)]
    )
    agent = Agent(name="busy", model=model)
    one = make_session("concurrent")
    sessions = [one if shared else make_session("concurrent") for _ in range(12)]
    await asyncio.gather(
        *(Runner.run(agent, f"question {n}", session=s) for n, s in enumerate(sessions))
    )
    stored = await one.get_items()
    assert len(stored) == 24
    questions = sorted(str(item.get("content")) for item in stored if item.get("role") == "user")
    assert questions == sorted(f"question {n}" for n in range(12))
    replies = sorted(str(item.get("id")) for item in stored if item.get("role") == "assistant")
    assert replies == sorted(f"msg_{n}" for n in range(12))


async def test_run_sync_in_a_thread_of_its_own(memory_service: SessionService) -> None:
    """``Runner.run_sync``, on its own event loop in another thread, uses the session too."""
    session = AgentsSession("sync", memory_service)
    model = ScriptedModel([[assistant_message("Hello")], [assistant_message("Hi again")]])
    agent = Agent(name="test", model=model)

    def run_sync(text: str) -> Any:
        loop = asyncio.new_event_loop()
        asyncio.set_event_loop(loop)
        try:
            return Runner.run_sync(agent, text, session=session)
        finally:
            loop.close()

    await asyncio.to_thread(run_sync, "Hi there")
    result = await asyncio.to_thread(run_sync, "Remember me?")
    assert result.final_output == "Hi again"
    assert model.calls[-1].input == (await session.get_items())[:3]
