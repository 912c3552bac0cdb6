"""Fixtures shared by the compaction tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, InMemorySessionRepository, MongoSessionRepository


@pytest.fixture(params=["memory", "mongo"])
async def service(
    request: pytest.FixtureRequest, mongo_db: AsyncDatabase[dict[str, Any]]
) -> AsyncIterator[DefaultSessionService]:
    """A service that stores system messages, on each store in turn.

    A test module that defines its own ``service`` fixture uses that one instead.
    """
    if request.param == "memory":
        yield DefaultSessionService(InMemorySessionRepository(), allow_system_messages=True)
        return
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    yield DefaultSessionService(repo, allow_system_messages=True)
    await repo.aclose()
