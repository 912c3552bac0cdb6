"""Turn leases on both stores: the contract kit's lease tests, on each."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import InMemorySessionRepository, MongoSessionRepository
from asyncsession.testing.contract import TurnLeaseRepositoryContract


class TestInMemoryLeases(TurnLeaseRepositoryContract):
    """The lease contract on the embedded store."""

    @pytest.fixture
    def repository(self) -> InMemorySessionRepository:
        return InMemorySessionRepository()


class TestMongoLeases(TurnLeaseRepositoryContract):
    """The lease contract on the test server, over the wire."""

    @pytest.fixture
    async def repository(
        self, mongo_db: AsyncDatabase[dict[str, Any]]
    ) -> AsyncIterator[MongoSessionRepository]:
        repo = MongoSessionRepository(mongo_db)
        await repo.ensure_indexes()
        yield repo
        await repo.aclose()
