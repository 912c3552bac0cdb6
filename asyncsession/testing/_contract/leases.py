"""The contract kit: leases.

A lease is carried by the commit an append writes (no extra write) or taken on a commit with
``acquire_lease``; a snapshot shows the newest commit's lease, so a commit without one ends the
leases before it. One holder at a time, renewed by its holder, taken over once it expired,
given back only by its holder; of many concurrent takers exactly one wins.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from ...exceptions import SessionNotFound
from ...filters import EventFilter
from ...repository import Lease
from ._support import ContractBase, new_id, user

__all__ = ["LeasesContract"]


def live(holder: str) -> Lease:
    """A lease that outlives every test."""
    return Lease(holder=holder, expires_at=datetime.now(UTC) + timedelta(minutes=5))


def expired(holder: str) -> Lease:
    """A lease that ran out a second ago (a crashed holder's, seen later)."""
    return Lease(holder=holder, expires_at=datetime.now(UTC) - timedelta(seconds=1))


class LeasesContract(ContractBase):
    """Contract tests for leases on commits and on the session."""

    async def lease_of(self, session_id: str) -> Lease | None:
        """The lease a snapshot reports."""
        snapshot = await self.snapshot(session_id, EventFilter.last_n(1))
        return snapshot.lease

    async def test_a_commit_carries_its_lease_until_the_next_commit(self) -> None:
        """The lease an append carries is the snapshot's until a commit without one follows."""
        s = (await self.new_session()).id
        lease = live("turn-1")
        assert await self.repo.append_events(s, [user(s, "question")], 0, lease=lease)
        assert await self.lease_of(s) == lease
        assert await self.repo.append_events(s, [user(s, "reply")], 1)
        assert await self.lease_of(s) is None

    async def test_a_lease_on_the_session_itself_is_taken_at_version_zero(self) -> None:
        """Version 0 leases the session document; a snapshot at version 0 shows it."""
        s = (await self.new_session()).id
        lease = live("first")
        assert await self.repo.acquire_lease(s, 0, lease)
        assert await self.lease_of(s) == lease
        assert not await self.repo.acquire_lease(s, 0, live("second"))

    async def test_a_free_commit_is_taken_and_then_held(self) -> None:
        """The first holder takes a commit; another holder is refused while it runs; other
        commits and other sessions are independent; a commit the session does not have yet
        cannot be taken."""
        s = (await self.new_session()).id
        await self.append(s, "one", "two")
        held = live("a")
        assert await self.repo.acquire_lease(s, 2, held)
        assert not await self.repo.acquire_lease(s, 2, live("b"))
        assert await self.repo.acquire_lease(s, 1, live("b"))
        other = (await self.new_session()).id
        await self.append(other, "one", "two")
        assert await self.repo.acquire_lease(other, 2, live("b"))
        assert not await self.repo.acquire_lease(s, 3, live("c"))
        assert await self.lease_of(s) == held

    async def test_the_holder_renews_its_lease(self) -> None:
        """Taking it again as its holder renews it: a lease that would have expired runs on."""
        s = (await self.new_session()).id
        assert await self.repo.append_events(s, [user(s, "q")], lease=expired("a"))
        renewed = live("a")
        assert await self.repo.acquire_lease(s, 1, renewed)
        assert not await self.repo.acquire_lease(s, 1, live("b"))
        assert await self.lease_of(s) == renewed

    async def test_an_expired_lease_goes_to_the_next_taker(self) -> None:
        """After its expiry the commit goes to a new holder, who then holds it against the old
        one; a snapshot returns an expired lease as it is."""
        s = (await self.new_session()).id
        crashed = expired("crashed")
        assert await self.repo.append_events(s, [user(s, "q")], 0, lease=crashed)
        lease = await self.lease_of(s)
        assert lease == crashed
        assert not crashed.is_live()
        assert await self.repo.acquire_lease(s, 1, live("retry"))
        assert not await self.repo.acquire_lease(s, 1, live("crashed"))
        assert not await self.repo.acquire_lease(s, 1, live("third"))

    async def test_only_the_holder_releases(self) -> None:
        """A release by anyone else changes nothing; the holder's frees the commit."""
        s = (await self.new_session()).id
        await self.append(s, "q")
        assert await self.repo.acquire_lease(s, 1, live("a"))
        await self.repo.release_lease(s, 1, "b")
        assert not await self.repo.acquire_lease(s, 1, live("b"))
        await self.repo.release_lease(s, 1, "a")
        assert await self.lease_of(s) is None
        assert await self.repo.acquire_lease(s, 1, live("b"))

    async def test_a_replaced_holder_cannot_release_its_successor(self) -> None:
        """The holder whose lease expired and was taken over gives back nothing of the new
        holder's when it finally releases."""
        s = (await self.new_session()).id
        assert await self.repo.append_events(s, [user(s, "q")], 0, lease=expired("slow"))
        assert await self.repo.acquire_lease(s, 1, live("new"))
        await self.repo.release_lease(s, 1, "slow")
        assert not await self.repo.acquire_lease(s, 1, live("third"))

    async def test_many_concurrent_takers_have_exactly_one_winner(self) -> None:
        """Of 50 tasks racing for a free commit, for one whose lease expired and for the
        session itself, exactly one wins each time, and the snapshot names the winner."""
        s = (await self.new_session()).id
        assert await self.repo.acquire_lease(s, 0, expired("crashed"))
        for version in (0, 1, 2):
            if version:
                await self.repo.append_events(
                    s, [user(s, f"q{version}")], lease=expired("crashed") if version == 2 else None
                )
            takers = [live(new_id("h")) for _ in range(50)]
            won = await asyncio.gather(*(self.repo.acquire_lease(s, version, t) for t in takers))
            assert sum(won) == 1
            assert await self.lease_of(s) == takers[won.index(True)]

    async def test_of_concurrent_leased_appends_at_one_version_one_wins(self) -> None:
        """Thirty question-first turns append their question with a lease at one version:
        one commit, carrying the winner's lease."""
        s = (await self.new_session()).id
        leases = [live(new_id("turn")) for _ in range(30)]
        won = await asyncio.gather(
            *(
                self.repo.append_events(s, [user(s, f"q{i}")], 0, lease=lease)
                for i, lease in enumerate(leases)
            )
        )
        assert sum(won) == 1
        assert await self.repo.get_event_version(s) == 1
        assert await self.lease_of(s) == leases[won.index(True)]

    async def test_a_lease_needs_the_session(self) -> None:
        """No session: taking raises ``SessionNotFound``; releasing does nothing."""
        with pytest.raises(SessionNotFound):
            await self.repo.acquire_lease(new_id(), 0, live("a"))
        await self.repo.release_lease(new_id(), 0, "a")
