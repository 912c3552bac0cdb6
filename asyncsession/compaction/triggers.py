"""Compaction triggers: when to compact.

A trigger looks at a `CompactionRequest` and says whether the session should be compacted now.
Anything with an ``async should_compact(request) -> bool`` method is a trigger, and so is a plain
function, sync or async, taking the request and returning a bool. The role itself
([`CompactionTrigger`][asyncsession.plans.CompactionTrigger], `TriggerLike`, `should_compact`)
is defined in `asyncsession.plans`, below the service that asks it, and re-exported here.

- :class:`TurnCountTrigger` fires when there are more real turns than allowed;
- :class:`TokenCountTrigger` fires when the events a prompt would carry reach a token threshold;
- :func:`any_of` and :func:`all_of` combine triggers (OR and AND, evaluated in order, lazily).
"""

from __future__ import annotations

from ..exceptions import UsageError
from ..plans import CompactionRequest, CompactionTrigger, TriggerLike, should_compact
from ._pipeline import events_of, positive_int, split_events, tokens_of
from .tokens import HeuristicTokenCountEstimator, TokenCountEstimator

__all__ = [
    "CompactionTrigger",
    "TokenCountTrigger",
    "TriggerLike",
    "TurnCountTrigger",
    "all_of",
    "any_of",
    "should_compact",
]


class TurnCountTrigger:
    """Fires when the session has more than ``max_turns`` real turns.

    A turn is a real (not synthetic) user message with everything up to the next one; the turn
    in progress counts. The shadow prompt of a summary turn does not count.

    Raises:
        UsageError: ``max_turns`` is not a positive int.
    """

    __slots__ = ("max_turns",)

    def __init__(self, max_turns: int) -> None:
        self.max_turns = positive_int(max_turns, "max_turns")

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether ``request.current_turn_count`` is above ``max_turns``."""
        events_of(request, "TurnCountTrigger.should_compact")
        return request.current_turn_count > self.max_turns

    def __repr__(self) -> str:
        return f"TurnCountTrigger(max_turns={self.max_turns!r})"


class TokenCountTrigger:
    """Fires when the events a prompt would carry reach ``threshold`` estimated tokens.

    It counts what the token-count strategy budgets: the latest stored system message, the
    synthetic summary events and the real events. System messages a newer one supersedes are
    left out (the next compaction archives them), and so are events of custom types. Each event
    is estimated as one formatted line (see :func:`~asyncsession.compaction.format_event`).

    Raises:
        UsageError: ``threshold`` is not a positive int.
    """

    __slots__ = ("estimator", "threshold")

    def __init__(self, threshold: int, *, estimator: TokenCountEstimator | None = None) -> None:
        self.threshold = positive_int(threshold, "threshold")
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else estimator
        )

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether the budgeted events reach ``threshold`` tokens."""
        budgeted = split_events(events_of(request, "TokenCountTrigger.should_compact")).budgeted
        return tokens_of(budgeted, self.estimator) >= self.threshold

    def __repr__(self) -> str:
        return f"TokenCountTrigger(threshold={self.threshold!r}, estimator={self.estimator!r})"


def _check_triggers(triggers: tuple[TriggerLike, ...], name: str) -> tuple[TriggerLike, ...]:
    if not triggers:
        raise UsageError(f"{name}() needs at least one trigger")
    for trigger in triggers:
        if not (isinstance(trigger, CompactionTrigger) or callable(trigger)):
            raise UsageError(
                f"{name}() takes triggers or functions of the request, not {trigger!r}"
            )
    return triggers


class _AnyOf:
    __slots__ = ("triggers",)

    def __init__(self, triggers: tuple[TriggerLike, ...]) -> None:
        self.triggers = triggers

    async def should_compact(self, request: CompactionRequest) -> bool:
        for trigger in self.triggers:
            if await should_compact(trigger, request):
                return True
        return False

    def __repr__(self) -> str:
        return f"any_of({', '.join(map(repr, self.triggers))})"


class _AllOf:
    __slots__ = ("triggers",)

    def __init__(self, triggers: tuple[TriggerLike, ...]) -> None:
        self.triggers = triggers

    async def should_compact(self, request: CompactionRequest) -> bool:
        for trigger in self.triggers:
            if not await should_compact(trigger, request):
                return False
        return True

    def __repr__(self) -> str:
        return f"all_of({', '.join(map(repr, self.triggers))})"


def any_of(*triggers: TriggerLike) -> CompactionTrigger:
    """A trigger that fires when any of ``triggers`` fires (asked in order, stopping at the first).

    Raises:
        UsageError: no triggers, or something that is neither a trigger nor a function.
    """
    return _AnyOf(_check_triggers(triggers, "any_of"))


def all_of(*triggers: TriggerLike) -> CompactionTrigger:
    """A trigger that fires when all of ``triggers`` fire (asked in order, stopping at a no).

    For example ``all_of(TurnCountTrigger(10), TokenCountTrigger(8000))`` waits for both many
    turns and a large prompt.

    Raises:
        UsageError: no triggers, or something that is neither a trigger nor a function.
    """
    return _AllOf(_check_triggers(triggers, "all_of"))
