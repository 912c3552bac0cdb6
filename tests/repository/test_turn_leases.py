"""Turn leases on both stores: one holder per request id, expiry, release, renewal."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionNotFound,
)
from asyncsession.repository import TurnLeaseRepository

TTL = timedelta(minutes=5)


@pytest.fixture(params=["memory", "mongo"])
def repository_kind(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return InMemorySessionRepository()
    return MongoSessionRepository(request.getfixturevalue("mongo_db"))


@pytest.fixture
async def leases(repository_kind: Any) -> TurnLeaseRepository:
    """Each store, with one session ``s1``."""
    if isinstance(repository_kind, MongoSessionRepository):
        await repository_kind.ensure_indexes()
    assert isinstance(repository_kind, TurnLeaseRepository)
    await DefaultSessionService(repository_kind).create(
        CreateSessionRequest(id="s1", user_id="alice")
    )
    return repository_kind


async def test_one_of_many_concurrent_holders_gets_the_lease(leases: TurnLeaseRepository) -> None:
    """Twenty attempts race for one request id: exactly one wins; other ids are independent."""
    won = await asyncio.gather(
        *(leases.acquire_turn_lease("s1", "req.1$x", f"h{n}", TTL) for n in range(20))
    )

    assert sum(won) == 1
    assert await leases.acquire_turn_lease("s1", "req-2", "other", TTL)


async def test_the_holder_renews_and_a_release_frees_the_request(
    leases: TurnLeaseRepository,
) -> None:
    """The holder may take it again; another may not until the holder releases it."""
    assert await leases.acquire_turn_lease("s1", "r", "a", TTL)
    assert await leases.acquire_turn_lease("s1", "r", "a", TTL)
    assert not await leases.acquire_turn_lease("s1", "r", "b", TTL)

    await leases.release_turn_lease("s1", "r", "b")  # not b's: nothing happens
    assert not await leases.acquire_turn_lease("s1", "r", "b", TTL)
    await leases.release_turn_lease("s1", "r", "a")

    assert await leases.acquire_turn_lease("s1", "r", "b", TTL)


async def test_an_expired_lease_is_taken_over(leases: TurnLeaseRepository) -> None:
    """A lease past its expiry (a crashed holder's) goes to the next attempt."""
    assert await leases.acquire_turn_lease("s1", "r", "crashed", timedelta(seconds=-1))

    assert await leases.acquire_turn_lease("s1", "r", "retry", TTL)
    assert not await leases.acquire_turn_lease("s1", "r", "third", TTL)


async def test_a_lease_needs_the_session(leases: TurnLeaseRepository) -> None:
    """No session: ``SessionNotFound``; releasing on a missing session does nothing."""
    with pytest.raises(SessionNotFound):
        await leases.acquire_turn_lease("missing", "r", "a", TTL)
    await leases.release_turn_lease("missing", "r", "a")
