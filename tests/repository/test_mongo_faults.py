"""The MongoDB store when things break: a killed server, cancelled callers, lost replies."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from typing import Any, ClassVar

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import (
    AssistantMessage,
    CompactionPlan,
    EventFilter,
    EventIdConflict,
    Insert,
    Session,
    SessionEvent,
    StorageError,
)
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._rollforward import RollForward
from asyncsession.testing._mongo_server import LocalMongoServer
from asyncsession.testing.contract import synthetic, user


@pytest.fixture
async def repo(mongo_db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return repository


async def new_session(repo: MongoSessionRepository) -> str:
    session = Session(user_id="u")
    await repo.save(session)
    return session.id


async def test_a_server_killed_mid_load_keeps_every_acknowledged_append_and_retries_never_duplicate(
    private_mongo_server: LocalMongoServer,
) -> None:
    """``kill -9`` during concurrent appends, restart on the same data: nothing acknowledged is
    lost, and retrying every unacknowledged append stores each event exactly once."""
    server = private_mongo_server
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        server.uri(), tz_aware=True, serverSelectionTimeoutMS=2000, connectTimeoutMS=1000
    )
    try:
        repo = MongoSessionRepository(client["faults"])
        await repo.ensure_indexes()
        session_id = await new_session(repo)
        planned = {w: [user(session_id, f"w{w}-{i}") for i in range(30)] for w in range(10)}
        acknowledged: set[str] = set()
        first_failure: dict[int, int] = {}
        enough = asyncio.Event()

        async def writer(w: int) -> None:
            for i, event in enumerate(planned[w]):
                try:
                    await repo.append_event(event)
                except StorageError:
                    first_failure[w] = i
                    return
                acknowledged.add(event.id)
                if len(acknowledged) >= 100:
                    enough.set()

        async def crash() -> None:
            await enough.wait()
            await asyncio.to_thread(server.kill)

        async with asyncio.TaskGroup() as group:
            group.create_task(crash())
            for w in range(10):
                group.create_task(writer(w))
        assert first_failure, "the crash should have failed some appends"

        await asyncio.to_thread(server.start)
        stored = {e.id for e in await repo.find_events(session_id, EventFilter.all())}
        assert acknowledged <= stored
        for w, i in first_failure.items():
            for event in planned[w][i:]:
                await repo.append_event(event)
        for w in range(10):  # replaying what was acknowledged changes nothing
            await repo.append_events(session_id, planned[w][:5])

        log = await repo.find_events(session_id, EventFilter.all())
        ids = [e.id for e in log]
        assert len(ids) == len(set(ids)) == 300
        for w in range(10):
            assert [e.id for e in log if e.text and e.text.startswith(f"w{w}-")] == [
                e.id for e in planned[w]
            ]
        assert await repo.get_event_version(session_id) == 300
    finally:
        await client.close()


class Tripwire:
    """A collection that cancels tasks when the store makes its ``n``-th database call."""

    calls: ClassVar[int] = 0
    targets: ClassVar[dict[int, asyncio.Task[Any]]] = {}

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    @classmethod
    def arm(cls, targets: dict[int, asyncio.Task[Any]]) -> None:
        """Cancel ``targets[n]`` when the ``n``-th call from now starts."""
        cls.calls, cls.targets = 0, targets

    @classmethod
    def _count(cls) -> None:
        cls.calls += 1
        target = cls.targets.pop(cls.calls, None)
        if target is not None:
            target.cancel()

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if not callable(attribute):
            return attribute

        def call(*args: Any, **kwargs: Any) -> Any:
            Tripwire._count()
            return attribute(*args, **kwargs)

        return call


def wire(repo: MongoSessionRepository) -> None:
    store = repo._store
    store.sessions, store.events, store.event_ids = (
        Tripwire(store.sessions),
        Tripwire(store.events),
        Tripwire(store.event_ids),
    )


async def test_writes_cancelled_at_random_points_leave_the_log_consistent(
    repo: MongoSessionRepository,
) -> None:
    """Callers cancelled at every point of a write: each write still completes whole."""
    wire(repo)
    rng = random.Random(7)
    session_id = await new_session(repo)
    expected: list[str] = []
    versions = 0
    cancelled = 0
    for round_ in range(150):
        batch = [user(session_id, f"r{round_}-{i}") for i in range(rng.choice([1, 1, 2, 3]))]
        expected_version = versions if rng.random() < 0.3 else None
        task = asyncio.create_task(repo.append_events(session_id, batch, expected_version))
        Tripwire.arm({rng.randint(1, 6): task})
        try:
            assert await task
        except asyncio.CancelledError:
            cancelled += 1
        expected += [e.text or "" for e in batch]
        versions += 1
    assert cancelled > 50
    Tripwire.arm({})
    log = await repo.find_events(session_id, EventFilter.all())
    assert [e.text for e in log] == expected
    assert await repo.get_event_version(session_id) == versions


async def test_concurrent_writes_cancelled_at_random_leave_the_log_consistent(
    repo: MongoSessionRepository,
) -> None:
    """Many concurrent appends, a third of them cancelled: every one is stored exactly once."""
    rng = random.Random(3)
    session_id = await new_session(repo)
    wire(repo)
    events = [user(session_id, f"e{i}") for i in range(120)]
    tasks = [asyncio.create_task(repo.append_event(e)) for e in events]
    Tripwire.arm(dict(zip(rng.sample(range(1, 60), 40), rng.sample(tasks, 40), strict=True)))
    results = await asyncio.gather(*tasks, return_exceptions=True)
    Tripwire.arm({})
    assert any(isinstance(r, asyncio.CancelledError) for r in results)
    log = await repo.find_events(session_id, EventFilter.all())
    assert sorted(e.id for e in log) == sorted(e.id for e in events)
    assert await repo.get_event_version(session_id) == 120


async def test_a_cancelled_compaction_still_applies_whole(repo: MongoSessionRepository) -> None:
    """Cancelling a compaction's caller does not leave it half-applied."""
    session_id = await new_session(repo)
    events = [user(session_id, f"u{i}") for i in range(80)]
    await repo.append_events(session_id, events)
    for trip_at in range(1, 8):
        version = await repo.get_event_version(session_id)
        active = await repo.find_events(session_id, EventFilter.active())
        summary = synthetic(session_id, AssistantMessage(text=f"s{trip_at}"))
        plan = CompactionPlan(
            archive_ids=frozenset({active[0].id, active[1].id}),
            inserts=(Insert.before(active[2].id, [summary]),),
        )
        store = repo._store
        original = store.sessions, store.events, store.event_ids
        wire(repo)
        task = asyncio.create_task(repo.apply_compaction(session_id, plan, version))
        Tripwire.arm({trip_at: task})
        with contextlib.suppress(asyncio.CancelledError):
            assert await task
        store.sessions, store.events, store.event_ids = original
        assert await repo.get_event_version(session_id) == version + 1
        log = await repo.find_events(session_id, EventFilter.all())
        assert [e.id for e in log if e.archived][-2:] == [active[0].id, active[1].id]
        assert log[log.index(next(e for e in log if e.id == active[2].id)) - 1].id == summary.id


