"""The contract kit: turn leases (the optional `TurnLeaseRepository` capability).

One holder per request id at a time, renewed by its holder, taken over once it expired, given
back only by its holder; of many concurrent takers exactly one wins.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

import pytest

from ...exceptions import SessionNotFound
from ...repository import SessionRepository, TurnLeaseRepository
from ._support import ContractBase, new_id

__all__ = ["TurnLeaseContract"]

TTL = timedelta(minutes=5)
"""A lease that outlives every test."""
EXPIRED = timedelta(seconds=-1)
"""A lease that has run out as soon as it is taken (a crashed holder's, seen later)."""


class TurnLeaseContract(ContractBase):
    """Contract tests for `TurnLeaseRepository`; the ``repository`` fixture must implement it."""

    async def leased_session(
        self, repository: SessionRepository
    ) -> tuple[TurnLeaseRepository, str]:
        """The store as a lease store, and a new session on it."""
        assert isinstance(repository, TurnLeaseRepository), "the store must lease turns"
        session = await self.new_session(repository)
        return repository, session.id

    async def test_a_free_request_is_taken_and_then_held(
        self, repository: SessionRepository
    ) -> None:
        """The first holder takes the request; another holder is refused while it runs; other
        request ids (dots and dollars included) and other sessions are independent."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "req.1$x", "a", TTL)
        assert not await leases.acquire_turn_lease(s, "req.1$x", "b", TTL)
        assert await leases.acquire_turn_lease(s, "req.1", "b", TTL)
        other = await self.new_session(repository)
        assert await leases.acquire_turn_lease(other.id, "req.1$x", "b", TTL)

    async def test_the_holder_renews_its_lease(self, repository: SessionRepository) -> None:
        """Taking it again as its holder renews it: a lease that would have expired runs on."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "r", "a", EXPIRED)
        assert await leases.acquire_turn_lease(s, "r", "a", TTL)
        assert not await leases.acquire_turn_lease(s, "r", "b", TTL)

    async def test_an_expired_lease_goes_to_the_next_taker(
        self, repository: SessionRepository
    ) -> None:
        """After its expiry the request goes to a new holder, who then holds it against the
        old one."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "r", "crashed", EXPIRED)
        assert await leases.acquire_turn_lease(s, "r", "retry", TTL)
        assert not await leases.acquire_turn_lease(s, "r", "crashed", TTL)
        assert not await leases.acquire_turn_lease(s, "r", "third", TTL)

    async def test_only_the_holder_releases(self, repository: SessionRepository) -> None:
        """A release by anyone else changes nothing; the holder's frees the request."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "r", "a", TTL)
        await leases.release_turn_lease(s, "r", "b")
        assert not await leases.acquire_turn_lease(s, "r", "b", TTL)
        await leases.release_turn_lease(s, "r", "a")
        assert await leases.acquire_turn_lease(s, "r", "b", TTL)

    async def test_a_replaced_holder_cannot_release_its_successor(
        self, repository: SessionRepository
    ) -> None:
        """The holder whose lease expired and was taken over gives back nothing of the new
        holder's when it finally releases."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "r", "slow", EXPIRED)
        assert await leases.acquire_turn_lease(s, "r", "new", TTL)
        await leases.release_turn_lease(s, "r", "slow")
        assert not await leases.acquire_turn_lease(s, "r", "third", TTL)

    async def test_many_concurrent_takers_have_exactly_one_winner(
        self, repository: SessionRepository
    ) -> None:
        """Of 50 tasks racing for a free request, and for one whose lease expired, exactly one
        wins each time."""
        leases, s = await self.leased_session(repository)
        assert await leases.acquire_turn_lease(s, "expired", "crashed", EXPIRED)
        for request_id in ("free", "expired"):
            won = await asyncio.gather(
                *(leases.acquire_turn_lease(s, request_id, new_id("h"), TTL) for _ in range(50))
            )
            assert sum(won) == 1

    async def test_a_lease_needs_the_session(self, repository: SessionRepository) -> None:
        """No session: taking raises ``SessionNotFound``; releasing does nothing."""
        leases, _ = await self.leased_session(repository)
        with pytest.raises(SessionNotFound):
            await leases.acquire_turn_lease(new_id(), "r", "a", TTL)
        await leases.release_turn_lease(new_id(), "r", "a")
