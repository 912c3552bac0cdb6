"""``WindowCompactionStrategy``: Spring AI 2.1's window strategy, by turns or by events.

``WindowCompactionStrategy(last_turns=10)`` keeps the newest ten real turns, as
[`TurnWindowCompactionStrategy`][asyncsession.compaction.TurnWindowCompactionStrategy] does;
``WindowCompactionStrategy(last_events=20)`` keeps about the newest twenty real events, whole
turns only, as
[`SlidingWindowCompactionStrategy`][asyncsession.compaction.SlidingWindowCompactionStrategy]
does. Either way the latest stored system message stays pinned where it is, the newest turn is
never archived, and a turn is never split.
"""

from __future__ import annotations

from ..compaction_protocols import CompactionRequest, CompactionResult
from ..exceptions import UsageError
from .strategies import SlidingWindowCompactionStrategy, TurnWindowCompactionStrategy
from .tokens import TokenCountEstimator

__all__ = ["WindowCompactionStrategy"]


class WindowCompactionStrategy:
    """Keeps the newest ``last_turns`` turns, or about the newest ``last_events`` events.

    Give one of the two; with neither, it keeps the newest ten turns.

    Raises:
        UsageError: both are given, or the one given is not a positive int.
    """

    __slots__ = ("_window", "last_events", "last_turns")

    def __init__(
        self,
        *,
        last_turns: int | None = None,
        last_events: int | None = None,
        estimator: TokenCountEstimator | None = None,
    ) -> None:
        if last_turns is not None and last_events is not None:
            raise UsageError("give WindowCompactionStrategy last_turns or last_events, not both")
        self._window: TurnWindowCompactionStrategy | SlidingWindowCompactionStrategy
        self.last_turns: int | None = None
        """The turns kept, or ``None`` for a window by events."""
        self.last_events: int | None = None
        """The events kept, or ``None`` for a window by turns."""
        if last_events is not None:
            by_events = SlidingWindowCompactionStrategy(last_events, estimator=estimator)
            self._window, self.last_events = by_events, by_events.max_events
        else:
            turns = 10 if last_turns is None else last_turns
            by_turns = TurnWindowCompactionStrategy(turns, estimator=estimator)
            self._window, self.last_turns = by_turns, by_turns.max_turns

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Archive the oldest whole turns beyond the window."""
        return await self._window.compact(request)

    def __repr__(self) -> str:
        if self.last_events is not None:
            return f"WindowCompactionStrategy(last_events={self.last_events!r})"
        return f"WindowCompactionStrategy(last_turns={self.last_turns!r})"
