"""What ``AdkSessionService`` adds: real message events, a lossless round trip of every part
kind, an ADK ``Runner`` end to end, concurrent appends that lose no state update, retries after
a lost acknowledgement that store nothing twice."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any

import pytest
from adk_support import CountingModel
from google.adk.agents import LlmAgent
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.runners import Runner
from google.adk.sessions import Session
from google.adk.sessions._session_util import make_json_safe_state
from google.genai import types
from losing_service import LosingService

from asyncsession import DefaultSessionService, EventType, InMemorySessionRepository
from asyncsession.exceptions import StorageError, UsageError
from asyncsession.integrations.google_adk import ADK_EVENT, METADATA_KEY, AdkSessionService
from asyncsession.messages import AssistantMessage, ToolResponseMessage, UserMessage
from asyncsession.service import SessionService

EVERY_PART = [
    Event(
        invocation_id="inv",
        author="user",
        content=types.Content(
            role="user",
            parts=[
                types.Part(text="What is in this?"),
                types.Part.from_bytes(data=b"\x89PNG\r\n\x00\xff", mime_type="image/png"),
            ],
        ),
        timestamp=1.5,
    ),
    Event(
        invocation_id="inv",
        author="agent",
        content=types.Content(
            role="model",
            parts=[
                types.Part(text="Thinking it over.", thought=True, thought_signature=b"sig"),
                types.Part(text="Let me look."),
                types.Part(
                    function_call=types.FunctionCall(id="call-1", name="lookup", args={"q": 1})
                ),
            ],
        ),
        usage_metadata=types.GenerateContentResponseUsageMetadata(prompt_token_count=3),
        custom_metadata={"future": [1, {"nested": True}]},
        timestamp=2.5,
    ),
    Event(
        invocation_id="inv",
        author="agent",
        content=types.Content(
            role="user",
            parts=[
                types.Part(
                    function_response=types.FunctionResponse(
                        id="call-1", name="lookup", response={"found": "a cat"}
                    )
                )
            ],
        ),
        timestamp=3.5,
    ),
    Event(
        invocation_id="inv",
        author="agent",
        actions=EventActions(state_delta={"seen": True}, transfer_to_agent="other"),
        timestamp=4.5,
    ),
]


async def test_every_part_kind_reads_back_equal(service: SessionService) -> None:
    adk = AdkSessionService(service)
    session = await adk.create_session(app_name="app", user_id="u", session_id="every")
    for event in EVERY_PART:
        await adk.append_event(session, event)
    got = await adk.get_session(app_name="app", user_id="u", session_id="every")
    assert got is not None
    assert got.events == EVERY_PART
    assert got.state == {"seen": True}
    assert got == session


async def test_events_are_real_message_events(service: SessionService) -> None:
    adk = AdkSessionService(service)
    session = await adk.create_session(app_name="app", user_id="u", session_id="real")
    for event in EVERY_PART:
        await adk.append_event(session, event)
    events = await service.get_events(adk.session_key("app", "u", "real"))
    assert [e.type for e in events] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        ADK_EVENT,
    ]
    user, reply, tool = (e.message for e in events[:3])
    assert isinstance(user, UserMessage)
    assert user.text == "What is in this?"
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call-1", "lookup", '{"q":1}')
    ]
    assert isinstance(tool, ToolResponseMessage)
    assert [(r.id, r.name) for r in tool.responses] == [("call-1", "lookup")]
    assert all(METADATA_KEY in e.metadata for e in events)
    found = await service.find_by_id(adk.session_key("app", "u", "real"))
    assert found is not None
    assert found.user_id == "u"


async def test_a_runner_runs_end_to_end(service: SessionService) -> None:
    """An ADK ``Runner`` with a model that counts what it is sent: the second run sees the
    first run's events, read back from the store."""
    adk = AdkSessionService(service)
    agent = LlmAgent(name="echo", model=CountingModel(model="counting"))
    runner = Runner(app_name="app", agent=agent, session_service=adk)
    await adk.create_session(app_name="app", user_id="u", session_id="run")
    replies: list[str] = []
    for question in ("one", "two"):
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for event in runner.run_async(user_id="u", session_id="run", new_message=message):
            if event.content is not None and event.content.parts:
                replies.append(event.content.parts[0].text or "")
    assert replies == ["sent 1", "sent 3"]
    got = await AdkSessionService(service).get_session(
        app_name="app", user_id="u", session_id="run"
    )
    assert got is not None
    assert [e.author for e in got.events] == ["user", "echo", "user", "echo"]


