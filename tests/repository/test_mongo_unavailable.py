"""An unreachable server fails fast and typed: `StorageUnavailable` within the client's bounds."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from asyncsession import EventFilter, MongoSessionRepository, Session, StorageUnavailable
from asyncsession.exceptions import StorageError
from asyncsession.memory import MemoryStoreError, MongoMemoryStore
from asyncsession.repository.mongo._repository import (
    DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
    DEFAULT_TIMEOUT_MS,
    with_web_timeouts,
)
from asyncsession.testing._contract._support import user
from asyncsession.testing._mongo_server import LocalMongoServer

SLACK = 2.0  # seconds beyond the bound: a loaded two-core box, never the 30 s PyMongo default

Operation = Callable[[MongoSessionRepository], Awaitable[object]]


@pytest.fixture
def dead_uri() -> Iterator[str]:
    """A loopback port where no server answers: connections queue up and are never accepted."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"mongodb://127.0.0.1:{sock.getsockname()[1]}/?directConnection=true"


async def _create(repo: MongoSessionRepository) -> object:
    return await repo.save(Session(id="s1", user_id="u"))


async def _append(repo: MongoSessionRepository) -> object:
    return await repo.append_events("s1", [user("s1", "hi")])


async def _read(repo: MongoSessionRepository) -> object:
    return await repo.find_events("s1", EventFilter())


OPERATIONS = [
    pytest.param(_create, id="create"),
    pytest.param(_append, id="append"),
    pytest.param(_read, id="read"),
]


async def _elapsed(operation: Operation, repo: MongoSessionRepository) -> float:
    started = time.monotonic()
    with pytest.raises(StorageUnavailable) as raised:
        await operation(repo)
    assert isinstance(raised.value, StorageError)
    assert raised.value.__cause__ is not None
    return time.monotonic() - started


async def test_from_uri_bounds_an_unreachable_server_by_its_web_default(dead_uri: str) -> None:
    """With no options, a store that cannot reach its server fails within about five seconds."""
    async with MongoSessionRepository.from_uri(dead_uri, "db") as repo:
        elapsed = await _elapsed(_create, repo)

    bound = DEFAULT_SERVER_SELECTION_TIMEOUT_MS / 1000
    assert bound - 0.5 <= elapsed < bound + SLACK


@pytest.mark.parametrize("operation", OPERATIONS)
async def test_every_operation_raises_storage_unavailable_within_a_caller_bound(
    dead_uri: str, operation: Operation
) -> None:
    """Create, append and read each raise `StorageUnavailable` within the caller's own bound."""
    async with MongoSessionRepository.from_uri(
        dead_uri, "db", serverSelectionTimeoutMS=300
    ) as repo:
        assert await _elapsed(operation, repo) < 0.3 + SLACK


async def test_a_timeout_in_the_uri_wins_over_the_web_default(dead_uri: str) -> None:
    """A bound given in the URI, in any letter case, is kept rather than replaced."""
    async with MongoSessionRepository.from_uri(
        dead_uri + "&serverselectiontimeoutms=300", "db"
    ) as repo:
        assert await _elapsed(_read, repo) < 0.3 + SLACK


def test_the_web_timeouts_fill_only_what_the_caller_left_unset() -> None:
    """Keywords and URI options are kept as given; the other bounds get their defaults (no
    ``timeoutMS``, which would override the caller's ``socketTimeoutMS``)."""
    options = with_web_timeouts("mongodb://h/?connectTimeoutMS=7", {"SocketTimeoutMS": 9})

    assert options == {"serverSelectionTimeoutMS": 5000, "SocketTimeoutMS": 9}


