"""The contract kit: turns.

Snapshots, and `start_turn` through a store's own or the fallback over the protocol.
"""

from __future__ import annotations

import pytest

from ...events import Session
from ...exceptions import AccessDenied, EventIdConflict, SessionNotFound
from ...filters import EventFilter
from ...repository import SessionRepository, start_turn
from ._support import (
    ContractBase,
    labels,
    new_id,
    user,
)

__all__ = ["TurnsContract"]


class TurnsContract(ContractBase):
    """Contract tests for snapshots and starting a turn.

    Turns go through `asyncsession.repository.start_turn`: a store's own `start_turn` if it has
    one (`TurnRepository`), else the fallback over the protocol. Either must behave the same.
    """

    async def test_a_snapshot_reads_the_session_its_version_and_events(
        self, repository: SessionRepository
    ) -> None:
        """``read_snapshot`` returns session, version and window; ``None`` if unknown."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "a", "b", "c")
        snapshot = await repository.read_snapshot(session.id, EventFilter.last_n(2))
        assert snapshot is not None
        assert snapshot.session == session
        assert snapshot.version == 3
        assert labels(snapshot.events) == ["b", "c"]
        assert await repository.read_snapshot(new_id(), EventFilter.all()) is None

    async def test_a_turn_stores_its_events_and_returns_the_window_before_them(
        self, repository: SessionRepository
    ) -> None:
        """The window excludes the turn's events; the version is the one after the append; a
        replay appends nothing and returns the same window."""
        session = await self.new_session(repository)
        s = session.id
        await self.append(repository, s, "a", "b")
        question = user(s, "q")
        snapshot = await start_turn(repository, s, [question], EventFilter.last_n(5))
        assert snapshot.session == session
        assert labels(snapshot.events) == ["a", "b"]
        assert snapshot.version == 3
        again = await start_turn(repository, s, [question], EventFilter.last_n(5))
        assert labels(again.events) == ["a", "b"]
        assert again.version == 3
        assert await self.texts(repository, s, EventFilter.all()) == ["a", "b", "q"]

    async def test_a_turn_creates_a_missing_session_with_its_events(
        self, repository: SessionRepository
    ) -> None:
        """With ``create``, a missing session is made holding the turn's events (empty window,
        version 1); an existing one is used as it is."""
        new = Session(id=new_id(), user_id="alice", metadata={"topic": "x"})
        first = user(new.id, "first")
        snapshot = await start_turn(repository, new.id, [first], EventFilter.all(), create=new)
        assert snapshot.session == new
        assert snapshot.events == ()
        assert snapshot.version == 1
        assert await repository.find_by_id(new.id) == new
        other = Session(id=new.id, user_id="alice", metadata={"topic": "other"})
        snapshot = await start_turn(
            repository, new.id, [user(new.id, "second")], EventFilter.all(), create=other
        )
        assert snapshot.session == new
        assert labels(snapshot.events) == ["first"]
        assert await self.texts(repository, new.id, EventFilter.all()) == ["first", "second"]

    async def test_a_refused_turn_writes_nothing(self, repository: SessionRepository) -> None:
        """Another owner, an unknown session without ``create``, or an id of another session:
        an error, and nothing stored (no session created either)."""
        session = await self.new_session(repository, user_id="alice")
        s = session.id
        with pytest.raises(AccessDenied):
            await start_turn(repository, s, [user(s, "x")], EventFilter.all(), user_id="bob")
        missing = new_id()
        with pytest.raises(SessionNotFound):
            await start_turn(repository, missing, [user(missing, "x")], EventFilter.all())
        taken = user(s, "taken")
        await repository.append_event(taken)
        new = Session(id=new_id(), user_id="alice")
        stolen = taken.model_copy(update={"session_id": new.id})
        with pytest.raises(EventIdConflict):
            await start_turn(repository, new.id, [stolen], EventFilter.all(), create=new)
        assert await self.texts(repository, s, EventFilter.all()) == ["taken"]
        assert await repository.find_by_id(missing) is None
        assert await repository.find_by_id(new.id) is None
