"""What a compaction pass exchanges: the request in, the two roles, the result and the plan out.

A pass reads the active events into a
[`CompactionRequest`][asyncsession.compaction_protocols.CompactionRequest], asks a
[`CompactionTrigger`][asyncsession.compaction_protocols.CompactionTrigger] whether to compact,
lets a [`CompactionStrategy`][asyncsession.compaction_protocols.CompactionStrategy] decide a
[`CompactionResult`][asyncsession.compaction_protocols.CompactionResult], and applies it as a
[`CompactionPlan`][asyncsession.compaction_protocols.CompactionPlan]. These live below the
repository and the service (which run the pass); the triggers and strategies themselves live in
`asyncsession.compaction`, above them, and re-export the two roles.

What a compaction *means* (turn boundaries, what a summary replaces) is decided by strategies;
a store only has to apply the plan: flag the ``archive_ids`` archived in place, and put each
[`Insert`][asyncsession.compaction_protocols.Insert] group of new events immediately before
its anchor event (or at the end of the log when it has none). Existing events never move and are
never removed.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, cast, runtime_checkable

from pydantic import JsonValue

from .events import EventType, Session, SessionEvent
from .exceptions import InvalidCompactionPlan, UsageError

__all__ = [
    "CompactionPlan",
    "CompactionRecord",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "Insert",
    "TriggerLike",
    "check_strategy",
    "check_trigger",
    "should_compact",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRequest:
    """A session and its active events, handed to triggers and strategies."""

    session: Session
    """The session being compacted."""
    events: tuple[SessionEvent, ...]
    """The active events in log order."""

    def __post_init__(self) -> None:
        session = cast(object, self.session)  # callers outside the type checker pass anything
        if not isinstance(session, Session):
            raise UsageError(f"a CompactionRequest needs a Session, not {type(session).__name__}")

    @classmethod
    def of(cls, session: Session, events: Sequence[SessionEvent]) -> CompactionRequest:
        """A request over these events.

        Raises:
            UsageError: ``session`` is not a ``Session``, or ``events`` is not a sequence (for
                example ``None``).
        """
        given = cast(object, events)  # callers outside the type checker pass anything
        if isinstance(given, str | bytes) or not isinstance(given, Sequence):
            raise UsageError(
                f"CompactionRequest.of needs a sequence of events, not {type(given).__name__}"
            )
        return cls(session=session, events=tuple(events))

    @property
    def current_event_count(self) -> int:
        """How many active events there are."""
        return len(self.events)

    @property
    def current_turn_count(self) -> int:
        """How many turns there are: real (not synthetic) user messages, the open turn included."""
        return sum(1 for e in self.events if e.is_turn_start and not e.is_synthetic)


@runtime_checkable
class CompactionTrigger(Protocol):
    """Decides whether to compact. Keep it cheap: it runs after every turn."""

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether the session in ``request`` should be compacted now."""
        ...


TriggerLike: TypeAlias = CompactionTrigger | Callable[[CompactionRequest], bool | Awaitable[bool]]
"""A trigger, or a sync or async function of the request."""


