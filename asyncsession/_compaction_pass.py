"""One compaction pass, as the service runs it: read, decide, append one commit at the version read.

It sits beside the service, below `asyncsession.compaction`: it needs only the roles
(`asyncsession.compaction_protocols`) and the repository, never the strategies themselves. It
also holds what the layers around compaction share with it: the argument checks of the roles,
the one-line event format and the usage metadata token counts read, and the handles of
background compaction (`Compactor`, `CompactionQueue`, `CompactionTicket`, `CompactionOutcome`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import json
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Final, Protocol, Self, TypeAlias, TypeGuard, cast, runtime_checkable

from ._checks import require_event
from ._shield import shielded
from .compaction_protocols import (
    CompactionRecord,
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    CompactionTrigger,
    TriggerLike,
)
from .events import COMPACTION_ID, EventType, SessionEvent
from .exceptions import SessionNotFound, UsageError
from .filters import EventFilter
from .messages import AssistantMessage, ToolResponseMessage
from .repository import SessionRepository

__all__ = [
    "USAGE_METADATA_KEY",
    "CompactionOutcome",
    "CompactionQueue",
    "CompactionTicket",
    "Compactor",
    "EventFormatter",
    "MemoryFlush",
    "TokenCountEstimator",
    "TokenCountingStrategy",
    "check_strategy",
    "check_trigger",
    "compaction_commit",
    "counts_tokens",
    "format_event",
    "spliced",
    "run_compaction",
    "should_compact",
]


def check_trigger(trigger: TriggerLike, name: str = "trigger") -> TriggerLike:
    """``trigger`` if it is a trigger or a function of the request; else a `UsageError`."""
    given = cast(object, trigger)  # callers outside the type checker may pass anything
    if isinstance(given, type) or not (isinstance(given, CompactionTrigger) or callable(given)):
        raise UsageError(
            f"{name} must be a compaction trigger or a function of the request, not {given!r}"
        )
    return trigger


def check_strategy(strategy: CompactionStrategy, name: str = "strategy") -> CompactionStrategy:
    """``strategy`` if it has an ``async compact(request)``; else a `UsageError`."""
    given = cast(object, strategy)
    if isinstance(given, type) or not isinstance(given, CompactionStrategy):
        raise UsageError(f"{name} must be a compaction strategy, not {strategy!r}")
    return strategy


async def should_compact(trigger: TriggerLike, request: CompactionRequest) -> bool:
    """Ask ``trigger`` (a trigger object or a plain function) about ``request``.

    Raises:
        UsageError: ``trigger`` is neither a trigger nor a function, or ``request`` is not a
            ``CompactionRequest``.
    """
    check_trigger(trigger)
    if not isinstance(cast(object, request), CompactionRequest):
        raise UsageError(f"should_compact needs a CompactionRequest, not {request!r}")
    if isinstance(trigger, CompactionTrigger):
        return bool(await trigger.should_compact(request))
    outcome = trigger(request)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return bool(outcome)


@runtime_checkable
class MemoryFlush(Protocol):
    """What a strategy's ``memory_flush`` is: ``async flush(request, events)`` saves durable facts
    from ``events`` (about to leave ``request``'s window), e.g. ``ModelMemoryFlush``."""

    async def flush(self, request: CompactionRequest, events: Sequence[SessionEvent]) -> None: ...


@runtime_checkable
class TokenCountEstimator(Protocol):
    """What strategies and triggers take as ``estimator``: ``estimate(text) -> int``."""

    def estimate(self, text: str) -> int: ...


@runtime_checkable
class TokenCountingStrategy(Protocol):
    """An optional strategy capability: the ``estimator`` it counts with (every built-in one
    has it), with which a compaction's record counts the tokens before and after; without it
    the record counts four characters a token."""

    @property
    def estimator(self) -> TokenCountEstimator: ...


def counts_tokens(strategy: object) -> TypeGuard[TokenCountingStrategy]:
    """Whether ``strategy`` declares `TokenCountingStrategy`, with an estimator that estimates."""
    return isinstance(strategy, TokenCountingStrategy) and isinstance(
        strategy.estimator, TokenCountEstimator
    )


async def run_compaction(
    repository: SessionRepository,
    session_id: str,
    trigger: TriggerLike,
    strategy: CompactionStrategy,
) -> CompactionResult:
    """Compact the session once if the trigger fires; a lost compare-and-swap changes nothing.

    The compaction is appended as one commit at the version the active view was read with, so
    a write in between makes the append fail; a retry of the same commit is a replay, reported
    applied. Everything before the write can be cancelled; the write itself runs to completion.

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
    commit = compaction_commit(session_id, events, result, trigger, strategy)
    if commit is None:
        return dataclasses.replace(result, applied=False)
    applied = await shielded(repository.append_events(session_id, commit, snapshot.version))
    if not applied:
        return dataclasses.replace(CompactionResult.unchanged(events), error=result.error)
    return described(events, result, commit)


def described(
    active: Sequence[SessionEvent], result: CompactionResult, commit: Sequence[SessionEvent]
) -> CompactionResult:
    """``result`` as ``commit`` applied it: its pinned and summary events and its record, with
    the events the commit wrote as they are stored (tagged with the record's id)."""
    *written, boundary = commit
    record = CompactionRecord.from_event(boundary)
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


def compaction_commit(
    session_id: str,
    active: Sequence[SessionEvent],
    result: CompactionResult,
    trigger: object,
    strategy: object,
) -> list[SessionEvent] | None:
    """The commit that applies ``result`` to the view ``active``: the new events, then the
    ``COMPACTION`` boundary naming the new view; ``None`` when nothing leaves the view and
    nothing is written.

    The new events not flagged archived are the summaries, tagged with the boundary's id. A new
    event flagged archived (a message the compaction covers as soon as it is stored, such as
    the question of a turn stored with its compacted reply) is written, left out of the view,
    counted among the covered events after the existing ones, and neither tagged nor a summary.

    Raises:
        UsageError: a new event belongs to another session.
    """
    existing = {e.id for e in active}
    view = [e for e in result.compacted_events if not e.archived]
    kept = {e.id for e in view if e.id in existing}
    new = [e for e in result.compacted_events if e.id not in existing]
    if not new and kept == existing:
        return None
    for event in new:
        if event.session_id != session_id:
            raise UsageError(
                f"compaction result contains a new event of session {event.session_id!r}, "
                f"not of session {session_id!r}"
            )
    boundary_id = str(uuid.uuid4())
    written = [
        e
        if e.archived
        else e.model_copy(update={"metadata": {**e.metadata, COMPACTION_ID: boundary_id}})
        for e in new
    ]
    estimate = _estimator(strategy)
    record = CompactionRecord(
        covered=(
            *(e.id for e in active if e.id not in kept),
            *(e.id for e in written if e.archived),
        ),
        kept=tuple(e.id for e in view if e.id in existing),
        summaries=tuple(e.id for e in written if not e.archived),
        trigger=_name(trigger),
        strategy=_name(strategy),
        tokens_before=_tokens(active, estimate),
        tokens_after=_tokens(view, estimate),
        view=tuple(e.id for e in view),
    )
    boundary = SessionEvent(
        id=boundary_id,
        session_id=session_id,
        type=EventType.COMPACTION,
        payload=record.to_payload(),
    )
    return [*written, boundary]


def _name(role: object) -> str:
    return getattr(role, "__name__", None) or type(role).__name__


USAGE_METADATA_KEY: Final = "usage"
"""Metadata key of an assistant reply: ``{"input_tokens": n, "output_tokens": m}`` as the model
reported them for the call that produced it (the memory advisor stores it)."""


EventFormatter: TypeAlias = Callable[[SessionEvent], str]
"""Turns an event into one line of text, for token estimates and summarization prompts."""


def spliced(
    events: Sequence[SessionEvent],
    turn: Sequence[SessionEvent],
    at: str,
    gone: Collection[str],
) -> tuple[SessionEvent, ...]:
    """``events`` without the ``gone`` ids, with ``turn`` (a summary or compaction turn) put
    where the event ``at`` stands: a strategy's compacted view."""
    compacted: list[SessionEvent] = []
    for event in events:
        if event.id == at:
            compacted.extend(turn)
        if event.id not in gone:
            compacted.append(event)
    return tuple(compacted)


def format_event(event: SessionEvent) -> str:
    """One line for an event, as token estimates and summarization prompts see it.

    ``User: <text>``, ``Assistant: <text>`` or ``System: <text>``; an assistant message with tool
    calls is ``Assistant [tool calls: name(args), ...]`` (``Assistant: <text> [tool calls: ...]``
    when it also has text); tool results are ``Tool [responses: name -> data, ...]``. A message
    without text reads ``[no text content]``. An event of a custom type reads
    ``<TYPE>: <payload as JSON>``.
    """
    message = require_event(event, "event").message
    if message is None:
        return f"{event.type}: {json.dumps(event.payload, ensure_ascii=False, sort_keys=True)}"
    if isinstance(message, ToolResponseMessage):
        responses = ", ".join(f"{r.name} -> {r.data}" for r in message.responses)
        return f"Tool [responses: {responses}]"
    text = message.text if message.text and message.text.strip() else None
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return f"Assistant{f': {text}' if text else ''} [tool calls: {calls}]"
    return f"{message.message_type.capitalize()}: {text or '[no text content]'}"


@runtime_checkable
class Compactor(Protocol):
    """Compacts one session once, if its trigger fires (``SessionService.compact``)."""

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult: ...


@runtime_checkable
class CompactionQueue(Protocol):
    """Where finished turns go to be compacted in the background: ``submit`` (plain or
    ``async``), the ``trigger`` a submitter may ask first, and an async context manager."""

    @property
    def trigger(self) -> TriggerLike | None: ...

    def submit(self, session_id: str) -> object: ...

    async def __aenter__(self) -> Self: ...

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None: ...


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
