"""The lifecycle the package's closable objects share, and the event loop a call runs on.

`Closable` is used until it is closed: `Closable.aclose` ends it once (closing again does
nothing), ``async with`` closes it on exit, and a call after closing raises `UsageError` with
`closed_error`'s message. `running_loop` answers the event-loop question sync callers meet:
is a loop running in this thread; `declared_loop` what a store says about the loop it belongs to.
"""

from __future__ import annotations

import asyncio
from types import TracebackType
from typing import ClassVar, Self

from .exceptions import UsageError

__all__ = ["Closable", "ForwardsLoop", "closed_error", "declared_loop", "running_loop"]


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


def declared_loop(store: object) -> tuple[bool, asyncio.AbstractEventLoop | None]:
    """What ``store`` (a repository or a service, or anything wrapping one) declares about its
    event loop: ``(loop_bound, event_loop)``; one that declares nothing serves any loop."""
    bound = getattr(store, "loop_bound", False) is True
    loop: object = getattr(store, "event_loop", None) if bound else None
    return bound, loop if isinstance(loop, asyncio.AbstractEventLoop) else None


class ForwardsLoop:
    """For an object over a ``repository`` attribute (a service, a wrapper): its
    ``loop_bound`` and ``event_loop`` are the repository's. List it before the base class."""

    @property
    def loop_bound(self) -> bool:
        """Whether the repository belongs to one event loop."""
        return declared_loop(getattr(self, "repository", None))[0]

    @property
    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the repository belongs to, once one has used it."""
        return declared_loop(getattr(self, "repository", None))[1]
