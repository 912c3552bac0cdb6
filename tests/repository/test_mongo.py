"""The MongoDB repository passes the contract kit on the test server and on mongomock-motor."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from mongomock_motor import AsyncMongoMockClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession.encryption import EncryptionOptions
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing.contract import SessionRepositoryContract


class TestMongoContract(SessionRepositoryContract):
    """The contract, on the test server (a replica set) over the wire."""

    @pytest.fixture
    async def repository(
        self, mongo_db: AsyncDatabase[dict[str, Any]]
    ) -> AsyncIterator[MongoSessionRepository]:
        repo = MongoSessionRepository(mongo_db)
        await repo.ensure_indexes()
        yield repo
        await repo.aclose()


class TestMongoMockContract(SessionRepositoryContract):
    """The contract, on mongomock-motor: no server, no sessions, no transactions, and no
    GridFS bucket (on a database that is not PyMongo's, bodies stay in their commit)."""

    offloads_large_bodies = False

    @pytest.fixture
    async def repository(self) -> AsyncIterator[MongoSessionRepository]:
        client = AsyncMongoMockClient(tz_aware=True)
        repo = MongoSessionRepository(client["contract"])
        await repo.ensure_indexes()
        yield repo
        await repo.aclose()


class TestMongoEncryptedContract(SessionRepositoryContract):
    """The contract, on the test server with content encrypted under a local master key."""

    @pytest.fixture
    async def repository(
        self, mongo_db: AsyncDatabase[dict[str, Any]]
    ) -> AsyncIterator[MongoSessionRepository]:
        setting = EncryptionOptions.local(
            EncryptionOptions.generate_local_key(), key_vault_namespace=f"{mongo_db.name}.keyvault"
        )
        repo = MongoSessionRepository(mongo_db, encryption=setting)
        await repo.ensure_indexes()
        yield repo
        await repo.aclose()
