"""A reply the server compacted during (``context_management``) is stored as a compaction
covering what its request sent, in the turn's last commit, on both stores; with
``store_question="with_reply"`` in the commit that stores the whole turn."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import openai
import pytest
from chat_support import session_with_turns
from command_counting import counted_repository

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventType,
    SessionEvent,
    SystemMessage,
    UserMessage,
)
from asyncsession._responses_items import messages_to_items
from asyncsession._turn import SERVER_COMPACTION_STRATEGY, SERVER_COMPACTION_TRIGGER
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.events import COMPACTION_ID
from asyncsession.filters import EventFilter
from asyncsession.openai import ResponsesClient
from asyncsession.repository import Lease
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from asyncsession.tools import tool

MODEL = "gpt-test"
COMPACTING = [{"type": "compaction", "compact_threshold": 10}]
"""A threshold every request of these tests reaches: the server compacts each one."""


@pytest.fixture(params=["first", "with_reply"])
def store_question(request: pytest.FixtureRequest) -> str:
    """When the turn stores the question: before the model call, or with the reply."""
    param: str = request.param
    return param


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def _chat(
    store: DefaultSessionService,
    openai_client: openai.AsyncOpenAI,
    *,
    compacting: bool = True,
    store_question: str = "first",
) -> ResponsesClient:
    """A client that stores the question first, or with the reply, with a tool loop."""
    return ResponsesClient(
        openai_client,
        model=MODEL,
        sessions=store,
        store_question=store_question,  # type: ignore[arg-type]
        tools=[lookup],
        default_messages=[SystemMessage(text="Be brief.")],
        context_management=COMPACTING if compacting else (),
    )


async def _ask(chat: ResponsesClient, text: str, session_id: str, *, streaming: bool) -> None:
    if streaming:
        async with chat.stream(text, session_id=session_id) as stream:
            async for _ in stream:
                pass
    else:
        await chat.call(text, session_id=session_id)


def _records(events: list[SessionEvent]) -> list[CompactionRecord]:
    return [CompactionRecord.from_event(e) for e in events if e.type == EventType.COMPACTION]


def _race(
    store_repository: Any, monkeypatch: pytest.MonkeyPatch, write: Callable[[int], Awaitable[None]]
) -> list[int]:
    """Run ``write(n)`` right before the store's ``n``-th compare-and-swap (from 0) of a
    compaction commit; returns the list that counts them."""
    calls: list[int] = []
    append = store_repository.append_events

    async def racing(
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        if events and events[-1].type == EventType.COMPACTION:
            calls.append(len(calls))
            await write(calls[-1])
        appended: bool = await append(session_id, events, expected_version, lease=lease)
        return appended

    monkeypatch.setattr(store_repository, "append_events", racing)
    return calls


@pytest.mark.parametrize("streaming", [False, True], ids=["call", "stream"])
async def test_a_compacted_reply_archives_what_its_item_covers_in_one_write(
    streaming: bool,
    store_question: str,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """The covered events leave the active view with the reply's write (one version); the
    record names the server; the next request is the active view, starting at the item. A turn
    stored with its reply writes its question archived in that same write."""
    session_id = await session_with_turns(store, 3)
    server.enqueue(ScriptedReply.text("answer 3"), ScriptedReply.text("answer 4"))
    chat = _chat(store, openai_client, store_question=store_question)

    await _ask(chat, "question 3", session_id, streaming=streaming)

    # 6 for the earlier turns, then the question and the reply, or the turn in one write
    assert await store.get_event_version(session_id) == (8 if store_question == "first" else 7)
    active = await store.get_events(session_id, EventFilter.active())
    assert [e.type for e in active] == [EventType.ASSISTANT]
    reply = active[0]
    assert isinstance(reply.message, AssistantMessage)
    assert [item["type"] for item in reply.message.items] == ["compaction", "message"]
    assert reply.text == "answer 3"
    log = await store.get_events(session_id)
    covered = [e for e in log if e.is_message and e.id != reply.id]
    assert [e.text for e in covered] == [
        *(f"{kind} {n}" for n in range(3) for kind in ("question", "answer")),
        "question 3",
    ]
    assert all(e.archived for e in covered)
    [record] = _records(log)
    assert record.covered == tuple(e.id for e in covered)
    assert record.summaries == (reply.id,)
    assert (record.trigger, record.strategy) == (
        SERVER_COMPACTION_TRIGGER,
        SERVER_COMPACTION_STRATEGY,
    )
    assert reply.metadata[COMPACTION_ID] == next(
        e.id for e in log if e.type == EventType.COMPACTION
    )

    await _ask(
        _chat(store, openai_client, compacting=False), "question 4", session_id, streaming=False
    )

    sent = server.requests[1].input
    assert sent == messages_to_items(
        [SystemMessage(text="Be brief."), reply.message, UserMessage(text="question 4")]
    )
    server.assert_done()


async def test_a_write_racing_the_reply_makes_it_read_again_and_stays_active(
    store_question: str,
    store_repository: Any,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A message stored between the read and the compare-and-swap loses the reply's first
    attempt; the second covers only what the request sent, and nothing is lost or doubled: the
    view is the compacted reply, then the message its request did not send."""
    session_id = await session_with_turns(store, 2)

    async def write(n: int) -> None:
        if n == 0:
            await store.append_message(session_id, UserMessage(text="racing"))

    calls = _race(store_repository, monkeypatch, write)
    server.enqueue(ScriptedReply.text("answer 2"))
    chat = _chat(store, openai_client, store_question=store_question)

    await _ask(chat, "question 2", session_id, streaming=False)

    assert calls == [0, 1]
    active = await store.get_events(session_id, EventFilter.active())
    assert [e.text for e in active] == ["answer 2", "racing"]
    log = await store.get_events(session_id)
    texts = [e.text for e in log if e.is_message]
    assert sorted(t for t in texts if t) == sorted(
        ["question 0", "answer 0", "question 1", "answer 1", "question 2", "racing", "answer 2"]
    )
    [record] = _records(log)
    archived = [e.id for e in log if e.archived]
    assert [e.text for e in log if e.archived] == [
        "question 0",
        "answer 0",
        "question 1",
        "answer 1",
        "question 2",
    ]
    assert record.covered == tuple(archived)
    server.assert_done()


