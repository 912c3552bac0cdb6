"""The contract kit: snapshots, the turn's one read.

The session, its version, the events a filter selects and the newest commit's lease, together.
"""

from __future__ import annotations

from ...filters import EventFilter
from ._support import ContractBase, labels, new_id, user

__all__ = ["SnapshotsContract"]


class SnapshotsContract(ContractBase):
    """Contract tests for ``read_snapshot``."""

    async def test_a_snapshot_reads_the_session_its_version_and_events(self) -> None:
        """``read_snapshot`` returns session, version and window; ``None`` if unknown."""
        session = await self.new_session()
        await self.append(session.id, "a", "b", "c")
        snapshot = await self.repo.read_snapshot(session.id, EventFilter.last_n(2))
        assert snapshot is not None
        assert snapshot.session == session
        assert snapshot.version == 3
        assert labels(snapshot.events) == ["b", "c"]
        assert snapshot.lease is None
        assert await self.repo.read_snapshot(new_id(), EventFilter.all()) is None

    async def test_a_snapshot_of_a_new_session_has_version_zero_and_no_events(self) -> None:
        """A session without commits reads back empty at version 0."""
        session = await self.new_session()
        snapshot = await self.repo.read_snapshot(session.id, EventFilter.active())
        assert snapshot is not None
        assert (snapshot.session, snapshot.version, snapshot.events) == (session, 0, ())

    async def test_the_snapshot_version_guards_the_next_append(self) -> None:
        """An append at the snapshot's version wins until someone else appends; then it is
        refused and a fresh snapshot sees the other writer's events."""
        s = (await self.new_session()).id
        await self.append(s, "a")
        first = await self.repo.read_snapshot(s, EventFilter.last_n(10))
        assert first is not None
        assert await self.repo.append_events(s, [user(s, "b")], first.version)
        assert not await self.repo.append_events(s, [user(s, "late")], first.version)
        second = await self.repo.read_snapshot(s, EventFilter.last_n(10))
        assert second is not None
        assert second.version == first.version + 1
        assert labels(second.events) == ["a", "b"]
