"""What a compaction strategy receives and returns.

Strategies are pure: they get the session and its active events in a :class:`CompactionRequest`
and return a :class:`CompactionResult`; they never touch the repository. The service turns a
result into a :class:`~asyncsession.plans.CompactionPlan` and applies it with a
compare-and-swap on the session's version.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..events import Session, SessionEvent

__all__ = ["CompactionRequest"]


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
