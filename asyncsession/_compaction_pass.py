"""One compaction pass, as the service runs it: read, decide, plan, compare-and-swap.

It sits beside the service, below `asyncsession.compaction`: it needs only the roles a trigger
and a strategy play (`asyncsession.compaction_protocols`) and the repository, never the
strategies themselves.
"""

from __future__ import annotations

import dataclasses

from ._shield import shielded
from .compaction_protocols import (
    CompactionPlan,
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    TriggerLike,
    should_compact,
)
from .exceptions import SessionNotFound
from .filters import EventFilter
from .repository import SessionRepository

__all__ = ["run_compaction"]


async def run_compaction(
    repository: SessionRepository,
    session_id: str,
    trigger: TriggerLike,
    strategy: CompactionStrategy,
) -> CompactionResult:
    """Compact the session once if the trigger fires; a lost compare-and-swap changes nothing.

    The version is read with (never after) the active events, so if anything is written in
    between, the compare-and-swap fails and the log stays as the other writer left it.

    Everything before the write (the trigger, the strategy's model call) can be cancelled. The
    write itself is not interrupted: if the caller is cancelled while the plan is being applied,
    the write runs to completion first and the cancellation is raised after it, so a plan is
    applied whole or not at all.

    Raises:
        SessionNotFound: the session does not exist.
    """
    snapshot = await repository.read_snapshot(session_id, EventFilter.active())
    if snapshot is None:
        raise SessionNotFound(session_id)
    events = snapshot.events
    request = CompactionRequest.of(snapshot.session, events)
    if not await should_compact(trigger, request):
        return CompactionResult.unchanged(events)
    result = await strategy.compact(request)
    plan = CompactionPlan.of(session_id, events, result)
    if plan.is_empty:
        return dataclasses.replace(result, applied=False)
    applied = await shielded(repository.apply_compaction(session_id, plan, snapshot.version))
    if not applied:
        return dataclasses.replace(CompactionResult.unchanged(events), error=result.error)
    return dataclasses.replace(result, applied=True)
