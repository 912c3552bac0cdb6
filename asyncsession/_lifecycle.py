"""The lifecycle the package's closable objects share, and the event loop a call runs on.

`Closable` is used until it is closed: `Closable.aclose` ends it once (closing again does
nothing), ``async with`` closes it on exit, and a call after closing raises `UsageError` with
`closed_error`'s message. `running_loop` and `bound_to_its_loop` answer the two event-loop
questions callers of sync or loop-bound objects meet: is a loop running in this thread, and did
a loop-bound client (PyMongo's ``AsyncMongoClient``) refuse this loop.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Generator
from types import TracebackType
from typing import ClassVar, Self

from .exceptions import UsageError

__all__ = ["Closable", "bound_to_its_loop", "closed_error", "running_loop"]


def closed_error(name: str, what: str = "it") -> UsageError:
    """The refusal of a call on a closed ``name`` (a class name); ``what``: what to keep using."""
    return UsageError(f"This {name} is closed; create a new one to keep using {what}")


class Closable:
    """An object used until it is closed.

    `aclose` ends it; only the first call runs `_release`, which lets go of what the object
    owns (nothing by default). ``async with`` hands the object back, refusing a closed one, and
    closes it on exit. `_check_open` raises `UsageError` once it is closed, naming
    `_keep_using` (override `_closed_error` for another message).
    """

    _closed: bool = False
    _keep_using: ClassVar[str] = "it"
    """What the refusal says to create a new object to keep using (``"the store"``)."""

    def _closed_error(self) -> UsageError:
        """The refusal of a call once the object is closed."""
        return closed_error(type(self).__name__, self._keep_using)

    def _check_open(self) -> None:
        """Raise `UsageError` if the object is closed."""
        if self._closed:
            raise self._closed_error()

    async def _release(self) -> None:
        """Let go of what the object owns; runs once, on the first `aclose`."""

    async def aclose(self) -> None:
        """Stop using the object; closing again does nothing."""
        if self._closed:
            return
        self._closed = True
        await self._release()

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


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or ``None`` when none is."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


@contextlib.contextmanager
def bound_to_its_loop(message: str) -> Generator[None]:
    """Turn a loop-bound client's refusal of this event loop into `UsageError` (``message``).

    PyMongo's ``AsyncMongoClient`` serves the loop that first used it and raises
    ``RuntimeError`` ("... different event loop ...") on any other; the `UsageError` is chained
    to it. Any other error passes through unchanged.
    """
    try:
        yield
    except RuntimeError as exc:
        if "different event loop" not in str(exc):
            raise
        raise UsageError(message) from exc