async def test_the_memory_store_raises_both_its_own_and_the_storage_outage_error(
    dead_uri: str,
) -> None:
    """The MongoDB memory store's outage is a `MemoryStoreError` and a `StorageUnavailable`."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        dead_uri, serverSelectionTimeoutMS=300
    )
    try:
        store = MongoMemoryStore(client["db"], scope="alice")
        with pytest.raises(StorageUnavailable) as raised:
            await store.write("notes.md", "hello", expected_version=None)
        assert isinstance(raised.value, MemoryStoreError)
        assert raised.value.reason == "backend"
    finally:
        await client.close()


async def test_a_server_stopped_under_a_working_store_fails_fast_then_recovers(
    private_mongo_server: LocalMongoServer,
) -> None:
    """Kill the server under a store in use: each operation fails within the bound with
    `StorageUnavailable`; after a restart the same store works again and lost nothing."""
    server = private_mongo_server
    async with MongoSessionRepository.from_uri(
        server.uri(), "outage", serverSelectionTimeoutMS=1000
    ) as repo:
        await repo.ensure_indexes()
        await _create(repo)
        await _append(repo)

        server.kill()
        for operation in (_create, _append, _read):
            assert await _elapsed(operation, repo) < 1.0 + SLACK

        server.start()
        await repo.append_events("s1", [user("s1", "again")])
        texts = [e.message.text for e in await repo.find_events("s1", EventFilter())]  # type: ignore[union-attr]
    assert texts == ["hi", "again"]


def test_from_uri_bounds_each_operation_end_to_end_by_default() -> None:
    """A store that owns its client sets ``timeoutMS`` unless the caller or the URI set it."""
    assert with_web_timeouts("mongodb://h/", {})["timeoutMS"] == DEFAULT_TIMEOUT_MS
    assert "timeoutMS" not in with_web_timeouts("mongodb://h/?timeoutms=0", {})
    assert with_web_timeouts("mongodb://h/", {"timeoutMS": 250})["timeoutMS"] == 250
    assert "timeoutMS" not in with_web_timeouts("mongodb://h/", {"serverSelectionTimeoutMS": 9})


async def test_a_frozen_server_fails_each_operation_within_the_bound_then_recovers(
    private_mongo_server: LocalMongoServer,
) -> None:
    """``SIGSTOP`` the server under a store in use (connections open, no answer): each operation
    raises `StorageUnavailable` within ``timeoutMS``; after ``SIGCONT`` the same store works."""
    server = private_mongo_server
    bound = 1.5
    async with MongoSessionRepository.from_uri(
        server.uri(), "frozen", timeoutMS=int(bound * 1000)
    ) as repo:
        await repo.ensure_indexes()
        await _create(repo)
        await _append(repo)

        server.freeze()
        try:
            for operation in (_create, _append, _read):
                assert await _elapsed(operation, repo) < bound + SLACK
        finally:
            server.thaw()

        await repo.append_events("s1", [user("s1", "again")])
        texts = [e.message.text for e in await repo.find_events("s1", EventFilter())]  # type: ignore[union-attr]
    assert texts[0] == "hi"
    assert texts[-1] == "again"


class _SlowReads:
    """The commits collection, its reads starting 1.2 s late (a slow network, a busy loop)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def aggregate(self, *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(1.2)
        return await self._inner.aggregate(*args, **kwargs)


async def test_one_call_of_the_store_shares_one_deadline(mongo_uri: str) -> None:
    """``timeoutMS`` bounds a whole call, all its commands together: an append that spends the
    bound before its first command fails with `StorageUnavailable` at once, where a bound per
    command would have let every command run its own second."""
    async with MongoSessionRepository.from_uri(mongo_uri, "deadline", timeoutMS=1000) as setup:
        await setup.ensure_indexes()
        await setup.save(Session(id="s1", user_id="u"))
        async with MongoSessionRepository.from_uri(mongo_uri, "deadline", timeoutMS=1000) as repo:
            store = repo._store
            store.commits = _SlowReads(store.commits)  # type: ignore[assignment]
            started = time.monotonic()
            with pytest.raises(StorageUnavailable):
                await repo.append_events("s1", [user("s1", "late")])  # a read, then an insert
            assert time.monotonic() - started < 1.2 + SLACK
        assert await setup.find_events("s1", EventFilter()) == []
        client = setup._client
        assert client is not None
        await client.drop_database("deadline")
