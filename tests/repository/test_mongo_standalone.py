"""The contract on a standalone server: no replica set, no transactions, no retryable writes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from pymongo import AsyncMongoClient

from asyncsession import MongoSessionRepository
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable
from asyncsession.testing.contract import SessionRepositoryContract


@pytest.fixture(scope="module")
def standalone_server() -> Iterator[LocalMongoServer]:
    executable = find_server_executable()
    if executable is None:
        pytest.fail("the standalone contract run needs the test server: run it with scripts/test")
    server = LocalMongoServer(executable, standalone=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.mongodb
class TestMongoStandaloneContract(SessionRepositoryContract):
    """The whole contract kit on a standalone server."""

    @pytest.fixture
    async def repository(
        self, standalone_server: LocalMongoServer
    ) -> AsyncIterator[MongoSessionRepository]:
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            standalone_server.uri(w="1", journal="true"), tz_aware=True
        )
        hello = await client.admin.command("hello")
        assert "setName" not in hello  # really a standalone server
        name = f"t_{uuid.uuid4().hex[:16]}"
        repository = MongoSessionRepository(client[name])
        await repository.ensure_indexes()
        try:
            yield repository
        finally:
            await client.drop_database(name)
            await client.close()
