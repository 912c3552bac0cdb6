"""Shared fixtures: the MongoDB test server, fresh databases, and a no-network guard.

The server tests need a MongoDB-wire server. ``scripts/test`` installs the test server and sets
``ASYNCSESSION_SECANTUSD``; this file starts it once per test process (each pytest-xdist worker
has one of its own) on a free loopback port. When ``MONGODB_URI`` is set, that server is used
instead. With neither, the server tests fail loudly: to opt out explicitly, deselect them with
``-m "not mongodb"``.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

MONGO_FIXTURES = {"mongo_uri", "mongo_client", "mongo_db", "mongo_server", "private_mongo_server"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test that uses a server fixture with ``mongodb``."""
    for item in items:
        if MONGO_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.mongodb)


def _is_loopback(host: str) -> bool:
    return host.startswith("127.") or host in ("localhost", "::1")


@pytest.fixture(autouse=True)
def _no_network(monkeypatch: pytest.MonkeyPatch) -> None:
    """Refuse any connection that leaves the loopback interface."""
    real_connect = socket.socket.connect

    def guarded(self: socket.socket, address: Any) -> Any:
        host = address[0] if isinstance(address, tuple) else address
        inet = self.family in (socket.AF_INET, socket.AF_INET6)
        if inet and isinstance(host, str) and not _is_loopback(host):
            raise RuntimeError(f"tests must not reach the network (tried {address!r})")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", guarded)


@pytest.fixture(scope="session")
def mongo_server() -> Iterator[LocalMongoServer | None]:
    """The test server started for this run, or ``None`` when ``MONGODB_URI`` is set."""
    if os.environ.get("MONGODB_URI"):
        yield None
        return
    executable = find_server_executable()
    if executable is None:
        pytest.fail(
            "No MongoDB server for the server tests: run them with scripts/test (it installs and "
            "starts the test server), set MONGODB_URI, or deselect them with -m 'not mongodb'.",
            pytrace=False,
        )
    server = LocalMongoServer(executable)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def mongo_uri(mongo_server: LocalMongoServer | None) -> str:
    """The URI of the server the tests use, with journaled majority writes."""
    if mongo_server is None:
        return os.environ["MONGODB_URI"]
    return mongo_server.uri(w="majority", journal="true")


@pytest.fixture
async def mongo_client(mongo_uri: str) -> AsyncIterator[AsyncMongoClient[dict[str, Any]]]:
    """A client for one test."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
    try:
        yield client
    finally:
        await client.close()


@pytest.fixture
async def mongo_db(
    mongo_client: AsyncMongoClient[dict[str, Any]],
) -> AsyncIterator[AsyncDatabase[dict[str, Any]]]:
    """A fresh database for one test, dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        yield mongo_client[name]
    finally:
        await mongo_client.drop_database(name)


@pytest.fixture
def private_mongo_server() -> Iterator[LocalMongoServer]:
    """A server of this test's own, which the test may kill and restart."""
    executable = find_server_executable()
    if executable is None:
        pytest.fail(
            "This test kills and restarts a server of its own and needs the test server "
            "installed: run it with scripts/test.",
            pytrace=False,
        )
    server = LocalMongoServer(executable)
    server.start()
    try:
        yield server
    finally:
        server.stop()
