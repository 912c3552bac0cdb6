"""Database work per chat call, through the whole chain: one read, then only the appends.

On MongoDB the commands are counted with PyMongo command monitoring and compared with the
repository's own cost for the same operations done directly (resolve + read, two appends). On
the in-memory store the repository calls are counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, context
from command_counting import CommandCounter, counted_repository

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    DelegatingSessionService,
    EventFilter,
    SessionEvent,
    UserMessage,
)
from asyncsession.advisors import (
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def chain(openai_client: openai.AsyncOpenAI, service: DefaultSessionService) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            SessionTurnAdvisor(service),
            ToolCallingAdvisor([lookup]),
            SessionMemoryAdvisor(service),
        ],
    )


async def with_history(service: DefaultSessionService, session_id: str) -> None:
    await service.create(CreateSessionRequest(id=session_id, user_id="alice"))
    await service.append_message(session_id, UserMessage(text="earlier"))
    await service.append_message(session_id, AssistantMessage(text="reply"))


# In memory: repository calls.


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_plain_turn_is_one_read_and_two_appends(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """An existing session: the resolve is the window read, then the user message and reply."""
    await with_history(service, "s")
    repository.reset()
    server.enqueue(ScriptedReply.text("ok"))

    await ask(chain(openai_client, service), "hi", streaming=streaming, context=context("s"))

    assert repository.calls == {
        "read_snapshot": 1,
        "append_events": 1,
        "append_event": 1,
    }


async def test_a_turn_on_a_new_session_adds_only_the_create(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """A new session: the read finds nothing, the create makes it, the turn starts again."""
    server.enqueue(ScriptedReply.text("ok"))

    await chain(openai_client, service).call("hi", context=context("new"))

    assert repository.calls == {
        "read_snapshot": 1,
        "save_if_absent": 1,
        "append_events": 1,
        "append_event": 1,
    }


async def test_a_tool_round_costs_appends_only(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """The second round reuses the first read: one read, four appends for a two-round turn."""
    await with_history(service, "s")
    repository.reset()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("ok"),
    )

    await chain(openai_client, service).call("hi", context=context("s"))

    assert repository.calls == {
        "read_snapshot": 1,
        "append_events": 1,
        "append_event": 3,
    }


# On the MongoDB test server: commands on the wire.


@pytest.fixture
async def counted_mongo(
    mongo_uri: str,
) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    async with counted_repository(mongo_uri) as counted:
        yield counted


async def direct_cost(
    repository: MongoSessionRepository, counter: CommandCounter, session_id: str
) -> list[str]:
    """The repository's own commands for resolve + read and two appends, done directly."""
    counter.clear()
    snapshot = await repository.read_snapshot(session_id, EventFilter.active())
    assert snapshot is not None
    for text in ("hi", "ok"):
        message = UserMessage(text=text) if text == "hi" else AssistantMessage(text=text)
        await repository.append_event(SessionEvent(session_id=session_id, message=message))
    return list(counter.names)


@pytest.mark.parametrize("streaming", PATHS)
async def test_on_mongodb_a_plain_turn_costs_no_more_than_its_reads_and_appends(
    streaming: bool,
    counted_mongo: tuple[MongoSessionRepository, CommandCounter],
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """The whole chain sends no more commands than one resolving read and two appends."""
    repository, counter = counted_mongo
    service = DefaultSessionService(repository)
    await with_history(service, "reference")
    await with_history(service, "s")
    budget = await direct_cost(repository, counter, "reference")
    server.enqueue(ScriptedReply.text("ok"))
    counter.clear()

    await ask(chain(openai_client, service), "hi", streaming=streaming, context=context("s"))

    assert len(counter.names) <= len(budget), (counter.names, budget)


@pytest.mark.parametrize("history", [10, 300])
async def test_on_mongodb_a_windowed_turn_costs_the_floor_of_two_commands(
    history: int,
    counted_mongo: tuple[MongoSessionRepository, CommandCounter],
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Resolve + read a 20-event window, store the question at the version read, then the
    reply: 3 commands at every history length (a range of the newest commits each time)."""
    repository, counter = counted_mongo
    service = DefaultSessionService(repository)
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            SessionTurnAdvisor(service),
            ToolCallingAdvisor(),
            SessionMemoryAdvisor(service, event_filter=EventFilter.last_n(20)),
        ],
    )
    await service.create(CreateSessionRequest(id="s", user_id="u"))
    messages = [
        UserMessage(text=f"q{i}") if i % 2 == 0 else AssistantMessage(text=f"a{i}")
        for i in range(history)
    ]
    await repository.append_events("s", [SessionEvent(session_id="s", message=m) for m in messages])
    server.enqueue(ScriptedReply.text("warm"), *(ScriptedReply.text(f"r{i}") for i in range(12)))
    await client.call("warm up", context=context("s"))
    for i in range(12):
        counter.clear()
        reply = await client.call(f"question {i}", context=context("s"))
        assert reply.text == f"r{i}"
        assert counter.names == ["aggregate", "insert", "insert"], counter.names
    window = server.requests[-1].messages
    assert window[-1]["content"] == "question 11"
    stored_before = history + 2 + 11 * 2  # the history, the warm-up turn, 11 question turns
    assert len(window) - 1 in (min(20, stored_before), min(21, stored_before))


async def test_on_mongodb_the_first_turn_of_a_new_session_costs_one_command_more(
    counted_mongo: tuple[MongoSessionRepository, CommandCounter],
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A turn on a session that does not exist yet: the read finds nothing, the session is
    inserted, then the question's commit and the reply's."""
    repository, counter = counted_mongo
    service = DefaultSessionService(repository)
    server.enqueue(ScriptedReply.text("hello"), ScriptedReply.text("again"))
    counter.clear()
    reply = await chain(openai_client, service).call("hi", context=context("fresh", "dana"))
    assert reply.text == "hello"
    assert counter.names == [
        "aggregate",  # the read finds no session
        "insert",  # the session
        "insert",  # the question's commit
        "insert",  # the reply's
    ]
    session = await service.find_by_id("fresh")
    assert session is not None
    assert session.user_id == "dana"
    counter.clear()
    await chain(openai_client, service).call("and now?", context=context("fresh", "dana"))
    assert len(counter.names) == 3, counter.names
    texts = [e.text for e in await service.get_events("fresh", EventFilter.all())]
    assert texts == ["hi", "hello", "and now?", "again"]
    assert [m["content"] for m in server.requests[-1].messages] == ["hi", "hello", "and now?"]


@pytest.mark.parametrize("allow", [False, True])
async def test_a_windowed_turn_looks_system_messages_up_only_where_they_can_be_stored(
    allow: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    repository: CountingRepository,
) -> None:
    """A window without a system message makes the memory advisor look one up, unless the
    service (here behind a delegating decorator) says it never stores system messages."""
    service = DelegatingSessionService(
        DefaultSessionService(repository, allow_system_messages=allow)
    )
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    for i in range(3):
        await service.append_message("s", UserMessage(text=f"q{i}"))
        await service.append_message("s", AssistantMessage(text=f"a{i}"))
    repository.reset()
    server.enqueue(ScriptedReply.text("ok"))
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[SessionMemoryAdvisor(service, event_filter=EventFilter.last_n(2))],
    )
    await client.call("hi", context=context("s"))
    assert repository.calls["find_events"] == (1 if allow else 0)