class LoseReply:
    """Wraps the sessions collection: the next commit fails before or after it took effect."""

    def __init__(self, inner: Any, *, after: bool) -> None:
        self._inner = inner
        self._after = after
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def find_one_and_update(self, flt: Any, update: Any, **kwargs: Any) -> Any:
        if self.armed and "$push" in update and "tail" in update["$push"]:
            self.armed = False
            if not self._after:
                raise AutoReconnect("injected: connection lost before the commit")
            await self._inner.find_one_and_update(flt, update, **kwargs)
            raise AutoReconnect("injected: connection lost after the commit")
        return await self._inner.find_one_and_update(flt, update, **kwargs)


async def test_a_retry_after_a_lost_reply_does_not_duplicate(repo: MongoSessionRepository) -> None:
    """The commit took effect but its reply was lost: the retry is a replay."""
    session_id = await new_session(repo)
    repo._store.sessions = LoseReply(repo._store.sessions, after=True)
    event = user(session_id, "once")
    with pytest.raises(StorageError) as info:
        await repo.append_events(session_id, [event], 0)
    assert isinstance(info.value.__cause__, AutoReconnect)
    assert await repo.append_events(session_id, [event], 0)
    assert [e.text for e in await repo.find_events(session_id, EventFilter.all())] == ["once"]
    assert await repo.get_event_version(session_id) == 1


