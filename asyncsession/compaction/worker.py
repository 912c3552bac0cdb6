"""``CompactionWorker``: compaction off the request path, in background tasks you own.

Summarization is a slow model call; an application should not make its user wait for it. Submit
the session id after a turn and let the worker compact it in the background::

    async with CompactionWorker(service, TurnCountTrigger(20), strategy) as worker:
        ...
        worker.submit(session_id)          # returns at once
        ...
    # leaving the block waits for submitted work (drain); on an error it cancels it

Design notes:

- **Bounded concurrency.** ``max_concurrency`` consumer tasks read session ids from one queue (an
  unbounded anyio memory stream, so `submit` never blocks); at most that
  many compactions run at once.
- **Coalescing.** A session is never queued twice: submitting a queued session returns the
  ticket it already has. Submitting a session while it is being compacted schedules exactly one
  more run after the current one (the new events deserve a look), however often it is submitted
  meanwhile. So one session never runs twice at once in one worker.
- **Safe shutdown.** `aclose` drains (runs everything submitted) or, with
  ``drain=False``, drops what is queued and cancels what runs. A cancelled compaction is
  interrupted before its write or not at all: the repository applies a plan with one atomic
  compare-and-swap, and that write runs to completion even when its task is cancelled.
- **Observable.** Every submit returns a
  [`CompactionTicket`][asyncsession.compaction.CompactionTicket] to await; ``on_outcome`` sees
  every finished compaction; failures are logged and never stop the worker.
- **Many workers are safe.** Workers in other processes (or several workers here) may compact
  the same session at once: each reads the session's version with the events and applies its
  plan only if the version is unchanged, so exactly one plan applies per version and the others
  are no-ops.
- **In process memory.** A crash or a deploy drops what is queued, and workers in different
  processes do not coalesce: for that, use the durable
  [`MongoCompactionQueue`][asyncsession.compaction.MongoCompactionQueue] with
  [`MongoCompactionWorker`][asyncsession.compaction.MongoCompactionWorker] processes, which
  share this worker's interface (``submit``, ``trigger``, the async context manager).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ..compaction_protocols import CompactionResult, TriggerLike
from ..exceptions import CompactionError, UsageError
from ._pipeline import check_worker_parts, positive_int
from ._worker_lifecycle import WorkerLifecycle, WorkerState, report_outcome
from .compactor import Compactor
from .strategies import CompactionStrategy

__all__ = ["CompactionOutcome", "CompactionTicket", "CompactionWorker"]

logger: logging.Logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOutcome:
    """How one compaction run ended: with a result, or with an error."""

    session_id: str
    """The session that was compacted."""
    result: CompactionResult | None = None
    """What ``SessionService.compact`` returned; ``None`` when it failed or was cancelled."""
    error: BaseException | None = None
    """Why it failed; a ``CompactionError`` when the worker dropped or cancelled it."""

    @property
    def ok(self) -> bool:
        """Whether the compaction ran to the end (whether or not it changed anything)."""
        return self.error is None


class CompactionTicket:
    """A handle on one requested compaction of a session; coalesced submits share one ticket."""

    __slots__ = ("_done", "_outcome", "session_id")

    def __init__(self, session_id: str) -> None:
        self.session_id: str = session_id
        """The session to compact."""
        self._done = asyncio.Event()
        self._outcome: CompactionOutcome | None = None

    def done(self) -> bool:
        """Whether the compaction has finished, failed, or was dropped."""
        return self._outcome is not None

    @property
    def outcome(self) -> CompactionOutcome | None:
        """How it ended; ``None`` while it is pending."""
        return self._outcome

    async def wait(self) -> CompactionOutcome:
        """Wait for the compaction to end, and return how it ended (never raises its error)."""
        await self._done.wait()
        assert self._outcome is not None
        return self._outcome

    async def result(self) -> CompactionResult:
        """Wait for the compaction to end, and return its result.

        Raises:
            CompactionError: the worker dropped or cancelled the compaction at shutdown.
            Exception: whatever ``SessionService.compact`` raised.
        """
        outcome = await self.wait()
        if outcome.error is not None:
            raise outcome.error
        assert outcome.result is not None
        return outcome.result

    def _resolve(self, outcome: CompactionOutcome) -> None:
        self._outcome = outcome
        self._done.set()

    def __repr__(self) -> str:
        state = "pending" if self._outcome is None else ("ok" if self._outcome.ok else "failed")
        return f"<CompactionTicket session_id={self.session_id!r} {state}>"


class CompactionWorker(WorkerLifecycle):
    """Compacts submitted sessions in background tasks, a bounded number at a time.

    Use it as an async context manager; it owns its tasks, and leaving the block waits for them.
    On a normal exit the queue is drained; when the block raises, queued work is dropped and
    running work cancelled. Call it from the event loop that runs it (it is not thread-safe).

    Args:
        service: what runs each compaction: a ``SessionService``, or anything with its
            ``compact(session_id, trigger, strategy)`` (a
            [`Compactor`][asyncsession.compaction.Compactor]).
        trigger: decides, per session, whether to compact (see ``SessionService.compact``).
        strategy: decides what to compact.
        max_concurrency: how many compactions may run at once.
        on_outcome: called with every finished run's
            [`CompactionOutcome`][asyncsession.compaction.CompactionOutcome] (also for dropped
            work); it must not block. Its exceptions are logged and ignored.

    Raises:
        UsageError: ``service``, ``trigger`` or ``strategy`` is not one, or ``max_concurrency``
            is not a positive int.
    """

    def __init__(
        self,
        service: Compactor,
        trigger: TriggerLike,
        strategy: CompactionStrategy,
        *,
        max_concurrency: int = 4,
        on_outcome: Callable[[CompactionOutcome], object] | None = None,
    ) -> None:
        check_worker_parts(service, trigger, strategy)
        positive_int(max_concurrency, "max_concurrency")
        super().__init__()
        self.service = service
        """What runs each compaction."""
        self.trigger = trigger
        """Decides, per session, whether to compact (the turn advisor asks it first)."""
        self.strategy = strategy
        """Decides what to compact."""
        self.max_concurrency = max_concurrency
        """How many compactions may run at once."""
        self.on_outcome = on_outcome
        """Called with every finished run's outcome."""
        self._cancelling = False
        self._queued: dict[str, CompactionTicket] = {}
        self._running: dict[str, CompactionTicket] = {}
        self._rerun: dict[str, CompactionTicket] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._consumers: list[asyncio.Task[None]] = []
        self._send: MemoryObjectSendStream[str] | None = None
        self._receive: MemoryObjectReceiveStream[str] | None = None

    # --- lifecycle ---------------------------------------------------------------------------

    async def _prepare(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)

    def _launch(self, group: asyncio.TaskGroup) -> None:
        self._consumers = [
            group.create_task(self._consume(), name=f"compaction-worker-{index}")
            for index in range(self.max_concurrency)
        ]

    async def aclose(self, *, drain: bool = True) -> None:
        """Stop accepting work, then finish it (``drain=True``) or drop and cancel it.

        Draining runs everything submitted, including the extra runs coalescing scheduled. If
        the caller is cancelled while draining, the rest is cancelled as with ``drain=False``.
        Cancelled compactions end before their write or after it, never half-way. Calling it
        again waits for the first call to finish.
        """
        await self._shut_down(drain=drain)

    async def _drain(self, drain: bool) -> bool:
        if drain:
            await self.join()
        return drain

    async def _stop(self, *, cancel: bool) -> None:
        assert self._send is not None
        assert self._receive is not None
        if cancel:
            self._cancelling = True
            for ticket in [*self._queued.values(), *self._rerun.values()]:
                self._finish(ticket, error=_dropped(ticket.session_id))
            self._queued.clear()
            self._rerun.clear()
            self._update_idle()
        self._send.close()
        if cancel:
            for task in self._consumers:
                task.cancel()
        try:
            if self._consumers:
                await asyncio.wait(self._consumers)
        finally:
            self._receive.close()

    # --- work --------------------------------------------------------------------------------

    def submit(self, session_id: str) -> CompactionTicket:
        """Ask for a compaction of ``session_id``; returns at once.

        A session already queued is not queued again (the same ticket is returned). A session
        being compacted right now is compacted once more afterwards (all submits meanwhile share
        that run's ticket).

        Raises:
            UsageError: the worker is not open (not started, closing or closed), or the id is
                empty.
        """
        if self._state is not WorkerState.OPEN:
            raise UsageError(f"This CompactionWorker is {self._state.value}; it takes no work")
        if not _is_id(session_id):
            raise UsageError("session_id must be a non-empty string")
        queued = self._queued.get(session_id)
        if queued is not None:
            return queued
        if session_id in self._running:
            ticket = self._rerun.get(session_id)
            if ticket is None:
                ticket = self._rerun[session_id] = CompactionTicket(session_id)
                self._idle.clear()
            return ticket
        ticket = CompactionTicket(session_id)
        self._enqueue(ticket)
        return ticket

    async def join(self) -> None:
        """Wait until nothing is queued or running (more work may be submitted meanwhile)."""
        await self._idle.wait()

    def _enqueue(self, ticket: CompactionTicket) -> None:
        assert self._send is not None
        self._queued[ticket.session_id] = ticket
        self._idle.clear()
        self._send.send_nowait(ticket.session_id)

    async def _consume(self) -> None:
        assert self._receive is not None
        async for session_id in self._receive:
            ticket = self._queued.pop(session_id, None)
            if ticket is None:  # dropped by a cancelling shutdown
                continue
            self._running[session_id] = ticket
            try:
                result = await self.service.compact(session_id, self.trigger, self.strategy)
            except asyncio.CancelledError:
                self._finish(ticket, error=_cancelled(session_id))
                raise
            except Exception as exc:
                logger.error("Compaction of session %r failed", session_id, exc_info=exc)
                self._finish(ticket, error=exc)
            else:
                self._finish(ticket, result=result)
            finally:
                del self._running[session_id]
                rerun = self._rerun.pop(session_id, None)
                if rerun is not None:
                    if self._cancelling:
                        self._finish(rerun, error=_dropped(session_id))
                    else:
                        self._enqueue(rerun)
                self._update_idle()

    def _finish(
        self,
        ticket: CompactionTicket,
        *,
        result: CompactionResult | None = None,
        error: BaseException | None = None,
    ) -> None:
        outcome = CompactionOutcome(session_id=ticket.session_id, result=result, error=error)
        ticket._resolve(outcome)  # pyright: ignore[reportPrivateUsage]  # the worker owns it
        report_outcome(self.on_outcome, outcome, logger)

    def _update_idle(self) -> None:
        if not (self._queued or self._running or self._rerun):
            self._idle.set()

    def __repr__(self) -> str:
        return (
            f"<CompactionWorker {self._state.value} max_concurrency={self.max_concurrency} "
            f"queued={len(self._queued)} running={len(self._running)}>"
        )


def _dropped(session_id: str) -> CompactionError:
    return CompactionError(
        f"Compaction of session {session_id!r} was dropped: the worker closed without draining"
    )


def _cancelled(session_id: str) -> CompactionError:
    return CompactionError(
        f"Compaction of session {session_id!r} was cancelled: the worker closed without "
        "draining (a plan is applied whole or not at all)"
    )


def _is_id(value: object) -> bool:
    """Whether ``value`` is a non-empty string (callers may pass anything at run time)."""
    return isinstance(value, str) and bool(value.strip())
