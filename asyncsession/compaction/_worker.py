"""The in-process compaction worker, and what it shares with the MongoDB one.

`CompactionWorker` compacts submitted sessions in background tasks it owns: coalescing (a
session is queued once; one submitted while it runs runs once more afterwards), bounded
concurrency, drain or cancel on exit. `WorkerLifecycle` is the start-once, stop-once async
context manager both workers are; `Compactor` and `CompactionQueue` are what a worker needs
(``SessionService.compact``) and what the turn hands finished turns to (any worker or queue).
"""

from __future__ import annotations

import asyncio
import enum
import logging
import math
from collections.abc import Callable
from types import TracebackType
from typing import Self

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._checks import require_compactor
from .._compaction_pass import (
    CompactionOutcome,
    CompactionTicket,
    Compactor,
    check_strategy,
    check_trigger,
)
from ..compaction_protocols import CompactionResult, CompactionStrategy, TriggerLike
from ..exceptions import CompactionError, UsageError
from ._strategies import positive_int

logger: logging.Logger = logging.getLogger("asyncsession.compaction.worker")


class WorkerState(enum.Enum):
    """Where a worker is in its life; the value is how messages and ``repr`` name it."""

    UNOPENED = "not started"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class WorkerLifecycle:
    """What both workers share: their parts, starting once with ``async with``, stopping once
    (`_shut_down`), and reporting outcomes. A worker fills in `_prepare` (before any task
    starts; it may refuse to start), `_launch` (start its tasks), `_drain` (wait for the work,
    all of it with ``drain``; whether all of it ended) and `_stop` (cancel what is left)."""

    def __init__(
        self,
        service: Compactor,
        trigger: TriggerLike,
        strategy: CompactionStrategy,
        max_concurrency: int,
        on_outcome: Callable[[CompactionOutcome], object] | None,
    ) -> None:
        require_compactor(service, "service")
        self.service = service
        """What runs each compaction."""
        self.trigger = check_trigger(trigger, "trigger")
        """Decides, per session, whether to compact (a submitter may ask it first)."""
        self.strategy = check_strategy(strategy, "strategy")
        """Decides what to compact."""
        self.max_concurrency = positive_int(max_concurrency, "max_concurrency")
        """How many compactions may run at once."""
        self.on_outcome = on_outcome
        """Called with every finished run's outcome."""
        self._logger = logger
        self._state = WorkerState.UNOPENED
        self._stopped = asyncio.Event()
        self._task_group: asyncio.TaskGroup | None = None

    async def _prepare(self) -> None:
        pass

    def _launch(self, group: asyncio.TaskGroup) -> None:
        raise NotImplementedError

    async def _drain(self, drain: bool) -> bool:
        raise NotImplementedError

    async def _stop(self, *, cancel: bool) -> None:
        raise NotImplementedError

    async def __aenter__(self) -> Self:
        if self._state is not WorkerState.UNOPENED:
            raise UsageError(
                f"This {type(self).__name__} is {self._state.value}; a worker can be started "
                "only once"
            )
        await self._prepare()
        self._task_group = asyncio.TaskGroup()
        await self._task_group.__aenter__()
        self._launch(self._task_group)
        self._state = WorkerState.OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        assert self._task_group is not None
        try:
            await self._shut_down(drain=exc_type is None)
        finally:
            # The tasks are done or being awaited; the body's exception is not passed in, so it
            # propagates as it is instead of wrapped in an ExceptionGroup.
            await self._task_group.__aexit__(None, None, None)

    async def aclose(self, *, drain: bool = True) -> None:
        """Stop taking work, then finish it (``drain=True``) or drop and cancel it.

        If the caller is cancelled while draining, the rest is cancelled as with
        ``drain=False``. Cancelled compactions end before their write or after it, never
        half-way. Calling it again waits for the first call to finish.
        """
        await self._shut_down(drain=drain)

    async def _shut_down(self, *, drain: bool) -> None:
        if self._state is WorkerState.UNOPENED:
            self._state = WorkerState.CLOSED
            self._stopped.set()
            return
        if self._state is not WorkerState.OPEN:
            await self._stopped.wait()
            return
        self._state = WorkerState.CLOSING
        drained = False
        try:
            drained = await self._drain(drain)
        finally:
            try:
                await self._stop(cancel=not drained)
            finally:
                self._state = WorkerState.CLOSED
                self._stopped.set()

    def _report(self, outcome: CompactionOutcome) -> None:
        if self.on_outcome is None:
            return
        try:
            self.on_outcome(outcome)
        except Exception:
            self._logger.exception("on_outcome callback of the compaction worker raised")


class CompactionWorker(WorkerLifecycle):
    """Compacts submitted sessions in background tasks, a bounded number at a time.

    Use it as an async context manager; it owns its tasks, and leaving the block waits for them.
    On a normal exit the queue is drained; when the block raises, queued work is dropped and
    running work cancelled. Call it from the event loop that runs it (it is not thread-safe).

    Args:
        service: what runs each compaction: a ``SessionService``, or anything with its
            ``compact(session_id, trigger, strategy)``.
        trigger: decides, per session, whether to compact (see ``SessionService.compact``).
        strategy: decides what to compact.
        max_concurrency: how many compactions may run at once.
        on_outcome: called with every finished run's ``CompactionOutcome`` (``session_id``,
            ``result``, ``error``, ``ok``), also for dropped work; it must not block. Its
            exceptions are logged and ignored.

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
        super().__init__(service, trigger, strategy, max_concurrency, on_outcome)
        self._cancelling = False
        self._queued: dict[str, CompactionTicket] = {}
        self._running: dict[str, CompactionTicket] = {}
        self._rerun: dict[str, CompactionTicket] = {}
        self._idle = asyncio.Event()
        self._idle.set()
        self._consumers: list[asyncio.Task[None]] = []
        self._send: MemoryObjectSendStream[str] | None = None
        self._receive: MemoryObjectReceiveStream[str] | None = None

    async def _prepare(self) -> None:
        self._send, self._receive = anyio.create_memory_object_stream[str](math.inf)

    def _launch(self, group: asyncio.TaskGroup) -> None:
        self._consumers = [
            group.create_task(self._consume(), name=f"compaction-worker-{index}")
            for index in range(self.max_concurrency)
        ]

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
        self._report(outcome)

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
