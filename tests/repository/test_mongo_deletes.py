"""Deletes that finish: a delete or a sweep that dies halfway is finished by a later one, and a
cancelled sweep stops after the session it is on. On the test server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import EventFilter, Session, StorageError
from asyncsession.events import utc_now
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._store import Store
from asyncsession.testing.contract import user


@pytest.fixture
async def repo(
    mongo_db: AsyncDatabase[dict[str, Any]], tighten: Callable[[], None]
) -> MongoSessionRepository:
    tighten()  # small tails: most events roll forward into the events collection
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
    """A session whose log reaches below the tail (events and id registrations exist)."""
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
        "events": await store.events.count_documents({"session_id": session_id}),
        "ids": await store.event_ids.count_documents({"session_id": session_id}),
    }


GONE = {"session": 0, "events": 0, "ids": 0}


@pytest.mark.parametrize(
    ("collection", "method"),
    [("events", "delete_many"), ("event_ids", "delete_many"), ("sessions", "delete_one")],
)
@pytest.mark.parametrize("finisher", ["delete again", "sweep"])
async def test_a_delete_that_died_between_its_writes_is_finished_later(
    repo: MongoSessionRepository, collection: str, method: str, finisher: str
) -> None:
    """The delete dies before one of its writes: what it left is found and removed by the next
    delete of the id, or by any sweep, and the session is never readable with its TTL intact."""
    store = repo._store
    session_id = await filled(repo)
    before = await leftovers(store, session_id)
    assert before["events"] > 0
    assert before["ids"] == 70
    real = getattr(store, collection)
    setattr(store, collection, Crash(real, method))
    with pytest.raises(StorageError):
        await repo.delete(session_id)
    setattr(store, collection, real)
    assert await leftovers(store, session_id) != GONE  # the crash left something behind
    found = await repo.find_by_id(session_id)
    assert found is None or found.is_expired(utc_now())  # what is left is marked for the sweep
    if finisher == "sweep":
        assert await repo.delete_expired_sessions(utc_now()) == 1
    else:
        await repo.delete(session_id)
    assert await leftovers(store, session_id) == GONE


async def test_a_sweep_that_died_mid_session_is_finished_by_the_next_sweep(
    repo: MongoSessionRepository,
) -> None:
    """The sweep dies after claiming a session and removing its events: the next sweep, even
    one with an earlier ``before``, removes the rest."""
    store = repo._store
    session_id = await filled(repo, expired=True)
    real = store.event_ids
    store.event_ids = Crash(real, "delete_many")  # type: ignore[assignment]
    with pytest.raises(StorageError):
        await repo.delete_expired_sessions(utc_now())
    store.event_ids = real
    assert (await leftovers(store, session_id))["ids"] == 70
    assert await repo.delete_expired_sessions(utc_now() - timedelta(days=30)) == 1
    assert await leftovers(store, session_id) == GONE


async def test_a_delete_removes_what_an_older_delete_left_without_a_session_document(
    repo: MongoSessionRepository,
) -> None:
    """Events and registrations whose session document is already gone (a delete that removed
    the session first and died) are removed by deleting the id."""
    store = repo._store
    session_id = await filled(repo)
    await store.sessions.delete_one({"_id": session_id})
    assert (await leftovers(store, session_id))["ids"] == 70
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

        async def update_one(self, flt: Any, update: Any, **kwargs: Any) -> Any:
            await self._inner.update_one(
                {"_id": session_id}, {"$set": {"expires_at": utc_now() + timedelta(days=1)}}
            )
            return await self._inner.update_one(flt, update, **kwargs)

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
    real = store.event_ids

    class Gate:
        """Holds the sweep inside its first session until the test has cancelled it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        async def delete_many(self, flt: Any, *args: Any, **kwargs: Any) -> Any:
            entered.set()
            await release.wait()
            return await real.delete_many(flt, *args, **kwargs)

    store.event_ids = Gate()  # type: ignore[assignment]
    sweep = asyncio.create_task(repo.delete_expired_sessions(utc_now()))
    await entered.wait()
    sweep.cancel()
    release.set()
    with pytest.raises(asyncio.CancelledError):
        await sweep
    store.event_ids = real
    states = {i: await leftovers(store, i) for i in ids}
    assert list(states.values()).count(GONE) == 1  # the session it was on, finished whole
    assert all(state == initial[i] for i, state in states.items() if state != GONE)
    assert await repo.delete_expired_sessions(utc_now()) == 11
    assert all([await leftovers(store, i) == GONE for i in ids])
