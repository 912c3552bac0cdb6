"""The MongoDB store when things break: a killed server, cancelled callers, lost replies."""

from __future__ import annotations

import asyncio
import contextlib
import random
from typing import Any, ClassVar

import pytest
from bson import ObjectId
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import AssistantMessage, EventFilter, Session, SessionEvent
from asyncsession.exceptions import StorageError
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import boundary, synthetic, user
from asyncsession.testing._mongo_server import LocalMongoServer


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
    store.sessions, store.commits = Tripwire(store.sessions), Tripwire(store.commits)


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
        Tripwire.arm({rng.randint(1, 2): task})  # an append is one call, more on a conflict
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
        commit = [summary, boundary(session_id, [summary, *active[2:]], active[:2])]
        store = repo._store
        original = store.sessions, store.commits
        wire(repo)
        task = asyncio.create_task(repo.append_events(session_id, commit, version))
        Tripwire.arm({trip_at: task})
        with contextlib.suppress(asyncio.CancelledError):
            assert await task
        store.sessions, store.commits = original
        assert await repo.get_event_version(session_id) == version + 1
        log = await repo.find_events(session_id, EventFilter.all())
        assert {active[0].id, active[1].id} <= {e.id for e in log if e.archived}
        view = await repo.find_events(session_id, EventFilter.active())
        assert [e.id for e in view[:2]] == [summary.id, active[2].id]


class LoseReply:
    """Wraps the commits collection: the next insert fails before or after it took effect."""

    def __init__(self, inner: Any, *, after: bool) -> None:
        self._inner = inner
        self._after = after
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def insert_one(self, doc: Any, **kwargs: Any) -> Any:
        if self.armed:
            self.armed = False
            if not self._after:
                raise AutoReconnect("injected: connection lost before the commit")
            await self._inner.insert_one(doc, **kwargs)
            raise AutoReconnect("injected: connection lost after the commit")
        return await self._inner.insert_one(doc, **kwargs)


async def test_a_retry_after_a_lost_reply_does_not_duplicate(repo: MongoSessionRepository) -> None:
    """The commit took effect but its reply was lost: the retry is a replay."""
    session_id = await new_session(repo)
    repo._store.commits = LoseReply(repo._store.commits, after=True)  # type: ignore[assignment]
    event = user(session_id, "once")
    with pytest.raises(StorageError) as info:
        await repo.append_events(session_id, [event], 0)
    assert isinstance(info.value.__cause__, AutoReconnect)
    assert await repo.append_events(session_id, [event], 0)
    assert [e.text for e in await repo.find_events(session_id, EventFilter.all())] == ["once"]
    assert await repo.get_event_version(session_id) == 1


async def test_an_attempt_lost_before_its_commit_wrote_nothing(
    repo: MongoSessionRepository,
) -> None:
    """An attempt died before its insert: nothing is stored, its id is free, and a retry
    commits it once."""
    session_id = await new_session(repo)
    commits = repo._store.commits
    repo._store.commits = LoseReply(commits, after=False)  # type: ignore[assignment]
    event = user(session_id, "late")
    with pytest.raises(StorageError):
        await repo.append_event(event)
    repo._store.commits = commits
    assert await repo.find_events(session_id, EventFilter.all()) == []
    assert await repo.get_event_version(session_id) == 0
    await repo.append_event(event)
    await repo.append_event(event)
    assert [e.text for e in await repo.find_events(session_id, EventFilter.all())] == ["late"]
    assert await repo.get_event_version(session_id) == 1


async def test_an_id_left_in_a_commit_of_a_deleted_session_is_reclaimed(
    repo: MongoSessionRepository,
) -> None:
    """A commit whose session no longer exists (an append that raced a delete) does not block
    its ids forever: the append that meets it removes it."""
    session_id = await new_session(repo)
    orphan = SessionEvent(id="orphan", session_id=session_id, message=user(session_id, "x").message)
    await repo._store.commits.insert_one(
        {
            "session": "deleted-session",
            "commit": 1,
            "incarnation": ObjectId(),
            "events": [{"id": "orphan", "type": "USER", "timestamp": orphan.timestamp, "body": {}}],
        }
    )
    await repo.append_event(orphan)
    assert [e.id for e in await repo.find_events(session_id, EventFilter.all())] == ["orphan"]
    assert await repo._store.commits.count_documents({"session": "deleted-session"}) == 0
