"""Shared helpers of the Pydantic AI history tests: the reference history and the factory type."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from pydantic_ai import ModelMessage, ModelMessagesTypeAdapter

__all__ = ["History", "HistoryFactory", "ListHistory", "SyncHistory", "SyncHistoryFactory"]


class History(Protocol):
    """What the tests need of a history: ``store`` new messages, ``load`` them back."""

    async def store(self, messages: Sequence[ModelMessage]) -> None: ...

    async def load(self) -> list[ModelMessage]: ...


class ListHistory:
    """Pydantic AI's own way: a plain in-process list, kept as ``ModelMessagesTypeAdapter``
    JSON (what its docs persist), read back with the same adapter. The reference."""

    def __init__(self) -> None:
        self._json = b"[]"

    async def store(self, messages: Sequence[ModelMessage]) -> None:
        stored = ModelMessagesTypeAdapter.validate_json(self._json)
        self._json = ModelMessagesTypeAdapter.dump_json([*stored, *messages])

    async def load(self) -> list[ModelMessage]:
        return self.load_sync()

    def store_sync(self, messages: Sequence[ModelMessage]) -> None:
        stored = ModelMessagesTypeAdapter.validate_json(self._json)
        self._json = ModelMessagesTypeAdapter.dump_json([*stored, *messages])

    def load_sync(self) -> list[ModelMessage]:
        return ModelMessagesTypeAdapter.validate_json(self._json)


class SyncHistory(Protocol):
    """What the sync tests need of a history: ``store_sync`` and ``load_sync``."""

    def store_sync(self, messages: Sequence[ModelMessage]) -> None: ...

    def load_sync(self) -> list[ModelMessage]: ...


SyncHistoryFactory = Callable[[str], SyncHistory]
"""Builds a history of one session id for sync callers (no event loop in the thread)."""

HistoryFactory = Callable[[str], History]
"""Builds a history of one session id on the store under test."""
