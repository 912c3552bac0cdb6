"""Google ADK tool confirmation and orphaned calls through ``AdkSessionService``.

A tool that requires confirmation (``FunctionTool(require_confirmation=True)``, or one that calls
``tool_context.request_confirmation``) stops the invocation with ADK's
``adk_request_confirmation`` call; a later invocation, through a new runner and a new service
object, answers it (confirmed or not). The same script runs on ADK's ``InMemorySessionService``
(the reference) and on ours over both stores: the stored events, the tool's runs and what the
model is sent must be the reference's.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from adk_support import ScriptedModel
from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.adk.tools.function_tool import FunctionTool
from google.adk.tools.tool_context import ToolContext
from google.genai import types
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.service import SessionService

CONFIRM = "adk_request_confirmation"


def _call(name: str, call_id: str, **args: Any) -> types.Content:
    call = types.FunctionCall(id=call_id, name=name, args=args)
    return types.Content(role="model", parts=[types.Part(function_call=call)])


def _text(text: str) -> types.Content:
    return types.Content(role="model", parts=[types.Part(text=text)])


def _summary(contents: list[types.Content], rename: dict[str, str]) -> list[Any]:
    """Contents as (role, parts) with ADK's random confirmation ids renamed."""
    out: list[Any] = []
    for content in contents:
        parts: list[Any] = []
        for part in content.parts or []:
            if part.function_call is not None:
                call = part.function_call
                parts.append(("call", call.name, rename.get(call.id or "", call.id), call.args))
            elif part.function_response is not None:
                answer = part.function_response
                response = json.loads(json.dumps(answer.response, default=str))
                answer_id = rename.get(answer.id or "", answer.id)
                parts.append(("answer", answer.name, answer_id, response))
            else:
                parts.append(("text", part.text))
        out.append((content.role, parts))
    return out


async def _confirmation_scenario(
    make_service: Callable[[], BaseSessionService], confirmed: bool, dynamic: bool
) -> dict[str, Any]:
    """Run the scenario on services ``make_service`` builds (one per invocation)."""
    runs: list[str] = []

    def refund(order: str) -> dict[str, str]:
        """Refund an order."""
        runs.append(order)
        return {"status": f"order {order} refunded"}

    def refund_asking(order: str, tool_context: ToolContext) -> dict[str, str]:
        """Refund an order, asking first."""
        confirmation = tool_context.tool_confirmation
        if confirmation is None:
            tool_context.request_confirmation(hint=f"refund order {order}?")
            return {"status": "waiting for a person"}
        if not confirmation.confirmed:
            return {"status": "declined"}
        runs.append(order)
        return {"status": f"order {order} refunded"}

    tool = (
        FunctionTool(refund_asking) if dynamic else FunctionTool(refund, require_confirmation=True)
    )
    name = tool.name
    # A tool that asks by itself answers the call at once: ADK sends that to the model, whose
    # reply ends the first invocation, after the confirmation request.
    waiting = [_text("A person must confirm.")] if dynamic else []
    replies = [_call(name, "fc-1", order="7"), *waiting, _text("Done.")]
    model = ScriptedModel(model="scripted", replies=replies, sent=[])
    agent = LlmAgent(name="support", model=model, tools=[tool])
    first = make_service()
    session = await first.create_session(app_name="shop", user_id="u", session_id="s")
    question = types.Content(role="user", parts=[types.Part(text="refund order 7")])
    paused = [
        event
        async for event in Runner(app_name="shop", agent=agent, session_service=first).run_async(
            user_id="u", session_id=session.id, new_message=question
        )
    ]
    asks = [c for e in paused for c in e.get_function_calls() if c.name == CONFIRM]
    assert len(asks) == 1
    assert asks[0].id is not None
    assert runs == []
    answer = types.FunctionResponse(id=asks[0].id, name=CONFIRM, response={"confirmed": confirmed})
    message = types.Content(role="user", parts=[types.Part(function_response=answer)])
    later = make_service()  # a later invocation: a new runner on a new service object
    finished = [
        event
        async for event in Runner(app_name="shop", agent=agent, session_service=later).run_async(
            user_id="u", session_id=session.id, new_message=message
        )
    ]
    stored = await make_service().get_session(app_name="shop", user_id="u", session_id="s")
    assert stored is not None
    rename = {asks[0].id: "confirmation"}

    def shown(events: list[Event]) -> list[Any]:
        return [(e.author, _summary([e.content], rename)) for e in events if e.content]

    return {
        "runs": list(runs),
        "final": [p.text for e in finished if e.content for p in e.content.parts or [] if p.text],
        "sent": [_summary(contents, rename) for contents in model.sent],
        "events": shown(stored.events),
        "returned": shown(paused + finished),
        "pending": [
            sorted(rename.get(i, i) for i in e.long_running_tool_ids or ()) for e in stored.events
        ],
    }


@pytest.mark.parametrize("dynamic", [False, True], ids=["require_confirmation", "request"])
@pytest.mark.parametrize("confirmed", [True, False], ids=["confirmed", "declined"])
async def test_a_confirmation_answered_in_a_later_invocation(
    adk_service: BaseSessionService, confirmed: bool, dynamic: bool
) -> None:
    """The events stored, the tool's runs and every model request equal the reference's (ADK's
    in-memory service); the tool ran once when confirmed, never when declined."""
    if isinstance(adk_service, AdkSessionService):
        ours = adk_service.service
        got = await _confirmation_scenario(lambda: AdkSessionService(ours), confirmed, dynamic)
    else:
        got = await _confirmation_scenario(lambda: adk_service, confirmed, dynamic)
    reference = InMemorySessionService()
    expected = await _confirmation_scenario(lambda: reference, confirmed, dynamic)
    assert got == expected
    assert got["runs"] == (["7"] if confirmed else [])
    assert got["final"] == ["Done."]
    last = got["sent"][-1]
    answers = [part for _, parts in last for part in parts if part[0] == "answer"]
    assert answers[-1][2] == "fc-1"
    assert len(got["sent"]) == (3 if dynamic else 2)


