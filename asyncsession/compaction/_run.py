"""One compaction pass: read, decide, plan, compare-and-swap."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Coroutine
from typing import Any, TypeVar

from ..events import Session
from ..filters import EventFilter
from ..repository._protocol import SessionRepository
from .plan import CompactionPlan
from .request import CompactionRequest, CompactionResult
from .strategies import CompactionStrategy
from .triggers import TriggerLike, should_compact

__all__ = ["run_compaction"]

_T = TypeVar("_T")


async def run_compaction(
    repository: SessionRepository,
    session: Session,
    trigger: TriggerLike,
    strategy: CompactionStrategy,
) -> CompactionResult:
    """Compact ``session`` once if the trigger fires; a lost compare-and-swap changes nothing.

    The version is read with (never after) the active events, so if anything is written in
    between, the compare-and-swap fails and the log stays as the other writer left it.

    Everything before the write (the trigger, the strategy's model call) can be cancelled. The
    write itself is not interrupted: if the caller is cancelled while the plan is being applied,
    the write runs to completion first and the cancellation is raised after it, so a plan is
    applied whole or not at all.
    """
    snapshot = await repository.read_snapshot(session.id, EventFilter.active())
    if snapshot is None:
        return CompactionResult.unchanged(())
    events = snapshot.events
    request = CompactionRequest.of(snapshot.session, events)
    if not await should_compact(trigger, request):
        return CompactionResult.unchanged(events)
    result = await strategy.compact(request)
    plan = CompactionPlan.of(session.id, events, result)
    if plan.is_empty:
        return dataclasses.replace(result, applied=False)
    applied = await _complete_despite_cancellation(
        repository.apply_compaction(session.id, plan, snapshot.version)
    )
    if not applied:
        return dataclasses.replace(CompactionResult.unchanged(events), error=result.error)
    return dataclasses.replace(result, applied=True)


async def _complete_despite_cancellation(write: Coroutine[Any, Any, _T]) -> _T:
    """Await ``write`` in a task of its own that a cancellation of the caller cannot interrupt.

    On cancellation, wait for the write to finish (absorbing repeated cancellations, as a cancel
    scope delivers them), then re-raise the cancellation; the write's own outcome is dropped.
    """
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                continue
        if not task.cancelled():
            task.exception()  # retrieved: the caller hears only about its cancellation
        raise
