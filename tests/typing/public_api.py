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
    ChatResponse,
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
    StorageUnavailable,
    Tool,
    UsageError,
    UserMessage,
    __version__,
    tool,
)
from asyncsession.advisors import SESSION_ID_CONTEXT_KEY, Advisor
from asyncsession.compaction import (
    CompactionResult,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.exceptions import StorageError
from asyncsession.openai import ChatClient, ChatStream, ResponsesClient
from asyncsession.repository import SessionSnapshot


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
    """Both OpenAI clients: calls and streams by keyword, tools, compaction, advisors."""
    assert_type(lookup, Tool)
    client = ChatClient(
        model,
        model="gpt-4o-mini",
        sessions=service,
        tools=[lookup],
        compaction=(TurnCountTrigger(20), SlidingWindowCompactionStrategy(max_events=10)),
        advisors=[Advisor()],
    )
    reply = await client.call("hi", session_id="s1", user_id="u", request_id="r1")
    assert_type(reply, ChatResponse)
    assert_type(reply.text, str)
    assert_type(reply.request_event_ids, tuple[str, ...])
    stream = client.stream("hi", session_id="s1")
    assert_type(stream, ChatStream)
    responses = ResponsesClient(
        model, model="gpt-4.1-mini", sessions=service, store_question="with_reply"
    )
    assert_type(await responses.call("hi", context={SESSION_ID_CONTEXT_KEY: "s1"}), ChatResponse)
    assert_type(AssistantMessage(text="x").text, str | None)
