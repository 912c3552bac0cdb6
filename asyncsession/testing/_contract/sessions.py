"""The contract kit: sessions and the store's lifecycle.

Save, find by id, by user and by indexed metadata, save-if-absent, delete, the expiry sweep,
and closing the store (``aclose()`` is idempotent, ``async with`` closes it, a call after closing
raises `UsageError`). The lifecycle tests close the store the ``repository`` fixture gives
them, so the fixture hands out a fresh store per test.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest

from ...events import Session, SessionAttributes, utc_now
from ...exceptions import UsageError
from ._support import ContractBase, new_id, user

__all__ = ["ExpiryContract", "LifecycleContract", "MetadataContract", "SessionsContract"]


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
        assert await self.texts(session.id) == ["kept"]
        assert await self.repo.get_event_version(session.id) == 1

    async def test_delete_removes_the_session_and_its_events(self) -> None:
        """After delete, neither the session nor its events are found; deleting again is fine."""
        session = await self.new_session()
        await self.append(session.id, "a", "b")
        await self.repo.delete(session.id)
        assert await self.repo.find_by_id(session.id) is None
        assert await self.log(session.id) == []
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
        assert await self.texts(second.id) == ["hello"]


_AGENT = SessionAttributes.AGENT_NAME
_T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


class MetadataContract(ContractBase):
    """Contract tests for ``find_by_metadata``."""

    async def test_find_by_metadata_returns_the_matching_sessions_oldest_first(self) -> None:
        """Only sessions holding the value under the key are found, by creation time then id."""
        agent, other = new_id("agent"), new_id("agent")
        late = await self.new_session(created_at=_T0 + timedelta(hours=2), metadata={_AGENT: agent})
        early = await self.new_session(created_at=_T0, metadata={_AGENT: agent})
        ties = sorted(
            [
                await self.new_session(
                    created_at=_T0 + timedelta(hours=1), metadata={_AGENT: agent}
                )
                for _ in range(3)
            ],
            key=lambda s: s.id,
        )
        await self.new_session(metadata={_AGENT: other})
        await self.new_session(metadata={SessionAttributes.AGENT_MODEL: agent})
        found = await self.repo.find_by_metadata(_AGENT, agent)
        assert [s.id for s in found] == [early.id, *(s.id for s in ties), late.id]
        assert found[0] == early
        assert [s.id for s in await self.repo.find_by_metadata(_AGENT, other)] != []
        assert await self.repo.find_by_metadata(_AGENT, new_id("nobody")) == []

    async def test_find_by_metadata_is_bounded_by_its_limit(self) -> None:
        """``limit`` keeps the oldest sessions; a limit below 1 is refused."""
        agent = new_id("agent")
        made = [
            await self.new_session(created_at=_T0 + timedelta(minutes=i), metadata={_AGENT: agent})
            for i in range(5)
        ]
        found = await self.repo.find_by_metadata(_AGENT, agent, limit=2)
        assert [s.id for s in found] == [made[0].id, made[1].id]
        assert len(await self.repo.find_by_metadata(_AGENT, agent, limit=50)) == 5
        with pytest.raises(UsageError):
            await self.repo.find_by_metadata(_AGENT, agent, limit=0)

    async def test_find_by_metadata_refuses_a_key_the_store_does_not_index(self) -> None:
        """An undeclared key is a usage error, even if sessions hold it."""
        key = new_id("undeclared")
        await self.new_session(metadata={key: "x"})
        with pytest.raises(UsageError, match="not indexed"):
            await self.repo.find_by_metadata(key, "x")

    async def test_find_by_metadata_matches_strings_only(self) -> None:
        """A number, list or object under an indexed key is not a string value."""
        value = new_id("v")
        await self.new_session(metadata={_AGENT: [value]})
        await self.new_session(metadata={_AGENT: {"name": value}})
        await self.new_session(metadata={SessionAttributes.AGENT_VERSION: 3})
        assert await self.repo.find_by_metadata(_AGENT, value) == []
        assert await self.repo.find_by_metadata(SessionAttributes.AGENT_VERSION, "3") == []

    async def test_a_save_moves_a_session_between_values(self) -> None:
        """An update's metadata replaces what the lookup sees; a deleted session is gone."""
        before, after = new_id("agent"), new_id("agent")
        session = await self.new_session(metadata={_AGENT: before})
        await self.repo.save(session.model_copy(update={"metadata": {_AGENT: after}}))
        assert await self.repo.find_by_metadata(_AGENT, before) == []
        assert [s.id for s in await self.repo.find_by_metadata(_AGENT, after)] == [session.id]
        await self.repo.save(session.model_copy(update={"metadata": {}}))
        assert await self.repo.find_by_metadata(_AGENT, after) == []
        await self.repo.save(session)
        await self.repo.delete(session.id)
        assert await self.repo.find_by_metadata(_AGENT, before) == []

    async def test_save_if_absent_indexes_the_new_session(self) -> None:
        """A session inserted by ``save_if_absent`` is found; a refused insert changes nothing."""
        agent = new_id("agent")
        session = Session(id=new_id(), user_id="alice", metadata={_AGENT: agent})
        assert await self.repo.save_if_absent(session)
        rival = session.model_copy(update={"metadata": {_AGENT: new_id("agent")}})
        assert not await self.repo.save_if_absent(rival)
        assert await self.repo.find_by_metadata(_AGENT, agent) == [session]

    async def test_the_principal_is_the_user_id(self) -> None:
        """A lookup by the principal finds the user's sessions, with or without the attribute,
        oldest first and bounded; a session naming another principal is refused."""
        owner = new_id("user")
        plain = await self.new_session(owner, created_at=_T0)
        named = await self.new_session(
            owner,
            created_at=_T0 + timedelta(seconds=1),
            metadata={SessionAttributes.PRINCIPAL_NAME: owner},
        )
        await self.new_session(new_id("user"))
        found = await self.repo.find_by_metadata(SessionAttributes.PRINCIPAL_NAME, owner)
        assert [s.id for s in found] == [plain.id, named.id]
        assert [s.id for s in await self.repo.find_by_user_id(owner)] == [plain.id, named.id]
        limited = await self.repo.find_by_metadata(SessionAttributes.PRINCIPAL_NAME, owner, limit=1)
        assert [s.id for s in limited] == [plain.id]
        impostor = Session(
            id=new_id(), user_id=owner, metadata={SessionAttributes.PRINCIPAL_NAME: "mallory"}
        )
        with pytest.raises(UsageError, match="principal_name"):
            await self.repo.save(impostor)
        with pytest.raises(UsageError, match="principal_name"):
            await self.repo.save_if_absent(impostor)
        assert await self.repo.find_by_id(impostor.id) is None


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
        assert await self.log(expired.id) == []
        for kept in (extended, default, never, exactly):
            assert await self.repo.find_by_id(kept.id) is not None
        assert await self.texts(extended.id) == ["new"]

    async def test_a_ttl_extended_before_the_sweep_wins(self) -> None:
        """A session whose expiry was moved past the sweep's instant is kept."""
        now = utc_now()
        session = await self.new_session(expires_at=now - timedelta(seconds=1))
        await self.repo.save(session.model_copy(update={"expires_at": now + timedelta(hours=1)}))
        await self.repo.delete_expired_sessions(now)
        assert await self.repo.find_by_id(session.id) is not None


class LifecycleContract(ContractBase):
    """Contract tests for `aclose` and ``async with``."""

    async def test_aclose_is_idempotent_and_a_call_after_it_is_a_usage_error(self) -> None:
        """Closing twice is fine; reads and writes after closing raise UsageError."""
        s = (await self.new_session()).id
        store = cast(Any, self.repo)
        await store.aclose()
        await store.aclose()
        with pytest.raises(UsageError, match="closed"):
            await self.repo.find_by_id(s)
        with pytest.raises(UsageError, match="closed"):
            await self.repo.append_event(user(s, "late"))
        with pytest.raises(UsageError, match="closed"):
            await self.log(s)
        with pytest.raises(UsageError, match="closed"):
            await self.new_session()

    async def test_async_with_hands_back_the_store_and_closes_it(self) -> None:
        """Inside the block the store works; after it, the store is closed."""
        store = cast(Any, self.repo)
        async with store as entered:
            assert entered is self.repo
            session = await self.new_session()
            assert await self.repo.find_by_id(session.id) == session
        with pytest.raises(UsageError, match="closed"):
            await self.repo.find_by_id(session.id)
        with pytest.raises(UsageError, match="closed"):
            async with store:
                pass  # pragma: no cover - entering a closed store raises
