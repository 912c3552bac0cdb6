"""The contract kit: sessions found by indexed metadata.

Lookups by the well-known attributes, which every store indexes: oldest first, bounded,
string values only, kept current by every save; a key the store does not index is refused; the
principal is the ``user_id``.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ...events import AGENT_MODEL, AGENT_NAME, AGENT_VERSION, PRINCIPAL_NAME, Session
from ...exceptions import UsageError
from ...repository import SessionRepository
from ._support import ContractBase, new_id

__all__ = ["MetadataContract"]

_AGENT = AGENT_NAME
_T0 = datetime(2026, 5, 1, 9, 0, tzinfo=UTC)


class MetadataContract(ContractBase):
    """Contract tests for ``find_by_metadata``."""

    async def test_find_by_metadata_returns_the_matching_sessions_oldest_first(
        self, repository: SessionRepository
    ) -> None:
        """Only sessions holding the value under the key are found, by creation time then id."""
        agent, other = new_id("agent"), new_id("agent")
        late = await self.new_session(
            repository, created_at=_T0 + timedelta(hours=2), metadata={_AGENT: agent}
        )
        early = await self.new_session(repository, created_at=_T0, metadata={_AGENT: agent})
        ties = sorted(
            [
                await self.new_session(
                    repository, created_at=_T0 + timedelta(hours=1), metadata={_AGENT: agent}
                )
                for _ in range(3)
            ],
            key=lambda s: s.id,
        )
        await self.new_session(repository, metadata={_AGENT: other})
        await self.new_session(repository, metadata={AGENT_MODEL: agent})
        found = await repository.find_by_metadata(_AGENT, agent)
        assert [s.id for s in found] == [early.id, *(s.id for s in ties), late.id]
        assert found[0] == early
        assert [s.id for s in await repository.find_by_metadata(_AGENT, other)] != []
        assert await repository.find_by_metadata(_AGENT, new_id("nobody")) == []

    async def test_find_by_metadata_is_bounded_by_its_limit(
        self, repository: SessionRepository
    ) -> None:
        """``limit`` keeps the oldest sessions; a limit below 1 is refused."""
        agent = new_id("agent")
        made = [
            await self.new_session(
                repository, created_at=_T0 + timedelta(minutes=i), metadata={_AGENT: agent}
            )
            for i in range(5)
        ]
        found = await repository.find_by_metadata(_AGENT, agent, limit=2)
        assert [s.id for s in found] == [made[0].id, made[1].id]
        assert len(await repository.find_by_metadata(_AGENT, agent, limit=50)) == 5
        with pytest.raises(UsageError):
            await repository.find_by_metadata(_AGENT, agent, limit=0)

    async def test_find_by_metadata_refuses_a_key_the_store_does_not_index(
        self, repository: SessionRepository
    ) -> None:
        """An undeclared key is a usage error, even if sessions hold it."""
        key = new_id("undeclared")
        await self.new_session(repository, metadata={key: "x"})
        with pytest.raises(UsageError, match="not indexed"):
            await repository.find_by_metadata(key, "x")

    async def test_find_by_metadata_matches_strings_only(
        self, repository: SessionRepository
    ) -> None:
        """A number, list or object under an indexed key is not a string value."""
        value = new_id("v")
        await self.new_session(repository, metadata={_AGENT: [value]})
        await self.new_session(repository, metadata={_AGENT: {"name": value}})
        await self.new_session(repository, metadata={AGENT_VERSION: 3})
        assert await repository.find_by_metadata(_AGENT, value) == []
        assert await repository.find_by_metadata(AGENT_VERSION, "3") == []

    async def test_a_save_moves_a_session_between_values(
        self, repository: SessionRepository
    ) -> None:
        """An update's metadata replaces what the lookup sees; a deleted session is gone."""
        before, after = new_id("agent"), new_id("agent")
        session = await self.new_session(repository, metadata={_AGENT: before})
        await repository.save(session.model_copy(update={"metadata": {_AGENT: after}}))
        assert await repository.find_by_metadata(_AGENT, before) == []
        assert [s.id for s in await repository.find_by_metadata(_AGENT, after)] == [session.id]
        await repository.save(session.model_copy(update={"metadata": {}}))
        assert await repository.find_by_metadata(_AGENT, after) == []
        await repository.save(session)
        await repository.delete(session.id)
        assert await repository.find_by_metadata(_AGENT, before) == []

    async def test_save_if_absent_indexes_the_new_session(
        self, repository: SessionRepository
    ) -> None:
        """A session inserted by ``save_if_absent`` is found; a refused insert changes nothing."""
        agent = new_id("agent")
        session = Session(id=new_id(), user_id="alice", metadata={_AGENT: agent})
        assert await repository.save_if_absent(session)
        rival = session.model_copy(update={"metadata": {_AGENT: new_id("agent")}})
        assert not await repository.save_if_absent(rival)
        assert await repository.find_by_metadata(_AGENT, agent) == [session]

    async def test_the_principal_is_the_user_id(self, repository: SessionRepository) -> None:
        """A lookup by the principal finds the user's sessions, with or without the attribute,
        oldest first and bounded; a session naming another principal is refused."""
        owner = new_id("user")
        plain = await self.new_session(repository, owner, created_at=_T0)
        named = await self.new_session(
            repository,
            owner,
            created_at=_T0 + timedelta(seconds=1),
            metadata={PRINCIPAL_NAME: owner},
        )
        await self.new_session(repository, new_id("user"))
        found = await repository.find_by_metadata(PRINCIPAL_NAME, owner)
        assert [s.id for s in found] == [plain.id, named.id]
        assert [s.id for s in await repository.find_by_user_id(owner)] == [plain.id, named.id]
        limited = await repository.find_by_metadata(PRINCIPAL_NAME, owner, limit=1)
        assert [s.id for s in limited] == [plain.id]
        impostor = Session(id=new_id(), user_id=owner, metadata={PRINCIPAL_NAME: "mallory"})
        with pytest.raises(UsageError, match="principal_name"):
            await repository.save(impostor)
        with pytest.raises(UsageError, match="principal_name"):
            await repository.save_if_absent(impostor)
        assert await repository.find_by_id(impostor.id) is None
