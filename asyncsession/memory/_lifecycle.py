"""The lifecycle both memory stores share: ``aclose``, ``async with``, use after close."""

from __future__ import annotations

from typing import ClassVar

from .._lifecycle import Closable
from .store import normalize_memory_path

__all__ = ["StoreLifecycle"]


class StoreLifecycle(Closable):
    """One lifecycle for every store.

    `aclose` (idempotent) ends the store, ``async with`` closes it on exit, and a call after
    closing raises `UsageError`. Closing lets go of nothing borrowed: a MongoDB store's
    database and a directory store's files stay as they are.
    """

    _keep_using: ClassVar[str] = "the store"

    async def aclose(self) -> None:
        """Stop using the store; closing again does nothing."""
        await super().aclose()

    def _open_path(self, path: str) -> str:
        """``path`` normalised, once the store is known to be open."""
        self._check_open()
        return normalize_memory_path(path)