async def should_compact(trigger: TriggerLike, request: CompactionRequest) -> bool:
    """Ask ``trigger`` (a trigger object or a plain function) about ``request``.

    Raises:
        UsageError: ``trigger`` is neither a trigger nor a function (for example ``None``), or
            ``request`` is not a ``CompactionRequest``.
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
class CompactionStrategy(Protocol):
    """Turns the active events into a smaller active window."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """The new active window and the events that leave it."""
        ...


def check_trigger(trigger: TriggerLike, name: str = "trigger") -> TriggerLike:
    """``trigger`` if it is a trigger or a function of the request.

    Raises:
        UsageError: it is neither (for example ``None``), naming the argument ``name``.
    """
    given = cast(object, trigger)  # callers outside the type checker may pass anything
    if not (isinstance(given, CompactionTrigger) or callable(given)):
        raise UsageError(
            f"{name} must be a compaction trigger or a function of the request, not {given!r}"
        )
    return trigger


def check_strategy(strategy: CompactionStrategy, name: str = "strategy") -> CompactionStrategy:
    """``strategy`` if it has an ``async compact(request)``.

    Raises:
        UsageError: it has not (for example ``None``), naming the argument ``name``.
    """
    if not isinstance(cast(object, strategy), CompactionStrategy):
        raise UsageError(f"{name} must be a compaction strategy, not {strategy!r}")
    return strategy


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """What a strategy decided: the new active window, and what leaves it."""

    compacted_events: tuple[SessionEvent, ...]
    """The new active window in log order, new events (a summary turn) where they belong."""
    archived_events: tuple[SessionEvent, ...] = ()
    """The events to archive, in log order."""
    tokens_estimated_saved: int = 0
    """Roughly how many prompt tokens the compaction saves."""
    applied: bool = field(default=True, compare=False)
    """False when the service computed the result but did not write it (trigger quiet, lost
    compare-and-swap, or nothing to do)."""
    error: str | None = field(default=None, compare=False)
    """Why the strategy could not do its work, when it fell back to changing (almost) nothing:
    for example a summarizer that failed or returned an empty summary. ``None`` otherwise."""
    pinned_events: tuple[SessionEvent, ...] = field(default=(), compare=False)
    """The existing events kept first in the window whatever the budget: the latest stored
    system message, a preamble before the first user message, a previous summary that stays.
    Filled in by the service when it applies the result."""
    summary_events: tuple[SessionEvent, ...] = field(default=(), compare=False)
    """The events the compaction wrote (the summary turn); empty for a plain window. Filled in
    by the service when it applies the result."""
    record: CompactionRecord | None = field(default=None, compare=False)
    """The ``COMPACTION`` event's payload, when the service applied the result; ``None``
    otherwise."""

    @property
    def covered_events(self) -> tuple[SessionEvent, ...]:
        """The events that left the window (the same as ``archived_events``); they stay in the
        log."""
        return self.archived_events

    @property
    def preserved_events(self) -> tuple[SessionEvent, ...]:
        """The events of the new window kept verbatim: neither pinned nor written by this
        compaction."""
        skip = {e.id for e in (*self.pinned_events, *self.summary_events)}
        return tuple(e for e in self.compacted_events if e.id not in skip)

    @property
    def is_unchanged(self) -> bool:
        """Whether nothing left the window and nothing was written."""
        return not self.archived_events and not self.summary_events

    @property
    def archived_event_count(self) -> int:
        """How many events leave the active window."""
        return len(self.archived_events)

    @classmethod
    def unchanged(cls, events: Sequence[SessionEvent]) -> CompactionResult:
        """A result that keeps every event and archives nothing."""
        return cls(compacted_events=tuple(events), applied=False)


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRecord:
    """What the ``COMPACTION`` event of an applied compaction says: the typed view of its payload.

    Every compaction the service applies appends one event of type
    [`EventType.COMPACTION`][asyncsession.events.EventType] at the end of the log, in the same
    compare-and-swap as its summaries. Read one back with
    [`from_event`][asyncsession.compaction_protocols.CompactionRecord.from_event].
    """

    covered: tuple[str, ...]
    """Ids of the events the compaction archived, in log order."""
    kept: tuple[str, ...]
    """Ids of the existing events that stayed in the active window, in log order."""
    summaries: tuple[str, ...] = ()
    """Ids of the events the compaction wrote (they carry this record's id under
    [`COMPACTION_ID`][asyncsession.events.COMPACTION_ID])."""
    trigger: str = ""
    """The class name of the trigger that fired."""
    strategy: str = ""
    """The class name of the strategy that ran."""
    tokens_before: int = 0
    """Estimated prompt tokens of the active window before the compaction."""
    tokens_after: int = 0
    """Estimated prompt tokens of the active window after it."""

    def to_payload(self) -> dict[str, JsonValue]:
        """The event payload that stores this record."""
        return {
            "covered": list(self.covered),
            "kept": list(self.kept),
            "summaries": list(self.summaries),
            "trigger": self.trigger,
            "strategy": self.strategy,
            "tokensBefore": self.tokens_before,
            "tokensAfter": self.tokens_after,
        }

    @classmethod
    def from_event(cls, event: SessionEvent) -> CompactionRecord:
        """The record a ``COMPACTION`` event holds.

        Raises:
            UsageError: ``event`` is not a ``COMPACTION`` event, or its payload is not a record.
        """
        payload = event.payload
        if event.type != EventType.COMPACTION or not isinstance(payload, dict):
            raise UsageError(f"event {event.id!r} is not a COMPACTION event")
        try:
            return cls(
                covered=_ids(payload.get("covered")),
                kept=_ids(payload.get("kept")),
                summaries=_ids(payload.get("summaries", [])),
                trigger=str(payload.get("trigger", "")),
                strategy=str(payload.get("strategy", "")),
                tokens_before=_count(payload.get("tokensBefore", 0)),
                tokens_after=_count(payload.get("tokensAfter", 0)),
            )
        except (TypeError, ValueError) as exc:
            raise UsageError(f"event {event.id!r} does not hold a compaction record") from exc


def _ids(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(i, str) for i in cast(list[object], value)
    ):
        raise ValueError(f"expected a list of ids, not {value!r}")
    return tuple(cast(list[str], value))


def _count(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected a count, not {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class Insert:
    """New events placed immediately before an existing event, or at the end of the log."""

    before_event_id: str | None
    """The anchor: the id of the event the group goes before; ``None`` appends it."""
    events: tuple[SessionEvent, ...]
    """The new events, in order."""

    def __post_init__(self) -> None:
        if not self.events:
            raise UsageError("an Insert needs at least one event")
        if self.before_event_id is not None and not self.before_event_id.strip():
            raise UsageError("an Insert's anchor id must not be blank")

    @classmethod
    def before(cls, anchor_id: str, events: Iterable[SessionEvent]) -> Insert:
        """A group that goes immediately before the event ``anchor_id``."""
        return cls(before_event_id=anchor_id, events=tuple(events))

    @classmethod
    def at_end(cls, events: Iterable[SessionEvent]) -> Insert:
        """A group appended at the end of the log."""
        return cls(before_event_id=None, events=tuple(events))

    @property
    def is_append(self) -> bool:
        """Whether the group goes at the end of the log."""
        return self.before_event_id is None


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPlan:
    """Which events to archive and which new events to insert where."""

    archive_ids: frozenset[str] = frozenset()
    """Ids of existing events to flag archived, in place."""
    inserts: tuple[Insert, ...] = ()
    """Groups of new events with their anchors, in order."""
    plan_id: str = field(default_factory=lambda: uuid.uuid4().hex, compare=False, repr=False)
    """What names this plan as one call's plan: a random id, kept by copies (a pickled plan,
    `dataclasses.replace`) and left out of equality. A store recognises a retry of an applied
    compaction by it (see
    [`apply_compaction`][asyncsession.repository.SessionRepository.apply_compaction]), so an
    equal plan another caller computed is still another call."""

    @property
    def is_empty(self) -> bool:
        """Whether the plan changes nothing."""
        return not self.archive_ids and not self.inserts

    @property
    def inserted_events(self) -> list[SessionEvent]:
        """Every new event, in plan order."""
        return [event for group in self.inserts for event in group.events]

    @property
    def anchor_ids(self) -> frozenset[str]:
        """The ids of the existing events that groups go before."""
        return frozenset(g.before_event_id for g in self.inserts if g.before_event_id is not None)

    @classmethod
    def of(
        cls, session_id: str, active_events: Sequence[SessionEvent], result: CompactionResult
    ) -> CompactionPlan:
        """The plan that turns ``active_events`` into ``result``.

        Everything the result does not keep is archived (so a summary the strategy replaced is
        archived even though the strategy does not list it). Each run of new events in
        ``result.compacted_events`` becomes a group anchored on the next existing event, or
        appended when none follows. Only the position of new events matters: existing events in
        the result are never rewritten.

        Raises:
            UsageError: a new event belongs to another session.
        """
        existing = {event.id for event in active_events}
        kept = {event.id for event in result.compacted_events if event.id in existing}
        archive = {event.id for event in result.archived_events}
        archive |= existing - kept
        inserts: list[Insert] = []
        run: list[SessionEvent] = []
        for event in result.compacted_events:
            if event.id in existing:
                if run:
                    inserts.append(Insert.before(event.id, run))
                    run = []
                continue
            if event.session_id != session_id:
                raise UsageError(
                    f"compaction result contains a new event of session {event.session_id!r}, "
                    f"not of session {session_id!r}"
                )
            run.append(event)
        if run:
            inserts.append(Insert.at_end(run))
        return cls(archive_ids=frozenset(archive), inserts=tuple(inserts))

    def unknown_ids(self, log_ids: Iterable[str]) -> set[str]:
        """The archive and anchor ids that are not in a log with these ids."""
        ids = set(log_ids)
        return (set(self.archive_ids) | set(self.anchor_ids)) - ids

    def apply_to(
        self, log: Sequence[SessionEvent], *, session_id: str | None = None
    ) -> list[SessionEvent]:
        """The log after this plan: the reference merge for a log held as a list.

        Multiple groups on one anchor go before it in plan order; groups with no anchor are
        appended in plan order.

        Raises:
            InvalidCompactionPlan: an archive id or anchor id is not in the log; nothing changes.
        """
        unknown = self.unknown_ids(event.id for event in log)
        if unknown:
            owner = session_id if session_id is not None else (log[0].session_id if log else "")
            raise InvalidCompactionPlan(owner, unknown)
        before: dict[str, list[SessionEvent]] = {}
        appended: list[SessionEvent] = []
        for group in self.inserts:
            if group.before_event_id is None:
                appended.extend(group.events)
            else:
                before.setdefault(group.before_event_id, []).extend(group.events)
        merged: list[SessionEvent] = []
        for event in log:
            merged.extend(before.get(event.id, ()))
            merged.append(event.as_archived() if event.id in self.archive_ids else event)
        merged.extend(appended)
        return merged