async def test_a_reply_that_keeps_losing_is_appended_and_archives_nothing(
    store_question: str,
    store_repository: Any,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A write before every compare-and-swap: after the last attempt the reply is appended as
    any reply is, once, and nothing is archived or half-written."""
    session_id = await session_with_turns(store, 1)

    async def write(n: int) -> None:
        await store.append_message(session_id, UserMessage(text=f"racing {n}"))

    calls = _race(store_repository, monkeypatch, write)
    server.enqueue(ScriptedReply.text("answer 1"))

    chat = _chat(store, openai_client, store_question=store_question)

    await _ask(chat, "question 1", session_id, streaming=True)

    assert len(calls) == 3
    log = await store.get_events(session_id)
    assert not any(e.archived for e in log)
    assert _records(log) == []
    racing = ["racing 0", "racing 1", "racing 2"]
    turn = (
        ["question 1", *racing, "answer 1"]
        if store_question == "first"
        else [*racing, "question 1", "answer 1"]  # the turn is appended after the last loss
    )
    assert [e.text for e in log] == ["question 0", "answer 0", *turn]
    server.assert_done()


async def test_many_writes_during_the_model_call_all_stay_active(
    store_question: str,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Twenty tasks store messages while the model answers and while the reply is written:
    every one stays active, the reply is stored once, the covered events are archived whole
    or not at all."""
    session_id = await session_with_turns(store, 2)
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("answer 2", hold=hold))
    chat = _chat(store, openai_client, store_question=store_question)
    turn = asyncio.create_task(_ask(chat, "question 2", session_id, streaming=False))
    await server.wait_for_request(0)

    async def write(n: int) -> None:
        await store.append_message(session_id, UserMessage(text=f"racing {n}"))

    early = [asyncio.create_task(write(n)) for n in range(10)]
    await asyncio.gather(*early)
    hold.set()
    await asyncio.gather(turn, *(write(n) for n in range(10, 20)))

    active = await store.get_events(session_id, EventFilter.active())
    racing = sorted(e.text or "" for e in active if (e.text or "").startswith("racing"))
    assert racing == sorted(f"racing {n}" for n in range(20))
    log = await store.get_events(session_id)
    assert [e.text for e in log].count("answer 2") == 1
    covered = [
        e
        for e in log
        if e.text in {"question 0", "answer 0", "question 1", "answer 1", "question 2"}
    ]
    assert len(covered) == 5
    # Whole or nothing: archived with one record, or (every attempt lost) the reply appended.
    archived = {e.archived for e in covered}
    assert archived in ({True}, {False})
    assert len(_records(log)) == (1 if archived == {True} else 0)
    server.assert_done()


