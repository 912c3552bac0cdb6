"""``MongoCompactionWorker``: one worker of a fleet draining a ``MongoCompactionQueue``.

Leases, retries, wake-ups and stopping are described on the compaction internals page.
"""

from __future__ import annotations

import asyncio
import logging
import os
import secrets
import socket
from collections.abc import Callable
from contextlib import suppress
from datetime import timedelta
from typing import Any, Final, Literal

from .._checks import require_type
from .._compaction_pass import CompactionOutcome, Compactor
from .._shield import shielded
from ..compaction_protocols import CompactionResult, CompactionStrategy, TriggerLike
from ..exceptions import CompactionError, SessionNotFound, StorageError, UsageError
from ._mongo_queue import CompactionLease, MongoCompactionQueue
from ._strategies import positive_int
from ._worker import WorkerLifecycle

logger: logging.Logger = logging.getLogger("asyncsession.compaction.mongo_worker")

WakeMode = Literal["auto", "change_stream", "poll"]
"""How a worker learns of new jobs: a change stream if there is one, always one, or polling."""

_WATCH_SAFETY_INTERVAL: Final = 60.0
"""With a change stream, look for due work at least this often anyway (seconds)."""


def _positive_seconds(value: object, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise UsageError(f"{name} must be a positive number of seconds, not {value!r}")
    return float(value)


def _default_owner() -> str:
    """A worker name that is unique across hosts and restarts: host, pid and a random tag."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(3)}"


class MongoCompactionWorker(WorkerLifecycle):
    """Claims jobs from a [`MongoCompactionQueue`][asyncsession.compaction.MongoCompactionQueue]
    and compacts them, a bounded number at a time.

    It has the in-process worker's interface: an async context manager that owns its tasks,
    ``submit`` (here an ``async`` method that enqueues on the shared queue) and ``trigger``.

    Args:
        service: what runs each compaction (a ``SessionService``).
        trigger: decides, per session, whether to compact.
        strategy: decides what to compact.
        queue: the shared queue; borrowed (the worker never closes it).
        max_concurrency: how many jobs it holds at once.
        lease: seconds a claim holds without renewal; how long a dead worker's job waits.
        wake: ``"auto"`` (a change stream where the server has one, else polling),
            ``"change_stream"`` (refuse to start without one) or ``"poll"``.
        poll_interval: seconds between looks for work when polling.
        max_attempts: runs of a job before it is ``failed``.
        backoff: seconds before the first retry; doubled for each further one.
        max_backoff: the longest wait before a retry.
        on_outcome: called with every finished run's outcome, as `CompactionWorker`'s is.
        owner: this worker's name in the leases (default: host, pid and a random tag).

    Raises:
        UsageError: ``service``, ``trigger``, ``strategy`` or ``queue`` is not one, a number is
            not positive, or ``wake`` is unknown.
    """

    def __init__(
        self,
        service: Compactor,
        trigger: TriggerLike,
        strategy: CompactionStrategy,
        *,
        queue: MongoCompactionQueue,
        max_concurrency: int = 4,
        lease: float = 30.0,
        wake: WakeMode = "auto",
        poll_interval: float = 1.0,
        max_attempts: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 300.0,
        on_outcome: Callable[[CompactionOutcome], object] | None = None,
        owner: str | None = None,
    ) -> None:
        super().__init__(service, trigger, strategy, max_concurrency, on_outcome)
        self._logger = logger
        require_type(queue, MongoCompactionQueue, "queue", "a MongoCompactionQueue")
        positive_int(max_attempts, "max_attempts")
        if wake not in ("auto", "change_stream", "poll"):
            raise UsageError(f"wake must be 'auto', 'change_stream' or 'poll', not {wake!r}")
        self.queue = queue
        self.lease: timedelta = timedelta(seconds=_positive_seconds(lease, "lease"))
        self.wake: WakeMode = wake
        self.poll_interval: float = _positive_seconds(poll_interval, "poll_interval")
        self.max_attempts = max_attempts
        self.backoff: float = _positive_seconds(backoff, "backoff")
        self.max_backoff: float = _positive_seconds(max_backoff, "max_backoff")
        self.owner: str = owner or _default_owner()
        self._stopping = False
        self._wake = asyncio.Event()
        self._wake_mode: Literal["change_stream", "poll"] | None = None
        self._stream: Any = None
        self._loop_task: asyncio.Task[None] | None = None
        self._watch_task: asyncio.Task[None] | None = None
        self._running: dict[str, asyncio.Task[None]] = {}

    @property
    def wake_mode(self) -> Literal["change_stream", "poll"] | None:
        """How it learns of new jobs now; ``None`` before it starts."""
        return self._wake_mode

    async def submit(self, session_id: str) -> None:
        """Queue ``session_id`` on the shared queue (see `MongoCompactionQueue.submit`).

        Raises:
            UsageError: the id is empty.
            StorageError: the database failed.
        """
        await self.queue.submit(session_id)

    async def _prepare(self) -> None:
        stream = None if self.wake == "poll" else await self.queue.watch()
        if stream is None and self.wake == "change_stream":
            raise UsageError("wake='change_stream', but the server does not support them")
        self._wake_mode = "poll" if stream is None else "change_stream"
        self._stream = stream

    def _launch(self, group: asyncio.TaskGroup) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            self._watch_task = group.create_task(self._watch(stream), name="compaction-queue-watch")
        self._loop_task = group.create_task(self._loop(), name="compaction-queue-loop")

    async def _drain(self, drain: bool) -> bool:
        self._stopping = True
        self._wake.set()
        if self._loop_task is not None:
            await asyncio.wait({self._loop_task})
        if drain and self._running:
            await asyncio.wait(set(self._running.values()))
        return drain

    async def _stop(self, *, cancel: bool) -> None:
        tasks = list(self._running.values())
        if cancel:
            for task in tasks:
                task.cancel()
        if self._loop_task is not None and not self._loop_task.done():
            # Cancelled while the loop was still claiming: a claim whose reply is lost
            # leaves a lease that expires, and another worker takes the job then.
            self._loop_task.cancel()
            tasks.append(self._loop_task)
        if self._watch_task is not None:
            self._watch_task.cancel()
            tasks.append(self._watch_task)
        if tasks:
            await asyncio.wait(tasks)

    async def _watch(self, stream: Any) -> None:
        try:
            async with stream:
                while True:
                    change = await stream.try_next()
                    if change is not None:
                        self._wake.set()
        except asyncio.CancelledError:
            raise
        except Exception:
            logger.warning("The compaction queue's change stream failed; polling", exc_info=True)
            self._wake_mode = "poll"
            self._wake.set()

    async def _loop(self) -> None:
        while not self._stopping:
            self._wake.clear()
            await self._claim_what_is_due()
            if self._stopping:
                return
            timeout = await self._idle_timeout()
            with suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self._wake.wait()

    async def _claim_what_is_due(self) -> None:
        while len(self._running) < self.max_concurrency and not self._stopping:
            try:
                lease = await self.queue.claim(self.owner, self.lease)
            except StorageError:
                logger.warning("Claiming a compaction job failed", exc_info=True)
                return
            if lease is None:
                return
            assert self._task_group is not None
            task = self._task_group.create_task(
                self._run(lease), name=f"compaction-{lease.session_id}"
            )
            self._running[lease.session_id] = task
            task.add_done_callback(self._done)

    def _done(self, task: asyncio.Task[None]) -> None:
        for session_id, running in list(self._running.items()):
            if running is task:
                del self._running[session_id]
        self._wake.set()

    async def _idle_timeout(self) -> float:
        cap = self.poll_interval if self._wake_mode == "poll" else _WATCH_SAFETY_INTERVAL
        if len(self._running) >= self.max_concurrency:
            return cap
        try:
            due = await self.queue.next_due()
        except StorageError:
            logger.warning("Reading the compaction queue failed", exc_info=True)
            return self.poll_interval
        if due is None:
            return cap
        return max(0.0, min(cap, (due - self.queue.clock()).total_seconds()))

    async def _run(self, lease: CompactionLease) -> None:
        session_id = lease.session_id
        if lease.attempt > self.max_attempts:
            error = CompactionError(
                f"Compaction of session {session_id!r} gave up after {self.max_attempts} "
                "attempts: the lease of the last one expired (its worker died or hung)"
            )
            await self._end(self.queue.fail(lease, str(error), retry_at=None))
            self._ended(session_id, error=error)
            return
        work = asyncio.ensure_future(self.service.compact(session_id, self.trigger, self.strategy))
        try:
            held = await self._hold(lease, work)
        except asyncio.CancelledError:
            await self._give_back(lease, work)
            raise
        if held is None:  # another worker took the job over: it writes the outcome
            self._ended(session_id, error=_lost(session_id))
            return
        await self._record(held, work)

    async def _hold(
        self, lease: CompactionLease, work: asyncio.Future[CompactionResult]
    ) -> CompactionLease | None:
        """Renew the lease until the work ends; ``None`` (work cancelled) if it was lost."""
        every = self.lease.total_seconds() / 3
        while True:
            await asyncio.wait({work}, timeout=every)
            if work.done():
                return lease
            try:
                renewed = await self.queue.renew(lease, self.lease)
            except StorageError:
                logger.warning("Renewing the lease of %r failed", lease.session_id, exc_info=True)
                continue
            if renewed is None:
                logger.warning("Lost the lease of session %r; cancelling", lease.session_id)
                work.cancel()
                await asyncio.wait({work})
                return None
            lease = renewed

    async def _give_back(
        self, lease: CompactionLease, work: asyncio.Future[CompactionResult]
    ) -> None:
        work.cancel()
        await _settle(work)
        if work.cancelled() or work.exception() is not None:
            await self._end(self.queue.release(lease))
            self._ended(lease.session_id, error=_cancelled(lease.session_id))
        else:  # it finished before the cancellation reached it
            await self._record(lease, work)

    async def _record(self, lease: CompactionLease, work: asyncio.Future[CompactionResult]) -> None:
        session_id = lease.session_id
        error = work.exception()
        if error is None:
            result = work.result()
            await self._end(self.queue.complete(lease, applied=result.applied))
            self._ended(session_id, result=result)
        elif isinstance(error, SessionNotFound):  # deleted meanwhile: nothing left to do
            await self._end(self.queue.complete(lease, applied=False))
            self._ended(session_id, error=error)
        else:
            logger.error(
                "Compaction of session %r failed (attempt %d of %d)",
                session_id,
                lease.attempt,
                self.max_attempts,
                exc_info=error,
            )
            retry_at = None
            if lease.attempt < self.max_attempts:
                delay = min(self.max_backoff, self.backoff * 2.0 ** (lease.attempt - 1))
                retry_at = self.queue.clock() + timedelta(seconds=delay)
            message = f"{type(error).__name__}: {error}"
            await self._end(self.queue.fail(lease, message, retry_at=retry_at))
            self._ended(session_id, error=error)

    async def _end(self, write: Any) -> None:
        try:
            held = await shielded(write)
        except StorageError:
            # The lease expires and another worker runs the job again; the compare-and-swap
            # makes a repeated compaction harmless.
            logger.warning("Recording a compaction job's end failed", exc_info=True)
            return
        if not held:
            logger.warning("A compaction job's lease was taken over before its end was recorded")

    def _ended(
        self,
        session_id: str,
        *,
        result: CompactionResult | None = None,
        error: BaseException | None = None,
    ) -> None:
        self._report(CompactionOutcome(session_id=session_id, result=result, error=error))

    def __repr__(self) -> str:
        return (
            f"<MongoCompactionWorker {self._state.value} owner={self.owner!r} "
            f"wake={self._wake_mode} running={len(self._running)}>"
        )


async def _settle(future: asyncio.Future[Any]) -> None:
    """Wait for a cancelled future to end, even if this task is cancelled again meanwhile."""
    while not future.done():
        try:
            await asyncio.wait({future})
        except asyncio.CancelledError:
            continue


def _lost(session_id: str) -> CompactionError:
    return CompactionError(
        f"Compaction of session {session_id!r} was cancelled: its lease expired and another "
        "worker claimed the job"
    )


def _cancelled(session_id: str) -> CompactionError:
    return CompactionError(
        f"Compaction of session {session_id!r} was cancelled: the worker stopped without "
        "draining, and the job went back to the queue"
    )
