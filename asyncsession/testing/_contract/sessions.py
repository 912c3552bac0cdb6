"""The contract kit: sessions.

Save, find by id and by user, save-if-absent and delete.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ...events import Session
from ...filters import EventFilter
from ._support import (
    ContractBase,
    new_id,
    user,
)

__all__ = ["SessionsContract"]


class SessionsContract(ContractBase):
    """Contract tests for sessions: saving, finding, save-if-absent and deleting."""

    async def test_save_and_find_by_id_round_trip(self) -> None:
        """A saved session is found by id with all its fields."""
        session = Session(
            id=new_id(),
            user_id="alice",
            created_at=datetime(2026, 1, 1, 12, 0, 0, 123000, tzinfo=UTC),
            expires_at=datetime(2026, 3, 1, tzinfo=UTC),
            metadata={"model": "gpt", "tags": ["a", "b"], "n": 3, "nested": {"x": None}},
        )
        await self.repo.save(session)
        assert await self.repo.find_by_id(session.id) == session

    async def test_find_by_id_returns_none_for_an_unknown_session(self) -> None:
        """An unknown id finds nothing."""
        assert await self.repo.find_by_id(new_id()) is None

    async def test_find_by_user_id_returns_only_that_users_sessions(self) -> None:
        """Sessions are found by their owner only."""
        alice, bob = new_id("alice"), new_id("bob")
        a1 = await self.new_session(alice)
        a2 = await self.new_session(alice)
        b1 = await self.new_session(bob)
        assert {s.id for s in await self.repo.find_by_user_id(alice)} == {a1.id, a2.id}
        assert [s.id for s in await self.repo.find_by_user_id(bob)] == [b1.id]

    async def test_save_if_absent_never_overwrites_an_existing_session(self) -> None:
        """A second insert of the same id fails and leaves the first session as it was."""
        session_id = new_id()
        assert await self.repo.save_if_absent(Session(id=session_id, user_id="first"))
        assert not await self.repo.save_if_absent(Session(id=session_id, user_id="second"))
        stored = await self.repo.find_by_id(session_id)
        assert stored is not None
        assert stored.user_id == "first"

    async def test_save_of_an_existing_session_keeps_created_at_events_and_version(self) -> None:
        """An update replaces owner, expiry and metadata; keeps creation time, log, version."""
        created = datetime(2026, 1, 1, tzinfo=UTC)
        session = Session(id=new_id(), user_id="alice", created_at=created)
        await self.repo.save(session)
        await self.append(session.id, "kept")
        expires = datetime(2027, 1, 1, tzinfo=UTC)
        updated = Session(
            id=session.id,
            user_id="bob",
            created_at=created + timedelta(days=5),
            expires_at=expires,
            metadata={"key": "value"},
        )
        returned = await self.repo.save(updated)
        stored = await self.repo.find_by_id(session.id)
        for s in (returned, stored):
            assert s is not None
            assert s.created_at == created
            assert (s.user_id, s.expires_at, s.metadata) == ("bob", expires, {"key": "value"})
        assert await self.texts(session.id, EventFilter.all()) == ["kept"]
        assert await self.repo.get_event_version(session.id) == 1

    async def test_delete_removes_the_session_and_its_events(self) -> None:
        """After delete, neither the session nor its events are found; deleting again is fine."""
        session = await self.new_session()
        await self.append(session.id, "a", "b")
        await self.repo.delete(session.id)
        assert await self.repo.find_by_id(session.id) is None
        assert await self.repo.find_events(session.id, EventFilter.all()) == []
        assert await self.repo.get_event_version(session.id) == 0
        await self.repo.delete(session.id)

    async def test_a_deleted_sessions_event_ids_can_be_used_again(self) -> None:
        """Deleting a session frees its event ids."""
        first = await self.new_session()
        e = user(first.id, "hello")
        await self.repo.append_event(e)
        await self.repo.delete(first.id)
        second = await self.new_session()
        await self.repo.append_event(e.model_copy(update={"session_id": second.id}))
        assert await self.texts(second.id, EventFilter.all()) == ["hello"]
