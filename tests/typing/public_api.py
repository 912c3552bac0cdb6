"""The public API's types, as a user's type checker sees them (checked, never executed).

`scripts/test` runs mypy and pyright (both strict) over this file: a signature that loses its
types, or returns something else than documented, fails the gate. pytest does not collect it
(its name does not start with ``test_``), and nothing here runs.
"""

from __future__ import annotations

from typing import assert_type

import openai

from asyncsession import (
    AssistantMessage,
    CompactionResult,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    Message,
    MongoSessionRepository,
    Session,
    SessionEvent,
    SessionNotFound,
    SessionRepository,
    SessionService,
    SessionSnapshot,
    StorageError,
    StorageUnavailable,
    UsageError,
    UserMessage,
    __version__,
)
from asyncsession.advisors import (
    SESSION_ID_CONTEXT_KEY,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.chat import ChatResponse
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.openai import ChatClient, ChatStream, ResponsesClient
from asyncsession.tools import Tool, tool


async def sessions(service: SessionService) -> None:
    """The service's reads and writes."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    assert_type(session, Session)
    event = await service.append_message(session.id, UserMessage(text="hi"))
    assert_type(event, SessionEvent)
    assert_type(await service.append_events(session.id, [event], expected_version=1), bool)
    turn = await service.append_messages(
        session.id, [UserMessage(text="q"), AssistantMessage(text="a")], event_ids=("q", "a")
    )
    assert_type(turn, list[SessionEvent])
    assert_type(await service.get_events(session.id), list[SessionEvent])
    assert_type(
        await service.get_events(session.id, EventFilter(last_n=20, exclude_archived=True)),
        list[SessionEvent],
    )
    assert_type(
        await service.get_snapshot(session.id, EventFilter.active()), SessionSnapshot | None
    )
    assert_type(await service.get_messages(session.id), list[Message])
    assert_type(await service.get_event_version(session.id), int)
    assert_type(
        await service.compact(
            session.id, TurnCountTrigger(20), SlidingWindowCompactionStrategy(max_events=10)
        ),
        CompactionResult,
    )


def stores(db: object) -> None:
    """Both stores are repositories; the default service takes either."""
    memory: SessionRepository = InMemorySessionRepository()
    assert_type(DefaultSessionService(memory), DefaultSessionService)
    assert_type(
        MongoSessionRepository.from_uri("mongodb://localhost", "app"), MongoSessionRepository
    )
    assert_type(__version__, str)


def errors() -> None:
    """One tree: the store's outages are storage errors, bad input is a ValueError."""
    unavailable: StorageError = StorageUnavailable("down")
    usage: ValueError = UsageError("bad")
    missing = SessionNotFound("s")
    lookup_error: LookupError = missing
    assert_type(missing.session_id, str)
    del unavailable, usage, lookup_error


@tool
def lookup(key: str) -> str:
    """Look a key up.

    Args:
        key: what to look up.
    """
    return key


async def chat(model: openai.AsyncOpenAI, service: SessionService) -> None:
    """Both OpenAI clients: calls, streams and tools."""
    assert_type(lookup, Tool)
    advisors = [SessionTurnAdvisor(service), SessionMemoryAdvisor(service)]
    context = {SESSION_ID_CONTEXT_KEY: "s1"}
    client = ChatClient(model, model="gpt-4o-mini", advisors=advisors)
    reply = await client.call("hi", context=context, tools=[lookup])
    assert_type(reply, ChatResponse)
    assert_type(reply.text, str)
    stream = client.stream("hi", context=context)
    assert_type(stream, ChatStream)
    responses = ResponsesClient(model, model="gpt-4.1-mini", advisors=advisors)
    assert_type(await responses.call("hi", context=context), ChatResponse)
    key: str = SessionMemoryAdvisor.SESSION_ID_CONTEXT_KEY  # the reference's attribute
    assert key == SESSION_ID_CONTEXT_KEY
    assert_type(AssistantMessage(text="x").text, str | None)
