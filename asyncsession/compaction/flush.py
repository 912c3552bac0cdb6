"""Memory flush before compaction: the model may save durable facts before turns leave the window.

A `MemoryFlush` is given the events a compaction is about to archive. The model-backed
one, ``asyncsession.openai.ModelMemoryFlush``, shows them to a model together with the memory
tools of the session owner's scope, so the model can write what is worth keeping to long-term
memory first. Use it with any strategy through `MemoryFlushingCompactionStrategy`, or
through the ``memory_flush`` option of
`RecursiveSummarizationCompactionStrategy`.

A flush never blocks a compaction: `run_memory_flush` bounds it in time, and whatever it
raises (cancellation aside) is logged and the compaction goes on. A compare-and-swap lost by
the compaction afterwards means the next compaction flushes the same turns again, so the
memory tools should be safe to repeat (the six memory tools edit files, which they are).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from .._checks import require_many, require_type
from ..compaction_protocols import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    check_strategy,
)
from ..events import SessionEvent

__all__ = ["MemoryFlush", "MemoryFlushingCompactionStrategy", "run_memory_flush"]

logger: logging.Logger = logging.getLogger("asyncsession.compaction")


@runtime_checkable
class MemoryFlush(Protocol):
    """Saves what matters in events that are about to be archived."""

    async def flush(self, request: CompactionRequest, events: Sequence[SessionEvent]) -> None:
        """Look at ``events`` (about to leave ``request``'s window) and save durable facts."""
        ...


def _check_flush(flush: MemoryFlush) -> None:
    require_type(
        flush,
        MemoryFlush,
        "flush",
        "a MemoryFlush (with an async flush(request, events))",
        hint=" (for a model that saves to memory: ModelMemoryFlush(client, store))",
    )


async def run_memory_flush(
    flush: MemoryFlush | None,
    request: CompactionRequest,
    events: Sequence[SessionEvent],
    *,
    seconds: float | None = None,
) -> bool:
    """Run ``flush`` over the real message events among ``events``; ``True`` if it succeeded.

    Nothing runs when there is no flush or no such event. A flush that raises or overruns
    ``seconds`` is logged and reported as ``False``; only cancellation propagates.

    Raises:
        UsageError: an argument is not of its type.
    """
    if flush is not None:
        _check_flush(flush)
    require_type(request, CompactionRequest, "request", "a CompactionRequest")
    require_many(events, "events", "a list of events")
    real = [e for e in events if e.is_message and not e.is_synthetic]
    if flush is None or not real:
        return False
    try:
        async with asyncio.timeout(seconds):
            await flush.flush(request, real)
    except asyncio.CancelledError:
        raise
    except Exception:  # a failed flush never blocks the compaction
        logger.warning(
            "Memory flush of session %r failed; compacting anyway",
            request.session.id,
            exc_info=True,
        )
        return False
    return True


class MemoryFlushingCompactionStrategy:
    """Any strategy, with a memory flush of the events it archives before they are archived.

    The inner strategy decides; when its result archives real messages, ``flush`` sees them
    first (bounded by ``timeout`` seconds), then the result is returned unchanged and applied.

    Args:
        strategy: the strategy that decides what to archive.
        flush: what saves durable facts, e.g. ``asyncsession.openai.ModelMemoryFlush``.
        timeout: seconds the flush may take; ``None`` leaves the bound to the flush itself.

    Raises:
        UsageError: ``strategy`` or ``flush`` is not one.
    """

    __slots__ = ("flush", "strategy", "timeout")

    def __init__(
        self, strategy: CompactionStrategy, flush: MemoryFlush, *, timeout: float | None = 60.0
    ) -> None:
        check_strategy(strategy, "strategy")
        _check_flush(flush)
        self.strategy: CompactionStrategy = strategy
        self.flush: MemoryFlush = flush
        self.timeout: float | None = timeout

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """The inner strategy's result, after the flush of what it archives."""
        result = await self.strategy.compact(request)
        await run_memory_flush(self.flush, request, result.archived_events, seconds=self.timeout)
        return result

    def __repr__(self) -> str:
        return f"MemoryFlushingCompactionStrategy({self.strategy!r}, {self.flush!r})"
