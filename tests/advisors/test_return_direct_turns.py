"""Turns that end on return-direct tools: retries of their request replay them, and a turn stored
with its reply (``store_question="with_reply"``) stores them in its one write."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, label, turn

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    UserMessage,
)
from asyncsession.chat import ChatChunk, ChatResponse
from asyncsession.exceptions import UsageError
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from asyncsession.tools import Tool

CLIENTS = [pytest.param(ChatClient, id="chat"), pytest.param(ResponsesClient, id="responses")]
STORE_QUESTION = [pytest.param("first", id="first"), pytest.param("with_reply", id="with_reply")]
RESULTS = [("c1", "ticket 7: open"), ("c2", "ticket 7: alice")]
TURN = ["U:Ticket 7?", "A[ticket,owner]", "T[ticket->ticket 7: open,owner->ticket 7: alice]"]


@pytest.fixture(params=["memory", "mongo"])
def repository_of_each_store(request: pytest.FixtureRequest) -> Any:
    """The repository of each store (the MongoDB one on a fresh test database)."""
    if request.param == "memory":
        return InMemorySessionRepository()
    return MongoSessionRepository(request.getfixturevalue("mongo_db"))


@pytest.fixture
async def store(repository_of_each_store: Any) -> DefaultSessionService:
    """A session service on each store."""
    if isinstance(repository_of_each_store, MongoSessionRepository):
        await repository_of_each_store.ensure_indexes()
    return DefaultSessionService(repository_of_each_store)


@dataclass
class Desk:
    """Two return-direct tools that record every run; ``gate``, when set, holds them."""

    runs: list[str] = field(default_factory=list[str])
    started: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event | None = None
    owner_text: str = "alice"

    def tools(self) -> list[Tool]:
        async def ticket(number: int) -> str:
            """Show a ticket."""
            self.runs.append(f"ticket {number}")
            self.started.set()
            if self.gate is not None:
                await self.gate.wait()
            return f"ticket {number}: open"

        async def owner(number: int) -> str:
            """Show who owns a ticket."""
            self.runs.append(f"owner {number}")
            return f"ticket {number}: {self.owner_text}"

        return [Tool.from_function(f, return_direct=True) for f in (ticket, owner)]


def client_of(
    kind: type[ChatClient] | type[ResponsesClient],
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    desk: Desk,
    *,
    store_question: Any = "first",
) -> ChatClient | ResponsesClient:
    """A client with session memory and the desk's tools (two clients act like two
    processes: they share only the store)."""
    return kind(
        openai_client,
        model=MODEL,
        sessions=service,
        store_question=store_question,
        tools=desk.tools(),
    )


def ticket_calls(**options: Any) -> ScriptedReply:
    return ScriptedReply.tool_calls(
        [
            ScriptedToolCall("ticket", {"number": 7}, id="c1"),
            ScriptedToolCall("owner", {"number": 7}, id="c2"),
        ],
        **options,
    )


def retry_of(request_id: str) -> dict[str, Any]:
    return turn("s", "alice", request_id=request_id)


async def ask(
    client: Any, user: str, *, streaming: bool, ctx: dict[str, Any]
) -> tuple[ChatResponse, list[ChatChunk]]:
    """The response of one call or stream (read to the end), with the stream's chunks."""
    if not streaming:
        return await client.call(user, **ctx), []
    async with client.stream(user, **ctx) as stream:
        chunks = [chunk async for chunk in stream]
    return stream.response, chunks


def result_chunks(chunks: list[ChatChunk]) -> list[tuple[str, str | None, str, str | None]]:
    """The chunks that carry return-direct results: text, result id and data, finish reason."""
    return [
        (c.text, c.tool_result.id, c.tool_result.data, c.finish_reason)
        for c in chunks
        if c.tool_result is not None
    ]


EXPECTED_CHUNKS = [
    ("ticket 7: open", "c1", "ticket 7: open", None),
    ("\nticket 7: alice", "c2", "ticket 7: alice", "return_direct"),
]


