"""The lifecycle both compaction workers share: started once, stopped once, outcomes reported.

`WorkerLifecycle` is an async context manager that owns a task group. Entering it starts the
worker (`WorkerLifecycle._prepare`, then `WorkerLifecycle._launch` in the task group); leaving
it stops the worker, draining on a normal exit and cancelling when the block raised. A worker
starts at most once; stopping again waits for the first stop to finish.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from collections.abc import Callable
from types import TracebackType
from typing import Self, TypeVar

from ..exceptions import UsageError

__all__ = ["WorkerLifecycle", "WorkerState", "report_outcome"]

_Outcome = TypeVar("_Outcome")


class WorkerState(enum.Enum):
    """Where a worker is in its life; the value is how messages and ``repr`` name it."""

    UNOPENED = "not started"
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


class WorkerLifecycle:
    """Start once with ``async with``, stop once with `WorkerLifecycle._shut_down`.

    A worker fills in four steps: `_prepare` (before any task starts; it may refuse to start
    by raising), `_launch` (start the worker's tasks in the task group), `_drain` (wait for the
    work, or only for what must end first) and `_stop` (cancel what is left and wait for it).
    """

    def __init__(self) -> None:
        self._state = WorkerState.UNOPENED
        self._stopped = asyncio.Event()
        self._task_group: asyncio.TaskGroup | None = None

    async def _prepare(self) -> None:
        """Get ready to start, before the task group opens; raise to refuse to start."""

    def _launch(self, group: asyncio.TaskGroup) -> None:
        """Start the worker's tasks in ``group``."""
        raise NotImplementedError

    async def _drain(self, drain: bool) -> bool:
        """Stop taking work and wait for it (all of it with ``drain``); whether all of it ended."""
        raise NotImplementedError

    async def _stop(self, *, cancel: bool) -> None:
        """End what still runs (cancelling it with ``cancel``) and wait until it has."""
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
            # The worker's tasks are done (or cancelled and being awaited); the task group only
            # makes sure none is left behind. The body's exception is not passed in, so it
            # propagates as it is instead of wrapped in an ExceptionGroup.
            await self._task_group.__aexit__(None, None, None)

    async def _shut_down(self, *, drain: bool) -> None:
        """Stop once: drain (``drain=True``) or cancel; a second call waits for the first.

        If the caller is cancelled while draining, the rest is cancelled as with
        ``drain=False``. A worker never started is closed at once.
        """
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


def report_outcome(
    callback: Callable[[_Outcome], object] | None, outcome: _Outcome, logger: logging.Logger
) -> None:
    """Hand ``outcome`` to ``callback``; what the callback raises is logged and dropped."""
    if callback is None:
        return
    try:
        callback(outcome)
    except Exception:
        logger.exception("on_outcome callback of the compaction worker raised")
