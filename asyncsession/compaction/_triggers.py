"""Compaction triggers: when to compact.

A trigger is anything with ``async should_compact(request) -> bool``, or a plain function (sync
or async) of the request returning a bool. `any_of` and `all_of` combine them, in order, lazily.
"""

from __future__ import annotations

from .._compaction_pass import USAGE_METADATA_KEY, TokenCountEstimator, should_compact
from ..compaction_protocols import CompactionRequest, CompactionTrigger, TriggerLike
from ..events import SessionEvent
from ..exceptions import UsageError
from ._strategies import events_of, positive_int, split_events
from ._tokens import estimator_or_default, tokens_of


def _reported(event: SessionEvent) -> tuple[int, int] | None:
    usage = event.metadata.get(USAGE_METADATA_KEY)
    if not isinstance(usage, dict):
        return None
    given, produced = usage.get("input_tokens"), usage.get("output_tokens", 0)
    if not isinstance(given, int) or not isinstance(produced, int):
        return None
    return given, produced


class TurnCountTrigger:
    """Fires when the session has more than ``max_turns`` real turns.

    A turn is a real (not synthetic) user message with everything up to the next one; the turn
    in progress counts. The shadow prompt of a summary turn does not count.

    Raises:
        UsageError: ``max_turns`` is not a positive int.
    """

    __slots__ = ("max_turns",)

    def __init__(self, max_turns: int) -> None:
        self.max_turns: int = positive_int(max_turns, "max_turns")

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
    is estimated as one formatted line (see `format_event`).

    Raises:
        UsageError: ``threshold`` is not a positive int.
    """

    __slots__ = ("estimator", "threshold")

    def __init__(self, threshold: int, *, estimator: TokenCountEstimator | None = None) -> None:
        self.threshold: int = positive_int(threshold, "threshold")
        self.estimator: TokenCountEstimator = estimator_or_default(estimator)

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether the budgeted events reach ``threshold`` tokens."""
        budgeted = split_events(events_of(request, "TokenCountTrigger.should_compact")).budgeted
        return tokens_of(budgeted, self.estimator) >= self.threshold

    def __repr__(self) -> str:
        return f"TokenCountTrigger(threshold={self.threshold!r}, estimator={self.estimator!r})"


class _Combined:
    """``any_of`` (stops at the first yes) or ``all_of`` (stops at the first no)."""

    __slots__ = ("name", "triggers")

    def __init__(self, name: str, triggers: tuple[TriggerLike, ...]) -> None:
        if not triggers:
            raise UsageError(f"{name}() needs at least one trigger")
        for trigger in triggers:
            if not (isinstance(trigger, CompactionTrigger) or callable(trigger)):
                raise UsageError(
                    f"{name}() takes triggers or functions of the request, not {trigger!r}"
                )
        self.name = name
        self.triggers = triggers

    async def should_compact(self, request: CompactionRequest) -> bool:
        decisive = self.name == "any_of"
        for trigger in self.triggers:
            if await should_compact(trigger, request) is decisive:
                return decisive
        return not decisive

    def __repr__(self) -> str:
        return f"{self.name}({', '.join(map(repr, self.triggers))})"


def any_of(*triggers: TriggerLike) -> CompactionTrigger:
    """A trigger that fires when any of ``triggers`` fires (asked in order, stopping at the first).

    Raises:
        UsageError: no triggers, or something that is neither a trigger nor a function.
    """
    return _Combined("any_of", triggers)


def all_of(*triggers: TriggerLike) -> CompactionTrigger:
    """A trigger that fires when all of ``triggers`` fire (asked in order, stopping at a no).

    For example ``all_of(TurnCountTrigger(10), TokenCountTrigger(8000))`` waits for both many
    turns and a large prompt.

    Raises:
        UsageError: no triggers, or something that is neither a trigger nor a function.
    """
    return _Combined("all_of", triggers)


class ContextWindowTrigger:
    """Fires when the prompt fills ``fraction`` of a ``context_window`` of tokens.

    The prompt's size is what the model reported: the input tokens of the newest reply that
    carries usage (the memory advisor stores it with every reply, on both APIs), plus its
    output tokens and an estimate of the events stored after it, since they join the next
    prompt. With no reported usage, or when a compaction wrote its summary after that reply
    (the report then counts archived events), it falls back to estimating the events the way
    [`TokenCountTrigger`][asyncsession.compaction.TokenCountTrigger] does. A memory advisor
    placed outside the tool loop stores the usage summed over the loop's rounds, which
    overstates the prompt: keep it at its default order (inside the loop) with this trigger.

    Args:
        context_window: the model's context window, in tokens (say ``128_000``).
        fraction: the share of the window that triggers compaction, in (0, 1].
        estimator: the fallback estimator (default: the heuristic one).

    Raises:
        UsageError: ``context_window`` is not a positive int, or ``fraction`` is out of range.
    """

    __slots__ = ("context_window", "estimator", "fraction")

    def __init__(
        self,
        context_window: int,
        *,
        fraction: float = 0.8,
        estimator: TokenCountEstimator | None = None,
    ) -> None:
        self.context_window: int = positive_int(context_window, "context_window")
        if isinstance(fraction, bool) or not 0 < fraction <= 1:
            raise UsageError(f"fraction must be in (0, 1], not {fraction!r}")
        self.fraction: float = float(fraction)
        self.estimator: TokenCountEstimator = estimator_or_default(estimator)

    @property
    def threshold(self) -> int:
        """The prompt size, in tokens, at which the trigger fires."""
        return max(1, int(self.context_window * self.fraction))

    def prompt_tokens(self, request: CompactionRequest) -> int:
        """The prompt's size: reported by the model where it can be, else estimated."""
        events = request.events
        for index in range(len(events) - 1, -1, -1):
            reported = _reported(events[index])
            if reported is None:
                continue
            at = events[index].timestamp
            if any(e.is_synthetic and e.timestamp >= at for e in events):
                break  # compacted since: the report counts what is archived now
            later = [e for e in events[index + 1 :] if e.is_message]
            return sum(reported) + tokens_of(later, self.estimator)
        return tokens_of(split_events(events).budgeted, self.estimator)

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether the prompt reaches
        [`threshold`][asyncsession.compaction.ContextWindowTrigger.threshold] tokens."""
        return self.prompt_tokens(request) >= self.threshold

    def __repr__(self) -> str:
        return (
            f"ContextWindowTrigger(context_window={self.context_window!r}, "
            f"fraction={self.fraction!r})"
        )
