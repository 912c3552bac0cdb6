"""Sessions found by indexed metadata: declared keys on both stores, the service and its
decorators, and what the MongoDB store sends for a lookup."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from command_counting import counted_repository
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    Session,
    SessionRepository,
    UsageError,
)
from asyncsession.events import AGENT_NAME, PRINCIPAL_NAME

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)


def _id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["memory", "mongo"])
async def tenant_store(
    request: pytest.FixtureRequest, mongo_db: AsyncDatabase[dict[str, Any]]
) -> AsyncIterator[SessionRepository]:
    """A store of either kind that indexes ``tenant`` and ``channel`` besides the well-known
    attributes."""
    keys = ("tenant", "channel")
    if request.param == "memory":
        yield InMemorySessionRepository(indexed_metadata_keys=keys)
        return
    repo = MongoSessionRepository(mongo_db, indexed_metadata_keys=keys)
    await repo.ensure_indexes()
    yield repo
    await repo.aclose()


async def test_declared_keys_are_indexed_beside_the_well_known_ones(
    tenant_store: SessionRepository,
) -> None:
    tenant = _id("acme")
    first = await tenant_store.save(
        Session(
            user_id="alice",
            created_at=T0,
            metadata={"tenant": tenant, "channel": "web", "note": tenant},
        )
    )
    second = await tenant_store.save(
        Session(user_id="bob", created_at=T0 + timedelta(minutes=1), metadata={"tenant": tenant})
    )
    await tenant_store.save(Session(user_id="carol", metadata={"tenant": _id("other")}))
    assert await tenant_store.find_by_metadata("tenant", tenant) == [first, second]
    assert [s.id for s in await tenant_store.find_by_metadata("channel", "web")] == [first.id]
    with pytest.raises(UsageError, match="'note' is not indexed"):
        await tenant_store.find_by_metadata("note", tenant)
    agent = _id("bot")
    labelled = await tenant_store.save(Session(user_id="dave", metadata={AGENT_NAME: agent}))
    assert await tenant_store.find_by_metadata(AGENT_NAME, agent) == [labelled]


@pytest.mark.parametrize("keys", [["ok", ""], ["a\x00b"], "tenant", [3]])
async def test_a_store_refuses_keys_it_cannot_index(
    keys: Any, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    with pytest.raises(UsageError):
        InMemorySessionRepository(indexed_metadata_keys=keys)
    with pytest.raises(UsageError):
        MongoSessionRepository(mongo_db, indexed_metadata_keys=keys)


class _Decorated(DefaultSessionService):
    """A decorator as users write one: a subclass that overrides something else."""

    async def delete(self, session_id: str) -> None:
        await super().delete(session_id)


async def test_the_service_and_its_decorator_look_sessions_up() -> None:
    repo = InMemorySessionRepository(indexed_metadata_keys=["tenant"])
    service = DefaultSessionService(repo)
    wrapped = _Decorated(repo)
    tenant = _id("acme")
    made = [
        await service.create(CreateSessionRequest(user_id="alice", metadata={"tenant": tenant}))
        for _ in range(3)
    ]
    oldest_first = sorted(made, key=lambda s: (s.created_at, s.id))
    assert await service.find_by_metadata("tenant", tenant) == oldest_first
    assert await wrapped.find_by_metadata("tenant", tenant, limit=2) == oldest_first[:2]
    principal = await wrapped.find_by_metadata(PRINCIPAL_NAME, "alice")
    assert principal == await service.find_by_user_id("alice")
    with pytest.raises(UsageError):
        await wrapped.find_by_metadata("region", "eu")
    with pytest.raises(UsageError):
        await service.find_by_metadata("", tenant)
    with pytest.raises(UsageError, match="principal_name"):
        await service.create(
            CreateSessionRequest(user_id="alice", metadata={PRINCIPAL_NAME: "mallory"})
        )


async def test_a_mongodb_lookup_is_one_find_on_its_index(mongo_uri: str) -> None:
    async with counted_repository(mongo_uri, indexed_metadata_keys=["tenant"]) as (repo, counter):
        tenant = _id("acme")
        for n in range(30):
            await repo.save(
                Session(
                    user_id=f"u{n % 3}",
                    created_at=T0 + timedelta(seconds=29 - n),
                    metadata={"tenant": tenant if n % 2 else _id("other")},
                )
            )
        counter.clear()
        found = await repo.find_by_metadata("tenant", tenant, limit=10)
        assert counter.take() == [("find", "sessions")]
        assert len(found) == 10
        assert [s.created_at for s in found] == sorted(s.created_at for s in found)
        await repo.find_by_metadata(PRINCIPAL_NAME, "u1", limit=3)
        assert counter.take() == [("find", "sessions")]


async def test_the_lookup_index_is_created_and_serves_the_query(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    repo = MongoSessionRepository(mongo_db, indexed_metadata_keys=["tenant"])
    await repo.ensure_indexes()
    await repo.save(Session(user_id="alice", metadata={"tenant": "acme"}))
    keys = [dict(doc["key"]) async for doc in await mongo_db["sessions"].list_indexes()]
    assert {"attributes": 1, "created_at": 1, "_id": 1} in keys
    stored = await mongo_db["sessions"].find_one({"user_id": "alice"})
    assert stored is not None
    assert stored["attributes"] == ["tenant\x00acme"]