@pytest.mark.mongodb
async def test_a_run_killed_in_its_tool_leaves_a_session_the_next_run_can_use(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """``kill -9`` while a tool runs, in another OS process: ADK stored the model's call (an
    event of its own) and no response; our service returns that log as stored, and the next
    invocation sends the model the same contents as ADK's in-memory service holding the same
    events: ADK leaves the unanswered call out of the request, which stays well-formed."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(Path(__file__).with_name("adk_crash_script.py")),
        mongo_uri,
        mongo_db.name,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert process.stderr is not None
    line = await asyncio.wait_for(process.stdout.readline(), 120)
    assert line == b"running\n", (await process.stderr.read()).decode()[-3000:]
    process.send_signal(signal.SIGKILL)
    assert await process.wait() == -signal.SIGKILL

    ours = AdkSessionService(DefaultSessionService(repository))
    left = await ours.get_session(app_name="shop", user_id="u", session_id="s")
    assert left is not None
    assert [(e.author, _summary([e.content], {})) for e in left.events if e.content] == [
        ("user", [("user", [("text", "look up order 9")])]),
        ("support", [("model", [("call", "lookup", "fc-9", {"order": "9"})])]),
    ]
    reference = InMemorySessionService()
    copy = await reference.create_session(app_name="shop", user_id="u", session_id="s")
    for event in left.events:
        await reference.append_event(copy, event)
    sent: dict[str, Any] = {}
    for name, service in (("ours", ours), ("reference", reference)):
        model = ScriptedModel(model="scripted", replies=[_text("Order 9 is on its way.")], sent=[])
        agent = LlmAgent(name="support", model=model, tools=[FunctionTool(_lookup)])
        message = types.Content(role="user", parts=[types.Part(text="and order 9?")])
        replies = [
            part.text
            async for event in Runner(
                app_name="shop", agent=agent, session_service=service
            ).run_async(user_id="u", session_id="s", new_message=message)
            if event.content
            for part in event.content.parts or []
            if part.text
        ]
        assert replies == ["Order 9 is on its way."]
        sent[name] = [_summary(contents, {}) for contents in model.sent]
    assert sent["ours"] == sent["reference"]
    assert sent["ours"] == [
        [
            ("user", [("text", "look up order 9")]),
            ("user", [("text", "and order 9?")]),
        ]
    ]


def _lookup(order: str) -> dict[str, str]:
    """The status of an order."""
    return {"status": f"order {order} on its way"}


async def test_a_large_tool_result_is_sent_as_a_preview_and_keeps_its_event(
    service: SessionService,
) -> None:
    """A tool result over the store's offload threshold: the next model request holds its
    preview (the first characters and the whole length), and every event keeps its id, author,
    invocation and state delta, as ADK's in-memory service keeps them."""
    big = "".join(f"match {n}: é€\n" for n in range(60_000))

    def search(query: str, tool_context: ToolContext) -> dict[str, str]:
        """Search everything."""
        tool_context.state["searched"] = query
        return {"result": big}

    async def run(service: BaseSessionService) -> tuple[list[Any], list[Any], dict[str, Any]]:
        model = ScriptedModel(
            model="scripted",
            replies=[_call("search", "fc-1", query="q"), _text("Found."), _text("Bye.")],
            sent=[],
        )
        agent = LlmAgent(name="support", model=model, tools=[FunctionTool(search)])
        await service.create_session(app_name="shop", user_id="u", session_id="s")
        runner = Runner(app_name="shop", agent=agent, session_service=service)
        returned: list[Any] = []
        for text in ("search q", "thanks"):
            message = types.Content(role="user", parts=[types.Part(text=text)])
            async for event in runner.run_async(user_id="u", session_id="s", new_message=message):
                returned.append((event.id, event.author, event.invocation_id))
        stored = await service.get_session(app_name="shop", user_id="u", session_id="s")
        assert stored is not None
        events = [(e.id, e.author, e.invocation_id) for e in stored.events]
        assert [e for e in events if e[1] != "user"] == returned  # questions are not returned
        return model.sent, events, dict(stored.state)

    sent, events, state = await run(AdkSessionService(service))
    reference_sent, reference_events, reference_state = await run(InMemorySessionService())
    assert state == reference_state == {"searched": "q"}
    assert [author for _, author, _ in events] == [a for _, a, _ in reference_events]
    answer = _summary(sent[-1], {})[2]
    whole = _summary(reference_sent[-1], {})[2]
    assert whole == ("user", [("answer", "search", "fc-1", {"result": big})])
    preview = answer[1][0][3]  # the first characters of the response as JSON, and its length
    whole_json = json.dumps({"result": big}, separators=(",", ":"), ensure_ascii=False)
    assert preview["total_chars"] == len(whole_json)
    assert 0 < len(preview["result"]) < 3_000
    assert whole_json.startswith(preview["result"])
    assert _summary(sent[-1], {})[:2] == _summary(reference_sent[-1], {})[:2]
    assert _summary(sent[-1], {})[3:] == _summary(reference_sent[-1], {})[3:]
