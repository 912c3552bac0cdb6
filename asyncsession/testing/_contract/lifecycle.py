"""The contract kit: lifecycle.

Every store shares one lifecycle: ``aclose()`` ends it and is idempotent, ``async with`` hands
the store back and closes it on exit, and a call after closing raises `UsageError` at once.
These tests close the store the ``repository`` fixture gives them, so the fixture must hand
out a fresh store per test (its teardown may close it again: closing is idempotent).
"""

from __future__ import annotations

from typing import Any, cast

import pytest

from ...exceptions import UsageError
from ...filters import EventFilter
from ._support import ContractBase, user

__all__ = ["LifecycleContract"]


class LifecycleContract(ContractBase):
    """Contract tests for `aclose` and ``async with``."""

    async def test_aclose_is_idempotent_and_a_call_after_it_is_a_usage_error(self) -> None:
        """Closing twice is fine; reads and writes after closing raise UsageError."""
        session = await self.new_session()
        store = cast(Any, self.repo)
        await store.aclose()
        await store.aclose()
        with pytest.raises(UsageError, match="closed"):
            await self.repo.find_by_id(session.id)
        with pytest.raises(UsageError, match="closed"):
            await self.repo.append_event(user(session.id, "late"))
        with pytest.raises(UsageError, match="closed"):
            await self.repo.find_events(session.id, EventFilter.all())
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
