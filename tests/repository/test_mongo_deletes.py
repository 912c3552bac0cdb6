"""Deletes that finish: a delete or a sweep that dies halfway is finished by a later one, and a
cancelled sweep stops after the session it is on. On the test server."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import EventFilter, Session
from asyncsession.events import utc_now
from asyncsession.exceptions import StorageError
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._layout import Store
from asyncsession.testing._contract._support import user


@pytest.fixture
async def repo(mongo_db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return repository


class Crash:
    """Wraps a collection: its ``delete_many`` / ``delete_one`` (the ``method``) fails before it
    runs, as a process killed there would never send it."""

    def __init__(self, inner: Any, method: str, *, after_calls: int = 0) -> None:
        self._inner = inner
        self._method = method
        self._left = after_calls

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._inner, name)
        if name != self._method:
            return attribute

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self._left == 0:
                raise AutoReconnect(f"injected: the process died before {name}")
            self._left -= 1
            return await attribute(*args, **kwargs)

        return call


async def filled(repo: MongoSessionRepository, *, expired: bool = False, n: int = 70) -> str:
    """A session with ``n`` events in ``n / 10`` commits."""
    now = utc_now()
    session = Session(user_id="u")
    if expired:
        session = Session(
            user_id="u", created_at=now - timedelta(days=2), expires_at=now - timedelta(days=1)
        )
    await repo.save(session)
    for i in range(0, n, 10):
        await repo.append_events(session.id, [user(session.id, f"m{i + j}") for j in range(10)])
    return session.id


async def leftovers(store: Store, session_id: str) -> dict[str, int]:
    return {
        "session": await store.sessions.count_documents({"_id": session_id}),
        "commits": await store.commits.count_documents({"session": session_id}),
    }


GONE = {"session": 0, "commits": 0}


@pytest.mark.parametrize(
    ("collection", "method", "calls"),
    [
        ("sessions", "find_one_and_update", 0),
        ("commits", "delete_many", 0),
        ("sessions", "delete_one", 0),
    ],
)
@pytest.mark.parametrize("finisher", ["delete again", "sweep"])
async def test_a_delete_that_died_between_its_writes_is_finished_later(
    repo: MongoSessionRepository, collection: str, method: str, calls: int, finisher: str
) -> None:
    """The delete dies before one of its writes: what it left is found and removed by the next
    delete of the id, or by any sweep, and the session is never readable with its TTL intact."""
    store = repo._store
    session_id = await filled(repo)
    before = await leftovers(store, session_id)
    assert before == {"session": 1, "commits": 7}
    real = getattr(store, collection)
    setattr(store, collection, Crash(real, method, after_calls=calls))
    with pytest.raises(StorageError):
        await repo.delete(session_id)
    setattr(store, collection, real)
    assert await leftovers(store, session_id) != GONE  # the crash left something behind
    found = await repo.find_by_id(session_id)
    marked = found is None or found.is_expired(utc_now())  # left marked for the sweep
    assert marked or method == "find_one_and_update"  # or died before it wrote anything
    if finisher == "sweep":
        assert await repo.delete_expired_sessions(utc_now()) == (1 if marked else 0)
        if not marked:
            await repo.delete(session_id)
    else:
        await repo.delete(session_id)
    assert await leftovers(store, session_id) == GONE


async def test_a_sweep_that_died_mid_session_is_finished_by_the_next_sweep(
    repo: MongoSessionRepository,
) -> None:
    """The sweep dies after claiming a session and removing its commits: the next sweep, even
    one with an earlier ``before``, removes the rest."""
    store = repo._store
    session_id = await filled(repo, expired=True)
    real = store.sessions
    store.sessions = Crash(real, "delete_one")  # type: ignore[assignment]
    with pytest.raises(StorageError):
        await repo.delete_expired_sessions(utc_now())
    store.sessions = real
    assert await leftovers(store, session_id) == {"session": 1, "commits": 0}
    assert await repo.delete_expired_sessions(utc_now() - timedelta(days=30)) == 1
    assert await leftovers(store, session_id) == GONE


async def test_a_delete_removes_what_an_older_delete_left_without_a_session_document(
    repo: MongoSessionRepository,
) -> None:
    """Commits whose session document is already gone (an append that raced a delete) are
    removed by deleting the id."""
    store = repo._store
    session_id = await filled(repo)
    await store.sessions.delete_one({"_id": session_id})
    assert (await leftovers(store, session_id))["commits"] == 7
    await repo.delete(session_id)
    assert await leftovers(store, session_id) == GONE


async def test_a_ttl_extended_before_the_sweep_claims_the_session_wins(
    repo: MongoSessionRepository,
) -> None:
    """The sweep re-checks the expiry atomically when it claims a session."""
    store = repo._store
    session_id = await filled(repo, expired=True, n=10)

    class ExtendFirst:
        """The session's TTL is extended between the sweep's find and its claim."""

        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        async def find_one_and_update(self, flt: Any, update: Any, *args: Any) -> Any:
            await self._inner.update_one(
                {"_id": session_id}, {"$set": {"expires_at": utc_now() + timedelta(days=1)}}
            )
            return await self._inner.find_one_and_update(flt, update, *args)

    real = store.sessions
    store.sessions = ExtendFirst(real)  # type: ignore[assignment]
    assert await repo.delete_expired_sessions(utc_now()) == 0
    store.sessions = real
    assert (await leftovers(store, session_id))["session"] == 1
    assert len(await repo.find_events(session_id, EventFilter.all())) == 10
    found = await repo.find_by_id(session_id)
    assert found is not None
    assert not found.is_expired(utc_now())


async def test_a_cancelled_sweep_stops_after_the_session_it_is_on(
    repo: MongoSessionRepository,
) -> None:
    """Cancelled while it removes one of many expired sessions, the sweep finishes that one and
    returns at once: the others stay (whole) for the next sweep."""
    store = repo._store
    ids = [await filled(repo, expired=True, n=10) for _ in range(12)]
    initial = {i: await leftovers(store, i) for i in ids}
    entered = asyncio.Event()
    release = asyncio.Event()
    real = store.commits

    class Gate:
        """Holds the sweep inside its first session until the test has cancelled it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        async def delete_many(self, flt: Any, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            await release.wait()
            return await real.delete_many(flt, *args, **kwargs)

    store.commits = Gate()  # type: ignore[assignment]
    sweep = asyncio.create_task(repo.delete_expired_sessions(utc_now()))
    await entered.wait()
    sweep.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await sweep
    store.commits = real
    states = {i: await leftovers(store, i) for i in ids}
    assert list(states.values()).count(GONE) == 1  # the session it was on, finished whole
    assert all(state == initial[i] for i, state in states.items() if state != GONE)
    assert await repo.delete_expired_sessions(utc_now()) == 11
    assert all([await leftovers(store, i) == GONE for i in ids])


async def test_an_append_racing_a_delete_is_never_inherited_by_a_new_session(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """A process that still knows a session another one deleted appends to it: its commit is
    read by nobody, and the session created again with that id starts with its own log, the
    stale commit out of its way."""
    writer, deleter = MongoSessionRepository(mongo_db), MongoSessionRepository(mongo_db)
    await writer.ensure_indexes()
    session_id = await filled(writer, n=20)
    await deleter.delete(session_id)
    late = user(session_id, "late")
    assert await writer.append_events(session_id, [late], 2)  # the commit lands, orphaned
    assert await mongo_db["session_commits"].count_documents({"session": session_id}) == 1
    await deleter.save(Session(id=session_id, user_id="u"))
    assert await deleter.find_events(session_id, EventFilter.all()) == []
    fresh = [user(session_id, f"new {i}") for i in range(4)]
    for event in fresh:
        await deleter.append_event(event)
    await writer.append_event(user(session_id, "from the old view"))
    texts = [e.text for e in await deleter.find_events(session_id, EventFilter.all())]
    assert texts == ["new 0", "new 1", "new 2", "new 3", "from the old view"]
    assert await deleter.get_event_version(session_id) == 5
    assert late.id not in {e.id for e in await writer.find_events(session_id, EventFilter.all())}
