"""The SDK's own OpenAI models, over the real ``openai`` client, against the scripted server.

``OpenAIResponsesModel`` (the SDK's default) and ``OpenAIChatCompletionsModel`` talk to
``asyncsession.testing``'s scripted server at the client's httpx transport; the session keeps
what the SDK made of the replies, reasoning items included, and the next request carries it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from agents import (
    Agent,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    function_tool,
)

from asyncsession import EventType
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.messages import AssistantMessage
from asyncsession.service import SessionService
from asyncsession.testing.openai_server import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as c:
        yield c


@function_tool
def lookup(order: str) -> str:
    """The status of an order."""
    return f"order {order} shipped"


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_tool_loop_over_the_wire(
    service: SessionService,
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
    streamed: bool,
) -> None:
    """A tool round and a follow-up turn: the second request replays the stored history."""
    model = OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
    agent = Agent(name="support", model=model, tools=[lookup])
    session = AgentsSession("wire", service)
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"order": "42"})]))
    server.enqueue(ScriptedReply.text("Your order 42 has shipped."))
    server.enqueue(ScriptedReply.text("You asked about order 42."))
    for text in ("Where is order 42?", "What did I ask?"):
        if streamed:
            result: Any = Runner.run_streamed(agent, text, session=session)
            async for _ in result.stream_events():
                pass
        else:
            result = await Runner.run(agent, text, session=session)
    assert result.final_output == "You asked about order 42."
    server.assert_done()
    events = await service.get_events("wire")
    assert [event.type for event in events] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.ASSISTANT,
        EventType.USER,
        EventType.ASSISTANT,
    ]
    last = server.requests[-1].messages
    assert [m["role"] for m in last] == ["user", "assistant", "tool", "assistant", "user"]
    assert last[2]["content"] == "order 42 shipped"
    assert last[3]["content"] == "Your order 42 has shipped."


async def _run(agent: Agent[Any], text: str, session: AgentsSession, streamed: bool) -> Any:
    if not streamed:
        return await Runner.run(agent, text, session=session)
    result = Runner.run_streamed(agent, text, session=session)
    async for _ in result.stream_events():
        pass
    return result


@pytest.mark.parametrize("streamed", [False, True], ids=["run", "streamed"])
async def test_responses_model_replays_reasoning_before_its_call(
    service: SessionService,
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
    streamed: bool,
) -> None:
    """With ``store=False``, the reasoning item (encrypted content included) is stored with the
    function call it preceded, and every later request sends it right before that call."""
    model = OpenAIResponsesModel(model="gpt-test", openai_client=client)
    settings = ModelSettings(store=False, response_include=["reasoning.encrypted_content"])
    agent = Agent(name="support", model=model, tools=[lookup], model_settings=settings)
    session = AgentsSession("responses", service)
    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("lookup", {"order": "7"}, id="call_7")], reasoning="Look it up."
        )
    )
    server.enqueue(ScriptedReply.text("Order 7 has shipped."))
    server.enqueue(ScriptedReply.text("You asked about order 7."))
    await _run(agent, "Where is order 7?", session, streamed)
    result = await _run(agent, "What did I ask?", session, streamed)
    assert result.final_output == "You asked about order 7."
    server.assert_done()
    events = await service.get_events("responses")
    call = events[1].message
    assert isinstance(call, AssistantMessage)
    assert call.reasoning
    assert call.reasoning[0]["encrypted_content"]
    assert [c.id for c in call.tool_calls] == ["call_7"]
    sent = server.requests[-1].body["input"]
    kinds = [item.get("type", "message") for item in sent]
    assert kinds == [
        "message",
        "reasoning",
        "function_call",
        "function_call_output",
        "message",
        "message",
    ]
    assert sent[1]["encrypted_content"] == call.reasoning[0]["encrypted_content"]
    assert sent == [*await session.get_items()][:6]


BIG = "".join(f"row {n}: é€\n" for n in range(40_000))  # about 0.5 MiB


@function_tool
def dump(table: str) -> str:
    """Every row of a table."""
    return BIG


async def test_a_large_tool_output_is_sent_as_its_preview_paired_with_its_call(
    service: SessionService, server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A tool output over the store's offload threshold: the run that made it sends it whole;
    later requests send the preview the session reads back, still paired with its call."""
    model = OpenAIResponsesModel(model="gpt-test", openai_client=client)
    agent = Agent(name="support", model=model, tools=[dump])
    session = AgentsSession("large", service)
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("dump", {"table": "t"}, id="c1")]))
    server.enqueue(ScriptedReply.text("Dumped."))
    server.enqueue(ScriptedReply.text("It had 40,000 rows."))
    await Runner.run(agent, "dump t", session=session)
    result = await Runner.run(agent, "how many rows?", session=session)
    assert result.final_output == "It had 40,000 rows."
    server.assert_done()
    first = [i for i in server.requests[1].body["input"] if i.get("call_id") == "c1"]
    later = [i for i in server.requests[2].body["input"] if i.get("call_id") == "c1"]
    assert [i["type"] for i in later] == ["function_call", "function_call_output"]
    assert first[1]["output"] == BIG
    assert BIG.startswith(later[1]["output"])
    assert 0 < len(later[1]["output"]) < 3_000