async def test_a_retry_adopts_the_ids_an_attempt_registered_before_it_died(
    repo: MongoSessionRepository,
) -> None:
    """An attempt died between registering its ids and committing: the id stays reserved for
    its session, and a retry there commits it once."""
    session_id, other = await new_session(repo), await new_session(repo)
    sessions = repo._store.sessions
    repo._store.sessions = LoseReply(sessions, after=False)
    event = user(session_id, "late")
    with pytest.raises(StorageError):
        await repo.append_event(event)
    repo._store.sessions = sessions
    with pytest.raises(EventIdConflict) as info:
        await repo.append_event(event.model_copy(update={"session_id": other}))
    assert info.value.owner_session_id == session_id
    assert await repo.find_events(session_id, EventFilter.all()) == []
    await repo.append_event(event)
    await repo.append_event(event)
    assert [e.text for e in await repo.find_events(session_id, EventFilter.all())] == ["late"]
    assert await repo.get_event_version(session_id) == 1
    assert await repo.get_event_version(other) == 0


async def test_an_id_left_registered_for_a_deleted_session_is_reclaimed(
    repo: MongoSessionRepository,
) -> None:
    """A registration whose session no longer exists does not block the id forever."""
    session_id = await new_session(repo)
    await repo._store.event_ids.insert_one(
        {"_id": "orphan", "session_id": "deleted-session", "token": "dead"}
    )
    event = SessionEvent(id="orphan", session_id=session_id, message=user(session_id, "x").message)
    await repo.append_event(event)
    assert [e.id for e in await repo.find_events(session_id, EventFilter.all())] == ["orphan"]


async def test_a_compaction_left_pending_is_merged_by_readers_and_finished_by_the_next_write(
    repo: MongoSessionRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash after a compaction's commit: reads already show it whole; a later write
    finishes writing it below the tail."""
    session_id = await new_session(repo)
    events = [user(session_id, f"u{i}") for i in range(100)]
    await repo.append_events(session_id, events)
    await repo.append_events(session_id, [user(session_id, "tail")])
    version = await repo.get_event_version(session_id)
    summary = synthetic(session_id, AssistantMessage(text="summary"))
    plan = CompactionPlan(
        archive_ids=frozenset(e.id for e in events[:50]),
        inserts=(Insert.before(events[50].id, [summary]),),
    )

    async def crash(self: Any, session_id: str) -> None:
        raise StorageError("injected: crashed before rolling forward")

    with monkeypatch.context() as patch:
        patch.setattr(RollForward, "roll_pending", crash)
        patch.setattr(logging.getLogger("asyncsession.mongo"), "disabled", True)
        assert await repo.apply_compaction(session_id, plan, version)
    doc = await repo._store.sessions.find_one({"_id": session_id})
    assert doc["pending"] is not None
    active = await repo.find_events(session_id, EventFilter.active())
    assert [e.text for e in active] == ["summary", *(f"u{i}" for i in range(50, 100)), "tail"]
    window = await repo.find_events(session_id, EventFilter(exclude_archived=True, last_n=60))
    assert window == active[-60:]
    await repo.append_event(user(session_id, "next"))
    doc = await repo._store.sessions.find_one({"_id": session_id})
    assert doc["pending"] is None
    assert [e.text for e in await repo.find_events(session_id, EventFilter.active())] == [
        "summary",
        *(f"u{i}" for i in range(50, 100)),
        "tail",
        "next",
    ]
