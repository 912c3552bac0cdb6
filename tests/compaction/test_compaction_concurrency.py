"""Many compactions of one session at once, while the conversation goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

import pytest
from compaction_support import CountingSummarizer, lbls, let_the_loop_run, unanswered_calls
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.compaction import (
    CompactionWorker,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.events import EventType
from asyncsession.messages import Message
from asyncsession.repository import Lease
from asyncsession.repository.mongo import MongoSessionRepository

TURNS = 30
WORKERS = 20
PAUSE = 10
"""Event-loop rounds between two appends: appends every round would starve compaction (every
compare-and-swap would lose), as under any optimistic scheme."""


class Recording:
    """Mixed into a store: records every compare-and-swap of a compaction and its outcome."""

    applies: list[tuple[int, bool]]
    applied: asyncio.Event
    """Set once a plan has applied."""

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        if not events or events[-1].type != EventType.COMPACTION or expected_version is None:
            return bool(
                await super().append_events(  # type: ignore[misc]
                    session_id, events, expected_version, lease=lease
                )
            )
        await asyncio.sleep(0)  # let other tasks in between the read and the write
        applied = await super().append_events(  # type: ignore[misc]
            session_id, events, expected_version
        )
        self.applies.append((expected_version, applied))
        if applied:
            self.applied.set()
        return bool(applied)


class RecordingRepository(Recording, InMemorySessionRepository):
    def __init__(self) -> None:
        super().__init__()
        self.applies = []
        self.applied = asyncio.Event()


class RecordingMongoRepository(Recording, MongoSessionRepository):
    def __init__(self, database: AsyncDatabase[dict[str, Any]]) -> None:
        super().__init__(database)
        self.applies = []
        self.applied = asyncio.Event()


def turn_messages(i: int) -> list[Message]:
    """A user question, a tool round, and the answer."""
    call = ToolCall(id=f"call-{i}", name="lookup")
    return [
        UserMessage(text=f"u{i}"),
        AssistantMessage(tool_calls=(call,)),
        ToolResponseMessage(responses=(ToolResponse(id=call.id, name="lookup", data=f"r{i}"),)),
        AssistantMessage(text=f"a{i}"),
    ]


async def converse(
    service: DefaultSessionService, session_id: str, turns: int = TURNS, *, start: int = 0
) -> list[SessionEvent]:
    """Append turns ``start`` to ``turns - 1`` one message at a time, letting other tasks run
    between messages."""
    appended: list[SessionEvent] = []
    for i in range(start, turns):
        for message in turn_messages(i):
            appended.append(await service.append_message(session_id, message))
            await let_the_loop_run(PAUSE)
    return appended


async def check_log(
    service: DefaultSessionService,
    session_id: str,
    appended: list[SessionEvent],
    turns: int = TURNS,
) -> list[SessionEvent]:
    """No event lost, duplicated or moved; the active view opens with a turn and is answered."""
    everything = await service.get_events(session_id)
    records = [e for e in everything if e.type == EventType.COMPACTION]
    assert not any(e.archived for e in records)  # a compaction record is never archived
    log = [e for e in everything if e.type != EventType.COMPACTION]
    assert [e.id for e in log if not e.is_synthetic] == [e.id for e in appended]
    assert len({e.id for e in log}) == len(log)
    view = await service.get_events(session_id, EventFilter.active())
    assert view[0].is_turn_start
    assert unanswered_calls(view) == set()
    assert lbls(view[-4:]) == [f"u{turns - 1}", "calls", "tool", f"a{turns - 1}"]
    summaries = [e for e in view if e.is_synthetic]
    assert len(summaries) in (0, 2)
    # Archived events are exactly the events no longer in the view.
    assert {e.id for e in log if e.archived} == {e.id for e in log} - {e.id for e in view}
    return log


def check_one_plan_per_version(repository: Recording) -> int:
    """At most one compare-and-swap wins per version; returns how many won."""
    winners = [version for version, applied in repository.applies if applied]
    assert len(winners) == len(set(winners))
    return len(winners)


@pytest.fixture
def repository() -> RecordingRepository:
    return RecordingRepository()


@pytest.fixture
def service(repository: RecordingRepository) -> DefaultSessionService:
    return DefaultSessionService(repository)


async def twenty_compactors(
    service: DefaultSessionService, repository: Recording, turns: int = TURNS
) -> None:
    session = await service.create(CreateSessionRequest(user_id="alice"))
    strategy = RecursiveSummarizationCompactionStrategy(
        CountingSummarizer(), max_events_to_keep=8, overlap_size=2
    )
    done = asyncio.Event()

    async def compactor() -> None:
        while not done.is_set():
            await service.compact(session.id, TurnCountTrigger(3), strategy)
            await asyncio.sleep(0)

    async def conversation() -> list[SessionEvent]:
        try:
            half = turns // 2
            assert half > 3, "the first half must pass the trigger's 3 turns"
            appended = await converse(service, session.id, half)
            # The conversation pauses until a compactor wins a version of its own, so at least
            # one plan applies while the conversation is under way, whatever the machine's load.
            async with asyncio.timeout(60):  # a bound that fails the test rather than hang it
                await repository.applied.wait()
            return appended + await converse(service, session.id, turns, start=half)
        finally:
            done.set()

    async with asyncio.TaskGroup() as tasks:
        talking = tasks.create_task(conversation())
        for _ in range(WORKERS):
            tasks.create_task(compactor())
    appended = talking.result()
    await service.compact(session.id, TurnCountTrigger(3), strategy)

    await check_log(service, session.id, appended, turns)
    wins = check_one_plan_per_version(repository)
    assert wins >= 2
    assert any(not applied for _, applied in repository.applies)  # there was contention
    assert await service.get_event_version(session.id) == len(appended) + wins


async def test_twenty_concurrent_compactions_while_appending(
    service: DefaultSessionService, repository: RecordingRepository
) -> None:
    """Twenty tasks compacting one session during a conversation lose and reorder nothing, and
    exactly one plan applies per version."""
    await twenty_compactors(service, repository)


async def test_twenty_concurrent_compactions_while_appending_on_mongodb(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """The same on MongoDB over the wire: one plan per version, nothing lost or reordered."""
    repository = RecordingMongoRepository(mongo_db)
    await repository.ensure_indexes()
    try:
        await twenty_compactors(DefaultSessionService(repository), repository, turns=12)
    finally:
        await repository.aclose()


async def test_twenty_workers_compacting_one_session_while_appending(
    service: DefaultSessionService, repository: RecordingRepository
) -> None:
    """Twenty CompactionWorkers fed the same session after every message keep the log intact."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    strategy = SlidingWindowCompactionStrategy(8)
    appended: list[SessionEvent] = []
    async with contextlib.AsyncExitStack() as stack:
        workers = [
            await stack.enter_async_context(
                CompactionWorker(service, TurnCountTrigger(3), strategy, max_concurrency=1)
            )
            for _ in range(WORKERS)
        ]
        for i in range(TURNS):
            for message in turn_messages(i):
                appended.append(await service.append_message(session.id, message))
                for worker in workers:
                    worker.submit(session.id)
                await let_the_loop_run(PAUSE)
    # leaving the stack drained every worker

    await check_log(service, session.id, appended)
    wins = check_one_plan_per_version(repository)
    assert wins >= 2
    assert any(not applied for _, applied in repository.applies)
    assert await service.get_event_version(session.id) == len(appended) + wins
    assert len(await service.get_events(session.id, EventFilter.active())) <= 8


