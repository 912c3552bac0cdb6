"""The contract kit: expiry.

The sweep deletes expired sessions with their events, and a TTL extended in time wins.
"""

from __future__ import annotations

from datetime import timedelta

from ...events import utc_now
from ...filters import EventFilter
from ._support import (
    ContractBase,
)

__all__ = ["ExpiryContract"]


class ExpiryContract(ContractBase):
    """Contract tests for `delete_expired_sessions`."""

    async def test_delete_expired_sessions_deletes_only_expired_sessions_and_their_events(
        self,
    ) -> None:
        """Only sessions that expired strictly before the instant go, with their events."""
        now = utc_now()
        expired = await self.new_session(expires_at=now - timedelta(seconds=60))
        extended = await self.new_session(expires_at=now + timedelta(seconds=60))
        default = await self.new_session()
        never = await self.new_session(expires_at=None)
        exactly = await self.new_session(expires_at=now)
        await self.append(expired.id, "old")
        await self.append(extended.id, "new")
        assert await self.repo.delete_expired_sessions(now) >= 1
        assert await self.repo.find_by_id(expired.id) is None
        assert await self.repo.find_events(expired.id, EventFilter.all()) == []
        for kept in (extended, default, never, exactly):
            assert await self.repo.find_by_id(kept.id) is not None
        assert await self.texts(extended.id, EventFilter.all()) == ["new"]

    async def test_a_ttl_extended_before_the_sweep_wins(self) -> None:
        """A session whose expiry was moved past the sweep's instant is kept."""
        now = utc_now()
        session = await self.new_session(expires_at=now - timedelta(seconds=1))
        await self.repo.save(session.model_copy(update={"expires_at": now + timedelta(hours=1)}))
        await self.repo.delete_expired_sessions(now)
        assert await self.repo.find_by_id(session.id) is not None
