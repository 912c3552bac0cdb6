"""What a compaction strategy receives and returns.

Strategies are pure: they get the session and its active events in a :class:`CompactionRequest`
and return a :class:`CompactionResult`; they never touch the repository. The service turns a
result into a :class:`~asyncsession.compaction.plan.CompactionPlan` and applies it with a
compare-and-swap on the session's version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..events import Session, SessionEvent

__all__ = ["CompactionRequest", "CompactionResult"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionRequest:
    """A session and its active events, handed to triggers and strategies."""

    session: Session
    """The session being compacted."""
    events: tuple[SessionEvent, ...]
    """The active events in log order."""

    @classmethod
    def of(cls, session: Session, events: Sequence[SessionEvent]) -> CompactionRequest:
        """A request over these events."""
        return cls(session=session, events=tuple(events))

    @property
    def current_event_count(self) -> int:
        """How many active events there are."""
        return len(self.events)

    @property
    def current_turn_count(self) -> int:
        """How many turns there are: real (not synthetic) user messages, the open turn included."""
        return sum(1 for e in self.events if e.is_turn_start and not e.is_synthetic)


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

    @property
    def archived_event_count(self) -> int:
        """How many events leave the active window."""
        return len(self.archived_events)

    @classmethod
    def unchanged(cls, events: Sequence[SessionEvent]) -> CompactionResult:
        """A result that keeps every event and archives nothing."""
        return cls(compacted_events=tuple(events), applied=False)
