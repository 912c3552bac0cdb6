"""The in-memory repository passes the whole contract kit."""

from __future__ import annotations

import pytest

from asyncsession import InMemorySessionRepository
from asyncsession.encryption import EncryptionOptions
from asyncsession.events import Session
from asyncsession.filters import EventFilter
from asyncsession.testing._contract._support import user
from asyncsession.testing.contract import SessionRepositoryContract


class TestInMemoryContract(SessionRepositoryContract):
    """The contract, on the embedded default store."""

    @pytest.fixture
    def repository(self) -> InMemorySessionRepository:
        return InMemorySessionRepository()


async def test_a_last_n_read_does_not_scan_the_whole_log() -> None:
    """A ``last_n`` read checks a number of events that follows the window, not the log."""
    repo = InMemorySessionRepository()
    session = await repo.save(Session(id="s-1", user_id="alice"))
    await repo.append_events(session.id, [user(session.id, f"m{i}") for i in range(5000)])

    checked = 0

    class Counting(EventFilter):
        __slots__ = ()

        def matches(self, event):  # type: ignore[no-untyped-def]
            nonlocal checked
            checked += 1
            return super().matches(event)

    window = await repo.find_events(session.id, Counting(last_n=20))
    assert len(window) == 20
    assert checked <= 21


class TestInMemoryEncryptedContract(SessionRepositoryContract):
    """The contract, on the embedded store with its content encrypted (a local master key)."""

    @pytest.fixture
    def repository(self) -> InMemorySessionRepository:
        setting = EncryptionOptions.local(EncryptionOptions.generate_local_key())
        return InMemorySessionRepository(encryption=setting)
