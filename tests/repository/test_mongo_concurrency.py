"""The MongoDB store under many concurrent writers, on the test server.

Writers are spread over several repositories, each with a client (connection pool) of its own,
so commits race on the server as they would from several processes; tasks of one repository
also race in-process.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    EventFilter,
    EventIdConflict,
    Session,
    SessionEvent,
)
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import boundary, synthetic, user


@pytest.fixture
async def repos(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> AsyncIterator[list[MongoSessionRepository]]:
    """Five repositories on one database, each with its own client."""
    clients: list[AsyncMongoClient[dict[str, Any]]] = [
        AsyncMongoClient(mongo_uri, tz_aware=True) for _ in range(4)
    ]
    found = [MongoSessionRepository(mongo_db)]
    found += [MongoSessionRepository(client[mongo_db.name]) for client in clients]
    await found[0].ensure_indexes()
    try:
        yield found
    finally:
        for client in clients:
            await client.close()


async def new_session(repo: MongoSessionRepository) -> str:
    session = Session(user_id="u")
    await repo.save(session)
    return session.id


async def positions_in_log_order(repo: MongoSessionRepository, session_id: str) -> list[Any]:
    """Every event's stored position (commit number, index in the commit), in the order the
    store returns the log."""
    found: dict[str, tuple[int, int]] = {}
    async for doc in repo._store.commits.find({"session": session_id}):
        for index, event in enumerate(doc["events"]):
            assert event["id"] not in found
            found[event["id"]] = (doc["commit"], index)
    log = await repo.find_events(session_id, EventFilter.all())
    assert len(found) == len(log)
    return [found[e.id] for e in log]


async def test_64_tasks_appending_60_events_each_lose_and_duplicate_nothing(
    repos: list[MongoSessionRepository],
) -> None:
    """3,840 concurrent appends to one session: each stored once, in its task's order.

    All tasks share one repository, so they race in-process and their batches share group
    commits; the next test races several clients on the server.
    """
    repo = repos[0]
    session_id = await new_session(repo)

    async def writer(w: int) -> None:
        for i in range(60):
            await repo.append_event(user(session_id, f"w{w}-{i}"))

    async with asyncio.TaskGroup() as group:
        for w in range(64):
            group.create_task(writer(w))

    await check_writers(repos[4], session_id, writers=64, each=60)


async def test_tasks_on_five_clients_appending_to_one_session_lose_and_duplicate_nothing(
    repos: list[MongoSessionRepository],
) -> None:
    """Concurrent appends through five clients (commits racing on the server): none lost."""
    session_id = await new_session(repos[0])

    async def writer(w: int) -> None:
        for i in range(25):
            await repos[w % 5].append_event(user(session_id, f"w{w}-{i}"))

    async with asyncio.TaskGroup() as group:
        for w in range(12):
            group.create_task(writer(w))

    await check_writers(repos[1], session_id, writers=12, each=25)


async def check_writers(
    repo: MongoSessionRepository, session_id: str, *, writers: int, each: int
) -> None:
    log = await repo.find_events(session_id, EventFilter.all())
    texts = [e.text or "" for e in log]
    assert len(texts) == len(set(texts)) == writers * each
    for w in range(writers):
        assert [t for t in texts if t.startswith(f"w{w}-")] == [f"w{w}-{i}" for i in range(each)]
    assert await repo.get_event_version(session_id) == writers * each
    positions = await positions_in_log_order(repo, session_id)
    assert positions == sorted(set(positions))


async def test_50_versioned_writers_have_exactly_one_winner_in_each_of_40_rounds(
    repos: list[MongoSessionRepository],
) -> None:
    """Of 50 writers expecting one version (on two clients), exactly one wins, 40 times."""
    session_id = await new_session(repos[0])
    for round_ in range(40):
        version = await repos[round_ % 2].get_event_version(session_id)
        results = await asyncio.gather(
            *(
                repos[i % 2].append_events(
                    session_id, [user(session_id, f"r{round_}-{i}")], version
                )
                for i in range(50)
            )
        )
        assert results.count(True) == 1
        assert await repos[2].get_event_version(session_id) == version + 1
    log = await repos[3].find_events(session_id, EventFilter.all())
    assert [e.text.split("-")[0] for e in log if e.text] == [f"r{r}" for r in range(40)]


async def test_compaction_racing_appends_loses_nothing_and_keeps_the_active_view_valid(
    repos: list[MongoSessionRepository],
) -> None:
    """Appenders and compactors on five clients: no event lost or moved, compactions whole.

    Appenders work like the session advisor with a compare-and-swap (read the version, append
    expecting it, retry when it moved). Halfway through they wait until a compaction has landed,
    so compactions and appends certainly interleave, whatever the timing.
    """
    session_id = await new_session(repos[0])
    await repos[0].append_events(session_id, [user(session_id, f"seed-{i}") for i in range(30)])
    appending = asyncio.Event()
    compacted = asyncio.Event()

    async def appender(w: int) -> None:
        repo = repos[w % 5]
        for i in range(20):
            if i == 10:
                await compacted.wait()
            batch = [user(session_id, f"w{w}-{i}"), AssistantMessage(text=f"r{w}-{i}")]
            events = [batch[0], SessionEvent(session_id=session_id, message=batch[1])]
            while True:
                snapshot = await repo.read_snapshot(session_id, EventFilter.last_n(4))
                assert snapshot is not None
                if await repo.append_events(session_id, events, snapshot.version):
                    break

    async def compactor(c: int) -> int:
        repo, applied = repos[(c + 3) % 5], 0
        while appending.is_set():
            snapshot = await repo.read_snapshot(session_id, EventFilter.active())
            assert snapshot is not None
            active = snapshot.events
            if len(active) < 3:
                continue
            summary = synthetic(session_id, AssistantMessage(text=f"c{c}-{applied}"))
            commit = [summary, boundary(session_id, [summary, *active[2:]], active[:2])]
            if await repo.append_events(session_id, commit, snapshot.version):
                applied += 1
                compacted.set()
        return applied

    appending.set()
    async with asyncio.TaskGroup() as group:
        compactions = [group.create_task(compactor(c)) for c in range(2)]
        await asyncio.gather(*(appender(w) for w in range(3)))
        appending.clear()
    applied = sum(task.result() for task in compactions)
    assert applied > 0

    log = await repos[1].find_events(session_id, EventFilter.all())
    real = [e.text for e in log if not e.is_synthetic]
    assert real[:30] == [f"seed-{i}" for i in range(30)]
    for w in range(3):
        mine = [t for t in real if t and t.startswith((f"w{w}-", f"r{w}-"))]
        assert mine == [t for i in range(20) for t in (f"w{w}-{i}", f"r{w}-{i}")]
    assert len([e for e in log if e.is_synthetic]) == applied
    assert await repos[1].get_event_version(session_id) == 1 + 60 + applied
    positions = await positions_in_log_order(repos[1], session_id)
    assert positions == sorted(set(positions))
    active = await repos[2].find_events(session_id, EventFilter.active())
    assert active == EventFilter.active().apply(log)
    assert {e.id for e in active} == {e.id for e in log if e.is_message and not e.archived}
    for n in (1, 5, 40):
        window = EventFilter.active().merge(EventFilter.last_n(n))
        assert await repos[3].find_events(session_id, window) == window.apply(log)


async def test_a_reader_never_sees_a_version_whose_events_are_not_visible(
    repos: list[MongoSessionRepository],
) -> None:
    """Version first, then the events: the events always include the version's batches."""
    session_id = await new_session(repos[0])
    done = asyncio.Event()

    async def writer(w: int) -> None:
        for i in range(25):
            await repos[w % 3].append_event(user(session_id, f"w{w}-{i}"))

    async def reader(r: int) -> int:
        checks = 0
        while not done.is_set() or checks == 0:
            repo = repos[3 + r % 2]
            version = await repo.get_event_version(session_id)
            events = await repo.find_events(session_id, EventFilter.all())
            assert len(events) >= version
            snapshot = await repo.read_snapshot(session_id, EventFilter.last_n(5))
            assert snapshot is not None
            assert len(snapshot.events) == min(5, snapshot.version)
            checks += 1
        return checks

    async with asyncio.TaskGroup() as group:
        readers = [group.create_task(reader(r)) for r in range(2)]
        writers = [group.create_task(writer(w)) for w in range(3)]
        await asyncio.gather(*writers)
        done.set()
    assert all(task.result() > 0 for task in readers)


