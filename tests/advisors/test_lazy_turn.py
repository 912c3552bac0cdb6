"""The lazily resolved turn: a user's advisor between the turn and memory advisors.

The turn advisor names no other advisor class. The session is resolved by the first advisor that
needs it: the memory advisor in the step that starts the turn, an advisor of your own through
``SessionContexts.session``, or the chain right before the model when nobody asked.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, context, sent, stored
from command_counting import CommandCounter, counted_repository

from asyncsession import (
    AccessDenied,
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    Session,
    UsageError,
    UserMessage,
)
from asyncsession.advisors import (
    HIGHEST_PRECEDENCE,
    BaseAdvisor,
    CallContext,
    SessionContexts,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
)
from asyncsession.chat import ChatRequest, ChatResponse
from asyncsession.openai import ChatClient
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

BETWEEN = HIGHEST_PRECEDENCE + 250  # after the turn advisor, before the tool loop


class Tagger(BaseAdvisor):
    """A user's advisor that never touches the session: it tags the reply."""

    order = BETWEEN

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        ctx.context["tagged"] = True
        return response


class SessionReader(BaseAdvisor):
    """A user's advisor that needs the session: it asks for it and reads its events."""

    order = BETWEEN

    def __init__(self, service: DefaultSessionService) -> None:
        self.service = service
        self.sessions: list[Session] = []
        self.event_counts: list[int] = []

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        session = await SessionContexts.session(ctx)
        self.sessions.append(session)
        self.event_counts.append(len(await self.service.get_events(session.id)))
        return request


class Answerer(BaseAdvisor):
    """A user's advisor that answers without calling the model (a cache)."""

    order = BETWEEN

    async def call(self, ctx: CallContext, request: ChatRequest, call_next: Any) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(text="cached"), finish_reason="stop")


def client_with(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService, between: BaseAdvisor
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            SessionTurnAdvisor(service),
            between,
            ToolCallingAdvisor(),
            SessionMemoryAdvisor(service),
        ],
    )


@pytest.fixture
async def counted_mongo(
    mongo_uri: str,
) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    async with counted_repository(mongo_uri) as counted:
        yield counted


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_that_does_not_touch_the_session_keeps_the_two_command_turn(
    streaming: bool,
    counted_mongo: tuple[MongoSessionRepository, CommandCounter],
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """With a user's advisor in between, a steady turn costs what the service's turn costs: a
    read, the question's insert, the reply's insert (4 on a new session: the read, the
    session's insert and the two inserts)."""
    repository, counter = counted_mongo
    service = DefaultSessionService(repository)
    client = client_with(openai_client, service, Tagger())
    server.enqueue(*(ScriptedReply.text(f"r{i}") for i in range(4)))

    counter.clear()
    await ask(client, "first", streaming=streaming, context=context("s", "alice"))
    assert len(counter.names) == 4, counter.names
    for i in range(1, 4):
        counter.clear()
        await ask(client, f"q{i}", streaming=streaming, context=context("s", "alice"))
        assert counter.names == ["aggregate", "insert", "insert"], counter.names

    assert await stored(service, "s") == [
        "U:first",
        "A:r0",
        *(label for i in range(1, 4) for label in (f"U:q{i}", f"A:r{i}")),
    ]


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_that_reads_the_session_gets_it_resolved_and_stays_correct(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """An advisor asking for the session in between sees it created with its owner; the memory
    advisor reuses that read, stores the message once and sends the whole history."""
    reader = SessionReader(service)
    client = client_with(openai_client, service, reader)
    server.enqueue(ScriptedReply.text("r0"), ScriptedReply.text("r1"))

    await ask(client, "first", streaming=streaming, context=context("new", "bob"))
    repository.reset()
    await ask(client, "second", streaming=streaming, context=context("new", "bob"))

    assert [s.user_id for s in reader.sessions] == ["bob", "bob"]
    assert reader.event_counts == [0, 2]
    assert await stored(service, "new") == ["U:first", "A:r0", "U:second", "A:r1"]
    assert sent(server.requests[-1].messages) == ["U:first", "A:r0", "U:second"]
    assert repository.calls["read_snapshot"] == 1  # the reader's resolve; memory reused it


async def test_an_advisor_that_reads_the_session_is_refused_a_foreign_one(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The resolve an advisor asks for checks the owner: another user's session is refused."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="secret"))
    reader = SessionReader(service)

    with pytest.raises(AccessDenied):
        await client_with(openai_client, service, reader).call("hi", context=context("s", "eve"))

    assert reader.event_counts == []
    assert server.requests == []
    assert await stored(service, "s") == ["U:secret"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_without_a_memory_advisor_the_owner_is_checked_before_the_model(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Nobody asked for the session: the chain resolves it before the model, and refuses."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    client = ChatClient(
        openai_client, model=MODEL, advisors=[SessionTurnAdvisor(service), Tagger()]
    )

    with pytest.raises(AccessDenied):
        await ask(client, "hi", streaming=streaming, context=context("s", "eve"))

    assert server.requests == []


async def test_an_advisor_that_answers_for_the_model_still_gets_the_session_created(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A call answered in between (no model, no memory advisor) still creates the session."""
    reply = await client_with(openai_client, service, Answerer()).call(
        "hi", context=context("cached", "carol")
    )

    assert reply.text == "cached"
    session = await service.find_by_id("cached")
    assert session is not None
    assert session.user_id == "carol"
    assert server.requests == []


async def test_asking_for_the_session_needs_a_turn_advisor(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Without a SessionTurnAdvisor further out, SessionContexts.session is a usage error."""
    reader = SessionReader(service)
    client = ChatClient(
        openai_client, model=MODEL, advisors=[reader, SessionMemoryAdvisor(service)]
    )

    with pytest.raises(UsageError, match="SessionTurnAdvisor"):
        await client.call("hi", context=context("s"))


def test_the_turn_advisor_names_no_other_advisor_class() -> None:
    """turn.py imports no other advisor module: it decides by the shared turn state."""
    import ast
    from pathlib import Path

    import asyncsession.advisors.turn as turn

    tree = ast.parse(Path(turn.__file__).read_text(encoding="utf-8"))
    imported = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module is not None
    }
    assert not imported & {"memory", "tools", "recall", "auto_memory"}
    assert not hasattr(turn, "_TRANSPARENT")