async def test_a_cancelled_compaction_finishes_its_write_first() -> None:
    """Cancelling compact() while the plan is being applied lets the write finish, then raises."""
    writing, release = asyncio.Event(), asyncio.Event()

    class SlowWrites(InMemorySessionRepository):
        async def append_events(
            self,
            session_id: str,
            events: Sequence[SessionEvent],
            expected_version: int | None = None,
            *,
            lease: Lease | None = None,
        ) -> bool:
            if events and events[-1].type == EventType.COMPACTION:
                writing.set()
                await release.wait()
            return await super().append_events(session_id, events, expected_version, lease=lease)

    service = DefaultSessionService(SlowWrites())
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for i in range(3):
        await service.append_message(session.id, UserMessage(text=f"u{i}"))
    task = asyncio.create_task(
        service.compact(session.id, lambda r: True, SlidingWindowCompactionStrategy(1))
    )
    await writing.wait()
    task.cancel()
    await let_the_loop_run()
    assert not task.done()
    task.cancel()  # a second cancellation is absorbed too
    await let_the_loop_run()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lbls(await service.get_events(session.id, EventFilter.active())) == ["u2"]
    assert await service.get_event_version(session.id) == 4


async def test_a_compaction_cancelled_before_its_write_changes_nothing() -> None:
    """Cancelling compact() during the summarizer call leaves the log as it was."""
    started = asyncio.Event()

    class Hanging:
        async def summarize(self, system_prompt: str, prompt: str) -> str:
            started.set()
            await asyncio.Event().wait()
            return "never"

    service = DefaultSessionService(InMemorySessionRepository())
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for i in range(3):
        await service.append_message(session.id, UserMessage(text=f"u{i}"))
    strategy = RecursiveSummarizationCompactionStrategy(
        Hanging(), max_events_to_keep=1, overlap_size=0
    )
    task = asyncio.create_task(service.compact(session.id, lambda r: True, strategy))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert lbls(await service.get_events(session.id, EventFilter.active())) == ["u0", "u1", "u2"]
    assert await service.get_event_version(session.id) == 3