@pytest.mark.parametrize("streaming", [False, True], ids=["call", "stream"])
async def test_a_tool_loop_stored_with_its_reply_archives_what_the_last_item_covers(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Both rounds of a tool loop are compacted by the server: the one write of the turn keeps
    only the final reply active, writes the question, the tool call and its result archived,
    and one record covers them with the history."""
    session_id = await session_with_turns(store, 1)
    version = await store.get_event_version(session_id)
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall(name="lookup", arguments={"key": "k"})]),
        ScriptedReply.text("found it"),
    )

    chat = _chat(store, openai_client, store_question="with_reply")
    await _ask(chat, "look k up", session_id, streaming=streaming)

    assert await store.get_event_version(session_id) == version + 1
    active = await store.get_events(session_id, EventFilter.active())
    assert [e.text for e in active] == ["found it"]
    log = await store.get_events(session_id)
    messages = [e for e in log if e.is_message]
    assert [e.type for e in messages] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.ASSISTANT,
    ]
    assert [e.archived for e in messages] == [True] * 5 + [False]
    [record] = _records(log)
    assert record.covered == tuple(e.id for e in messages[:5])
    assert record.summaries == (messages[5].id,)
    assert COMPACTION_ID not in messages[2].metadata
    server.assert_done()


async def test_a_retry_of_a_compacted_turn_stored_with_its_reply_replays_it(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """The turn's question is stored archived: a retry of the request (same request id, on
    the stream path) still finds it with its reply and replays that, calling no model."""
    session_id = await session_with_turns(store, 1)
    server.enqueue(ScriptedReply.text("answer 1"))
    chat = ResponsesClient(
        openai_client,
        model=MODEL,
        sessions=store,
        store_question="with_reply",
        context_management=COMPACTING,
    )
    context = {"session_id": session_id, "request_id": "r1"}

    first = await chat.call("question 1", **context)
    async with chat.stream("question 1", **context) as stream:
        streamed = "".join([chunk.text async for chunk in stream])

    assert (first.text, streamed, stream.response.text) == ("answer 1",) * 3
    assert len(server.requests) == 1
    log = await store.get_events(session_id)
    assert [(e.text, e.archived) for e in log if e.is_message] == [
        ("question 0", True),
        ("answer 0", True),
        ("question 1", True),
        ("answer 1", False),
    ]
    server.assert_done()


@pytest.mark.parametrize(
    ("store_question", "commands"),
    [
        # the window read, the question's commit, and the reply's commit, which is the
        # compaction: the turn read the whole active view, so it commits at the version it knows
        ("first", ["aggregate", "insert", "insert"]),
        # the window read and one commit: the question, the reply and the compaction together
        ("with_reply", ["aggregate", "insert"]),
    ],
)
async def test_the_database_commands_of_a_compacted_turn_on_mongodb(
    store_question: str,
    commands: list[str],
    mongo_uri: str,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A turn the server compacted costs no command more than a plain turn: its reply's commit
    is the compaction."""
    async with counted_repository(mongo_uri) as (repository, counter):
        service = DefaultSessionService(repository)
        session_id = await session_with_turns(service, 5)
        server.enqueue(ScriptedReply.text("answer 5"))
        chat = _chat(service, openai_client, store_question=store_question)

        counter.clear()
        await _ask(chat, "question 5", session_id, streaming=False)
        sent = counter.names

        active = await service.get_events(session_id, EventFilter.active())
        assert [e.text for e in active] == ["answer 5"]
        assert len(_records(await service.get_events(session_id))) == 1
    assert sent == commands
