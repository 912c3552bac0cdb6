"""What background compaction depends on, and what it offers, as two small protocols.

- [`Compactor`][asyncsession.compaction.compactor.Compactor] is the one call a worker makes:
  ``compact(session_id, trigger, strategy)``. ``SessionService`` has it, so a worker is built
  from a service, but the compaction layer never imports the service layer above it.
- [`CompactionQueue`][asyncsession.compaction.compactor.CompactionQueue] is what an application
  hands finished turns to: ``submit(session_id)`` (a plain or an ``async`` method), the
  ``trigger`` the turn advisor may ask first to skip a pointless submit, and an async context
  manager lifecycle. The in-process
  [`CompactionWorker`][asyncsession.compaction.CompactionWorker], the durable
  [`MongoCompactionQueue`][asyncsession.compaction.MongoCompactionQueue] (what web processes
  enqueue with) and [`MongoCompactionWorker`][asyncsession.compaction.MongoCompactionWorker]
  (what worker processes run) all have this shape, so the advisors take any of them.
"""

from __future__ import annotations

from types import TracebackType
from typing import Protocol, Self, runtime_checkable

from ..compaction_protocols import CompactionResult, TriggerLike
from .strategies import CompactionStrategy

__all__ = ["CompactionQueue", "Compactor"]


@runtime_checkable
class Compactor(Protocol):
    """Compacts one session once, if its trigger fires (``SessionService.compact``)."""

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact ``session_id`` if ``trigger`` fires, with ``strategy``.

        Raises:
            SessionNotFound: the session does not exist.
        """
        ...


@runtime_checkable
class CompactionQueue(Protocol):
    """Where finished turns go to be compacted in the background."""

    @property
    def trigger(self) -> TriggerLike | None:
        """The trigger a caller may ask first to skip a pointless submit; ``None`` if unknown."""
        ...

    def submit(self, session_id: str) -> object:
        """Ask for a compaction of ``session_id``; may return an awaitable, returns quickly."""
        ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...
