"""The lifecycle both memory stores share: ``aclose``, ``async with``, use after close."""

from __future__ import annotations

from types import TracebackType
from typing import Self

from ..exceptions import UsageError
from .store import normalize_memory_path

__all__ = ["StoreLifecycle"]


class StoreLifecycle:
    """One lifecycle for every store.

    `aclose` (idempotent) ends the store, ``async with`` closes it on exit, and a call after
    closing raises `UsageError`. Closing lets go of nothing borrowed: a MongoDB store's
    database and a directory store's files stay as they are.
    """

    _closed: bool = False

    async def aclose(self) -> None:
        """Stop using the store; closing again does nothing."""
        self._closed = True

    async def __aenter__(self) -> Self:
        self._check_open()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(
                f"This {type(self).__name__} is closed; create a new one to keep using the store"
            )

    def _open_path(self, path: str) -> str:
        """``path`` normalised, once the store is known to be open."""
        self._check_open()
        return normalize_memory_path(path)