async def stored(service: DefaultSessionService, session_id: str = "s") -> list[str]:
    return [label(e.message) for e in await service.get_events(session_id) if e.message]


def assert_returned(response: ChatResponse) -> None:
    """``response`` is the turn that ended on the desk's two tools."""
    assert response.finish_reason == "return_direct"
    assert response.has_tool_calls is False
    assert [call.id for call in response.tool_calls] == ["c1", "c2"]
    assert response.tool_results is not None
    assert [(r.id, r.data) for r in response.tool_results.responses] == RESULTS
    assert response.text == "ticket 7: open\nticket 7: alice"


# --- Idempotent retries of a turn that ended on return-direct tools --------------------------


@pytest.mark.parametrize("retry_streaming", PATHS)
@pytest.mark.parametrize("first_streaming", PATHS)
@pytest.mark.parametrize("store_question", STORE_QUESTION)
@pytest.mark.parametrize("kind", CLIENTS)
async def test_a_retry_of_a_return_direct_turn_replays_it_without_the_model_or_the_tools(
    kind: type[ChatClient] | type[ResponsesClient],
    store_question: str,
    first_streaming: bool,
    retry_streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The retry gets the same tool call, results, finish reason and event ids (a stream the
    same result chunks); the model and the tools ran once, and the retry stores nothing."""
    server.enqueue(ticket_calls())
    desk = Desk()
    client = client_of(kind, openai_client, store, desk, store_question=store_question)

    first, first_chunks = await ask(
        client, "Ticket 7?", streaming=first_streaming, ctx=retry_of("r1")
    )
    version = await store.get_event_version("s")
    again, chunks = await ask(client, "Ticket 7?", streaming=retry_streaming, ctx=retry_of("r1"))

    assert_returned(first)
    assert_returned(again)
    assert again.tool_results == first.tool_results
    assert again.message.tool_calls == first.message.tool_calls
    assert again.request_event_ids == first.request_event_ids
    assert again.response_event_ids == first.response_event_ids
    assert len(server.requests) == 1
    assert desk.runs == ["ticket 7", "owner 7"]
    assert await stored(store) == TURN
    assert await store.get_event_version("s") == version
    if first_streaming:
        assert result_chunks(first_chunks) == EXPECTED_CHUNKS
    if retry_streaming:
        assert result_chunks(chunks) == EXPECTED_CHUNKS
        round_chunk = chunks[0]
        assert [d.id for d in round_chunk.tool_calls] == ["c1", "c2"]
        assert round_chunk.finish_reason == "tool_calls"
        assert [c.tool_result is not None for c in chunks] == [False, True, True]
    server.assert_done()


@pytest.mark.parametrize("store_question", STORE_QUESTION)
async def test_many_concurrent_attempts_of_a_return_direct_request_run_the_tools_once(
    store_question: str,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """Twenty overlapping attempts of one new request, calls and streams, on four clients that
    share only the store (like four processes): the model is called once, each tool runs once,
    the turn is stored once and every attempt gets its results; then twenty concurrent retries
    of the completed request call nothing and store nothing."""
    hold = asyncio.Event()
    server.enqueue(ticket_calls(hold=hold))
    desks = [Desk() for _ in range(4)]
    clients = [
        client_of(ChatClient, openai_client, store, d, store_question=store_question) for d in desks
    ]

    async def attempts() -> list[tuple[ChatResponse, list[ChatChunk]]]:
        tasks = [
            asyncio.create_task(
                ask(clients[i % 4], "Ticket 7?", streaming=i % 3 == 0, ctx=retry_of("r1"))
            )
            for i in range(20)
        ]
        return await asyncio.gather(*tasks)

    first_wave = asyncio.create_task(attempts())
    await asyncio.wait_for(server.wait_for_request(0), 10)
    hold.set()
    answers = await first_wave
    version = await store.get_event_version("s")
    retries = await attempts()

    for response, chunks in [*answers, *retries]:
        assert_returned(response)
        if chunks:
            assert result_chunks(chunks) == EXPECTED_CHUNKS
    assert len(server.requests) == 1
    assert sorted(run for d in desks for run in d.runs) == ["owner 7", "ticket 7"]
    assert await stored(store) == TURN
    assert await store.get_event_version("s") == version
    ids = {r.request_event_ids for r, _ in [*answers, *retries]}
    assert len(ids) == 1


# --- store_question="with_reply" with return-direct tools -------------------------------------


async def with_history(service: DefaultSessionService) -> None:
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_messages(
        "s", [UserMessage(text="earlier"), AssistantMessage(text="noted")]
    )


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("kind", CLIENTS)
async def test_with_reply_the_question_the_call_and_the_results_are_one_write(
    kind: type[ChatClient] | type[ResponsesClient],
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The question, the tool call and the results land in order, once each, in one append;
    the results are marked; the next prompt replays all three."""
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(ticket_calls(), ScriptedReply.text("Anything else?"))
    desk = Desk()
    client = client_of(kind, openai_client, store, desk, store_question="with_reply")

    response, chunks = await ask(client, "Ticket 7?", streaming=streaming, ctx=turn("s"))

    assert_returned(response)
    if streaming:
        assert result_chunks(chunks) == EXPECTED_CHUNKS
    assert await stored(store) == ["U:earlier", "A:noted", *TURN]
    assert await store.get_event_version("s") == version + 1
    events = (await store.get_events("s"))[2:]
    assert response.request_event_ids == (events[0].id, events[2].id)
    assert response.response_event_ids == (events[1].id,)
    assert events[2].metadata == {"return_direct": True}
    assert len({e.id for e in events}) == 3

    await ask(client, "Thanks", streaming=streaming, ctx=turn("s"))

    replayed = server.requests[1]
    if kind is ChatClient:
        roles = [m["role"] for m in replayed.messages]
        assert roles == ["user", "assistant", "user", "assistant", "tool", "tool", "user"]
        assert [m.get("tool_call_id") for m in replayed.messages[4:6]] == ["c1", "c2"]
    else:
        assert [i.get("type", "message") for i in replayed.input] == [
            "message",
            "message",
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
        ]
    assert await stored(store) == ["U:earlier", "A:noted", *TURN, "U:Thanks", "A:Anything else?"]
    assert await store.get_event_version("s") == version + 2
    assert desk.runs == ["ticket 7", "owner 7"]
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
async def test_with_reply_a_turn_cancelled_during_the_tools_stores_nothing(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The model asked for the tools; the call is cancelled while they run: the log is as it
    was, the question included."""
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(ticket_calls())
    desk = Desk(gate=asyncio.Event())  # never set: the tools run until cancelled
    client = client_of(ChatClient, openai_client, store, desk, store_question="with_reply")

    task = asyncio.create_task(ask(client, "Ticket 7?", streaming=streaming, ctx=turn("s")))
    await asyncio.wait_for(desk.started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert "ticket 7" in desk.runs
    assert await stored(store) == ["U:earlier", "A:noted"]
    assert await store.get_event_version("s") == version


@pytest.mark.parametrize("streaming", PATHS)
async def test_with_reply_results_the_store_refuses_store_nothing_of_the_turn(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """A result that does not encode as UTF-8 fails the turn before its write: neither the
    question nor the tool call is stored without it."""
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(ticket_calls())
    desk = Desk(owner_text="\ud800")
    client = client_of(ChatClient, openai_client, store, desk, store_question="with_reply")

    with pytest.raises(UsageError):
        await ask(client, "Ticket 7?", streaming=streaming, ctx=turn("s"))

    assert desk.runs == ["ticket 7", "owner 7"]
    assert await stored(store) == ["U:earlier", "A:noted"]
    assert await store.get_event_version("s") == version
