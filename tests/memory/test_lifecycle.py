"""Both memory stores share the lifecycle of every store: aclose, async with, use after close."""

from __future__ import annotations

import pytest

from asyncsession.exceptions import UsageError
from asyncsession.memory import DirectoryMemoryStore, MongoMemoryStore

Store = DirectoryMemoryStore | MongoMemoryStore


async def test_aclose_is_idempotent_and_a_call_after_it_is_a_usage_error(store: Store) -> None:
    """Closing twice is fine; every operation after closing raises UsageError at once."""
    await store.write("notes.md", "hello", expected_version=None)
    await store.aclose()
    await store.aclose()
    for call in (
        store.stat("notes.md"),
        store.read("notes.md"),
        store.list_dir(),
        store.write("other.md", "x", expected_version=None),
        store.delete("notes.md"),
        store.rename("notes.md", "moved.md"),
    ):
        with pytest.raises(UsageError, match="closed"):
            await call


async def test_async_with_hands_back_the_store_and_closes_it(store: Store) -> None:
    """Inside the block the store works; after it, the store is closed."""
    async with store as entered:
        assert entered is store
        await store.write("notes.md", "hello", expected_version=None)
        found = await store.read("notes.md")
        assert found is not None
        assert found.text == "hello"
    with pytest.raises(UsageError, match="closed"):
        await store.read("notes.md")
    with pytest.raises(UsageError, match="closed"):
        async with store:
            pass  # pragma: no cover - entering a closed store raises