@pytest.mark.parametrize("scopes", [("",), ("", "user:", "app:")], ids=["session", "all"])
async def test_concurrent_appends_lose_no_state_update(
    service: SessionService, scopes: tuple[str, ...]
) -> None:
    """Forty tasks append through stale copies of one session, each setting its own session
    key (and user and app keys): every event is stored once and every key survives."""
    adk = AdkSessionService(service)
    session = await adk.create_session(app_name="app", user_id="u", session_id="busy")
    names = {"": "s", "user:": "u", "app:": "a"}

    async def append(n: int) -> None:
        stale = session.model_copy(deep=True)
        delta = {f"{scope}{names[scope]}{n}": n for scope in scopes}
        await adk.append_event(stale, Event(author="user", actions=EventActions(state_delta=delta)))

    await asyncio.gather(*(append(n) for n in range(40)))
    got = await adk.get_session(app_name="app", user_id="u", session_id="busy")
    assert got is not None
    assert len(got.events) == 40
    expected: dict[str, Any] = {}
    for n in range(40):
        expected |= {f"{scope}{names[scope]}{n}": n for scope in scopes}
    assert got.state == expected
    user_state = await adk.get_user_state(app_name="app", user_id="u")
    assert user_state == ({f"u{n}": n for n in range(40)} if "user:" in scopes else {})


async def test_a_retry_after_a_lost_ack_stores_once(service: SessionService) -> None:
    losing = LosingService(service, fail=0)
    adk = AdkSessionService(losing)
    session = await adk.create_session(app_name="app", user_id="u", session_id="retry")
    event = Event(author="user", actions=EventActions(state_delta={"k": 1, "user:k": 2}))
    losing.fail = 1
    with pytest.raises(StorageError):
        await adk.append_event(session.model_copy(deep=True), event)
    losing.fail = 1
    with pytest.raises(StorageError):
        await adk.append_event(session.model_copy(deep=True), event)
    await adk.append_event(session, event)
    got = await adk.get_session(app_name="app", user_id="u", session_id="retry")
    assert got is not None
    assert got.events == [event]
    assert got.state == {"k": 1, "user:k": 2}
    assert len(await service.get_events(adk.session_key("app", "u", "retry"))) == 1


class Gadget:
    """A state value of the app's own that JSON has no form for."""

    def __repr__(self) -> str:
        return "Gadget()"


async def test_state_json_cannot_encode_is_stored_as_adks_database_service_stores_it(
    service: SessionService,
) -> None:
    """A callable or an object of the app's own in the state (at creation, in an event's delta,
    in app and user state) is stored as ADK's database service stores it (its
    ``make_json_safe_state``: rich values in their JSON form, the rest as their repr) instead
    of failing the append and storing nothing; the live session object keeps the values."""
    adk = AdkSessionService(service)
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    created = {"callback": print, "when": when, "tags": {"a"}, "blob": b"xy"}
    session = await adk.create_session(
        app_name="app", user_id="u", session_id="s", state=dict(created)
    )
    delta = {"gadget": Gadget(), "app:hook": len, "user:count": 2, "temp:scratch": Gadget()}
    content = types.Content(role="user", parts=[types.Part(text="hi")])
    event = Event(author="user", content=content, actions=EventActions(state_delta=delta))
    await adk.append_event(session, event)
    assert session.state["gadget"] is delta["gadget"]
    stored = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert stored is not None
    assert len(stored.events) == 1
    expected = make_json_safe_state({**created, "gadget": delta["gadget"]})
    expected |= {"app:hook": repr(len), "user:count": 2}
    assert stored.state == expected
    assert stored.state["callback"] == repr(print)
    assert stored.state["gadget"] == "Gadget()"
    assert stored.state["when"] == when.isoformat().replace("+00:00", "Z")


async def test_scopes_with_slashes_stay_apart(service: SessionService) -> None:
    adk = AdkSessionService(service)
    await adk.create_session(app_name="a/b", user_id="c", session_id="s", state={"x": 1})
    await adk.create_session(app_name="a", user_id="b/c", session_id="s", state={"x": 2})
    first = await adk.get_session(app_name="a/b", user_id="c", session_id="s")
    second = await adk.get_session(app_name="a", user_id="b/c", session_id="s")
    assert first is not None
    assert first.state == {"x": 1}
    assert second is not None
    assert second.state == {"x": 2}
    assert [s.id for s in (await adk.list_sessions(app_name="a")).sessions] == ["s"]


async def test_an_unknown_session_is_adks_not_found() -> None:
    adk = AdkSessionService(DefaultSessionService(InMemorySessionRepository()))
    ghost = Session(id="ghost", app_name="app", user_id="u")
    with pytest.raises(ValueError, match="not found"):
        await adk.append_event(ghost, Event(author="user"))


@pytest.mark.parametrize("prefix", ["", " ", "a/b"])
def test_bad_prefixes_are_usage_errors(prefix: str) -> None:
    with pytest.raises(UsageError):
        AdkSessionService(DefaultSessionService(InMemorySessionRepository()), prefix=prefix)
