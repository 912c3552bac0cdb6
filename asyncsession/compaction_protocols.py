"""What a compaction pass exchanges: the request in, the two roles, the result and its record.

These live below the repository and the service, which run the pass; the triggers and
strategies live in `asyncsession.compaction`, which re-exports these. Nothing stored is
rewritten: the record names the new active view, and ``archived`` is derived from the newest
record on read."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, TypeAlias, cast, runtime_checkable

from pydantic import JsonValue

from .events import EventType, Session, SessionEvent
from .exceptions import UsageError

__all__ = [
    "CompactionRecord",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
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


@runtime_checkable
class CompactionStrategy(Protocol):
    """Turns the active events into a smaller active window."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """The new active window and the events that leave it."""
        ...


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

    Every compaction the service applies appends one commit: its summaries, then one event of
    type [`EventType.COMPACTION`][asyncsession.events.EventType] (the *boundary*) holding this
    record. The newest boundary defines the active view: the events its ``view`` names, then
    whatever is appended after it. Read one back with
    `from_event`.
    """

    covered: tuple[str, ...]
    """Ids of the events the compaction archived, in log order."""
    kept: tuple[str, ...]
    """Ids of the existing events that stayed in the active window, in log order."""
    summaries: tuple[str, ...] = ()
    """Ids of the events the compaction wrote (they carry this record's id under the
    ``compactionId`` metadata key)."""
    trigger: str = ""
    """The class name of the trigger that fired."""
    strategy: str = ""
    """The class name of the strategy that ran."""
    tokens_before: int = 0
    """Estimated prompt tokens of the active window before the compaction."""
    tokens_after: int = 0
    """Estimated prompt tokens of the active window after it."""
    view: tuple[str, ...] = ()
    """Ids of the active view right after the compaction, in view order: the kept existing
    events and the summaries, as the strategy placed them."""

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
            "view": list(self.view),
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
                view=_ids(payload.get("view")),
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
