"""One compaction pass, as the service runs it: read, decide, plan, compare-and-swap.

It sits beside the service, below `asyncsession.compaction`: it needs only the roles a trigger
and a strategy play (`asyncsession.compaction_protocols`) and the repository, never the
strategies themselves.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from ._shield import shielded
from .compaction_protocols import (
    CompactionPlan,
    CompactionRecord,
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    Insert,
    TriggerLike,
    should_compact,
)
from .events import COMPACTION_ID, EventType, SessionEvent
from .exceptions import SessionNotFound
from .filters import EventFilter
from .repository import SessionRepository

__all__ = ["TokenCountingStrategy", "counts_tokens", "run_compaction", "with_record"]


@runtime_checkable
class _Estimates(Protocol):
    def estimate(self, text: str) -> int: ...


@runtime_checkable
class TokenCountingStrategy(Protocol):
    """An optional strategy capability: the token estimator it counts with.

    Every built-in strategy declares one (``estimator``); the record of a compaction it runs
    counts the window's tokens before and after with that same estimator. A strategy without
    one gets the record counted at four characters a token.
    """

    @property
    def estimator(self) -> _Estimates:
        """What estimates the tokens of a text (``estimate(text) -> int``)."""
        ...


def counts_tokens(strategy: object) -> TypeGuard[TokenCountingStrategy]:
    """Whether ``strategy`` declares `TokenCountingStrategy`, with an estimator that estimates."""
    return isinstance(strategy, TokenCountingStrategy) and isinstance(
        strategy.estimator, _Estimates
    )


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
    plan = with_record(session_id, events, result, plan, trigger, strategy)
    applied = await shielded(repository.apply_compaction(session_id, plan, snapshot.version))
    if not applied:
        return dataclasses.replace(CompactionResult.unchanged(events), error=result.error)
    return described(events, result, plan)


def described(
    active: Sequence[SessionEvent], result: CompactionResult, plan: CompactionPlan
) -> CompactionResult:
    """``result`` as applied by ``plan``: its pinned and summary events and its record, with the
    events the plan wrote as they are stored (tagged with the record's id)."""
    *written, record_event = plan.inserted_events
    record = CompactionRecord.from_event(record_event)
    existing = {e.id for e in active}
    stored = {e.id: e for e in written}
    compacted = tuple(stored.get(e.id, e) for e in result.compacted_events if not e.archived)
    return dataclasses.replace(
        result,
        compacted_events=compacted,
        applied=True,
        pinned_events=tuple(e for e in _pinned(active) if e.id in set(record.kept)),
        summary_events=tuple(e for e in compacted if e.id in stored and e.id not in existing),
        record=record,
    )


def _pinned(active: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The events a window keeps first: the latest stored system message, a preamble (the
    messages before the first user message) and the summaries already there."""
    stored_system = [
        e for e in active if e.is_message and e.type == EventType.SYSTEM and not e.is_synthetic
    ]
    first_turn = next((i for i, e in enumerate(active) if e.is_turn_start), len(active))
    latest = stored_system[-1].id if stored_system else None
    return [
        e
        for index, e in enumerate(active)
        if e.is_message
        and (
            e.id == latest or e.is_synthetic or (index < first_turn and e.type != EventType.SYSTEM)
        )
    ]


def _estimator(strategy: object) -> Callable[[str], int]:
    if counts_tokens(strategy):
        estimator = strategy.estimator
        return lambda text: int(estimator.estimate(text))
    return lambda text: (len(text) + 3) // 4


def _tokens(events: Sequence[SessionEvent], estimate: Callable[[str], int]) -> int:
    return sum(estimate(e.text) for e in events if e.is_message and e.text)


def with_record(
    session_id: str,
    active: Sequence[SessionEvent],
    result: CompactionResult,
    plan: CompactionPlan,
    trigger: object,
    strategy: object,
) -> CompactionPlan:
    """``plan`` with its ``COMPACTION`` event appended, its new events tagged with the event's id.

    A new event the plan writes archived already (a message the compaction covers as soon as
    it is stored, such as the question of a turn stored with its compacted reply) is counted
    among the covered events, after the existing ones, and is neither tagged nor a summary.
    The plan keeps its ``plan_id``, so a store still recognises a retry of it.
    """
    record_id = str(uuid.uuid4())
    estimate = _estimator(strategy)
    inserts = tuple(
        dataclasses.replace(
            group,
            events=tuple(
                e
                if e.archived
                else e.model_copy(update={"metadata": {**e.metadata, COMPACTION_ID: record_id}})
                for e in group.events
            ),
        )
        for group in plan.inserts
    )
    written = [e for group in inserts for e in group.events]
    existing = {e.id for e in active}
    record = CompactionRecord(
        covered=(
            *(e.id for e in active if e.id in plan.archive_ids),
            *(e.id for e in written if e.archived),
        ),
        kept=tuple(e.id for e in result.compacted_events if e.id in existing),
        summaries=tuple(e.id for e in written if not e.archived),
        trigger=_name(trigger),
        strategy=_name(strategy),
        tokens_before=_tokens(active, estimate),
        tokens_after=_tokens([e for e in result.compacted_events if not e.archived], estimate),
    )
    event = SessionEvent(
        id=record_id,
        session_id=session_id,
        type=EventType.COMPACTION,
        payload=record.to_payload(),
    )
    return dataclasses.replace(plan, inserts=(*inserts, Insert.at_end([event])))


def _name(role: object) -> str:
    return getattr(role, "__name__", None) or type(role).__name__
