"""Edit and regenerate in one call (``replace=``): by rewind (one session) or by fork (both
kept), on the call path and the stream path, on both stores, idempotent with a request id."""

from __future__ import annotations

import asyncio

import openai
import pytest
from chat_support import CLIENTS, MODEL, PATHS, ask, sent, stored

from asyncsession import DefaultSessionService, UserMessage
from asyncsession.advisors import SESSION_ID_CONTEXT_KEY
from asyncsession.events import CreateSessionRequest, EventType
from asyncsession.exceptions import AccessDenied, UsageError
from asyncsession.filters import EventFilter
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


async def _two_turns(client: ChatClient, service: DefaultSessionService) -> tuple[str, str]:
    """A session of alice with two turns through ``client``; its id and the second question's
    event id."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    await client.call("q1", session_id=session.id, user_id="alice")
    await client.call("q2", session_id=session.id, user_id="alice")
    events = await service.get_events(session.id)
    second = next(e for e in events if e.text == "q2")
    return session.id, second.id


@pytest.mark.parametrize("client_type", CLIENTS)
@pytest.mark.parametrize("streaming", PATHS)
async def test_edit_by_rewind_regenerates_from_the_edited_message(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
    streaming: bool,
    client_type: type[ChatClient],
) -> None:
    client = client_type(openai_client, model=MODEL, sessions=store)
    for text in ("a1", "a2", "a2 edited"):
        server.enqueue(ScriptedReply.text(text))
    s, q2 = await _two_turns(client, store)

    response = await ask(
        client, "q2 edited", streaming=streaming, session_id=s, user_id="alice", replace=q2
    )

    assert response.text == "a2 edited"
    if client_type.__name__ == "ChatClient":
        assert sent(server.requests[-1].messages) == ["U:q1", "A:a1", "U:q2 edited"]
    active = await store.get_active_messages(s)
    assert [m.text for m in active] == ["q1", "a1", "q2 edited", "a2 edited"]
    log = await store.get_events(s)
    assert [(e.text, e.archived) for e in log if e.is_message] == [
        ("q1", False), ("a1", False), ("q2", True), ("a2", True),
        ("q2 edited", False), ("a2 edited", False),
    ]  # fmt: skip
    assert sum(e.type == EventType.REWIND for e in log) == 1
    assert await stored(store, s) == ["U:q1", "A:a1", "U:q2", "A:a2", "U:q2 edited", "A:a2 edited"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_edit_by_fork_keeps_both_conversations(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
    streaming: bool,
) -> None:
    client = ChatClient(openai_client, model=MODEL, sessions=store)
    for text in ("a1", "a2", "a2 forked"):
        server.enqueue(ScriptedReply.text(text))
    s, q2 = await _two_turns(client, store)

    response = await ask(
        client,
        "q2 forked",
        streaming=streaming,
        session_id=s,
        user_id="alice",
        replace=q2,
        fork_to=f"{s}-b",
    )

    assert response.text == "a2 forked"
    assert response.context[SESSION_ID_CONTEXT_KEY] == f"{s}-b"
    assert await stored(store, s) == ["U:q1", "A:a1", "U:q2", "A:a2"]
    assert await stored(store, f"{s}-b") == ["U:q1", "A:a1", "U:q2 forked", "A:a2 forked"]
    fork = await store.find_by_id(f"{s}-b")
    assert fork is not None
    assert fork.user_id == "alice"
    assert fork.forked_from is not None
    assert (fork.forked_from.session_id, fork.forked_from.version) == (s, 2)


@pytest.mark.parametrize("fork", [False, True], ids=["rewind", "fork"])
async def test_a_repeated_edit_with_a_request_id_calls_the_model_once(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
    fork: bool,
) -> None:
    """Eight concurrent attempts of one edit request, then a late retry: one model call, one
    rewind (or one fork), one stored question and reply."""
    client = ChatClient(openai_client, model=MODEL, sessions=store)
    for text in ("a1", "a2", "edited"):
        server.enqueue(ScriptedReply.text(text))
    s, q2 = await _two_turns(client, store)
    target = f"{s}-b" if fork else s
    keywords = {
        "session_id": s,
        "user_id": "alice",
        "replace": q2,
        "request_id": "edit-1",
        "fork_to": target if fork else None,
    }

    async def attempt() -> str:
        return (await client.call(UserMessage(text="q2 edited"), **keywords)).text

    replies = await asyncio.gather(*(attempt() for _ in range(8)))
    replies.append(await attempt())

    assert replies == ["edited"] * 9
    assert len(server.requests) == 3
    log = await store.get_events(target)
    assert [e.text for e in log if e.is_message and not e.archived] == [
        "q1", "a1", "q2 edited", "edited",
    ]  # fmt: skip
    assert sum(e.type == EventType.REWIND for e in log) == (0 if fork else 1)


async def test_an_edit_is_refused_before_anything_is_written(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    client = ChatClient(openai_client, model=MODEL, sessions=service)
    for text in ("a1", "a2"):
        server.enqueue(ScriptedReply.text(text))
    s, q2 = await _two_turns(client, service)
    version = await service.get_event_version(s)
    with pytest.raises(AccessDenied):
        await client.call("x", session_id=s, user_id="mallory", replace=q2)
    with pytest.raises(UsageError, match="no event"):
        await client.call("x", session_id=s, user_id="alice", replace="no-such-event")
    with pytest.raises(UsageError, match="fork_to needs replace"):
        await client.call("x", session_id=s, fork_to="other")
    plain = ChatClient(openai_client, model=MODEL)
    with pytest.raises(UsageError, match="session memory"):
        await plain.call("x", replace=q2)
    assert await service.get_event_version(s) == version
    assert len(server.requests) == 2
    assert await service.get_events(s, EventFilter.all()) == await service.get_events(s)