async def test_a_late_replay_is_a_no_op(
    repos: list[MongoSessionRepository],
) -> None:
    """An id appended again 150 commits later, from any client, changes nothing."""
    repo = repos[0]
    session_id = await new_session(repo)
    first = user(session_id, "first")
    await repo.append_event(first)
    for i in range(150):
        await repos[i % 5].append_event(user(session_id, f"m{i}"))
    version = await repo.get_event_version(session_id)
    changed = first.model_copy(update={"message": first.message and AssistantMessage(text="x")})
    for other in repos:
        await other.append_event(first)
        await other.append_events(session_id, [changed], version)
    later = user(session_id, "later")
    assert await repos[3].append_events(session_id, [first, later], version)
    log = await repo.find_events(session_id, EventFilter.all())
    assert [e.text for e in log].count("first") == 1
    assert log[-1].text == "later"
    assert await repo.get_event_version(session_id) == version + 1


async def test_one_event_id_appended_to_two_sessions_at_once_lands_in_exactly_one(
    repos: list[MongoSessionRepository],
) -> None:
    """Racing appends of one id to two sessions: one succeeds, the other raises, 20 times."""
    a, b = await new_session(repos[0]), await new_session(repos[0])
    for round_ in range(20):
        event_id = f"shared-{round_}-{uuid.uuid4()}"
        attempts = [
            repos[(round_ + i) % 5].append_event(
                SessionEvent(id=event_id, session_id=s, message=user(s, f"{s}-{round_}").message)
            )
            for i, s in enumerate([a, b, a, b])
        ]
        results = await asyncio.gather(*attempts, return_exceptions=True)
        conflicts = [r for r in results if isinstance(r, EventIdConflict)]
        assert all(r is None or isinstance(r, EventIdConflict) for r in results), results
        owners = {r.owner_session_id for r in conflicts}
        assert len(owners) == 1
        owner = owners.pop()
        loser = b if owner == a else a
        assert all(r.session_id == loser for r in conflicts)
    for s in (a, b):
        log = await repos[1].find_events(s, EventFilter.all())
        assert len(log) == len({e.id for e in log})
        assert await repos[2].get_event_version(s) == len(log)
    ids_a = {e.id for e in await repos[1].find_events(a, EventFilter.all())}
    ids_b = {e.id for e in await repos[1].find_events(b, EventFilter.all())}
    assert not ids_a & ids_b
    assert len(ids_a) + len(ids_b) == 20


async def test_one_event_appended_by_many_tasks_at_once_is_stored_once(
    repos: list[MongoSessionRepository],
) -> None:
    """Concurrent appends of the same event to one session store it once; all succeed."""
    session_id = await new_session(repos[0])
    for round_ in range(15):
        event = user(session_id, f"once-{round_}")
        results = await asyncio.gather(
            *(repos[i % 5].append_events(session_id, [event]) for i in range(12))
        )
        assert all(results)
    log = await repos[0].find_events(session_id, EventFilter.all())
    assert [e.text for e in log] == [f"once-{r}" for r in range(15)]
    assert await repos[0].get_event_version(session_id) == 15
