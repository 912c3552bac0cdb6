"""The steps every compaction strategy shares: split the events, choose a cut, build a result.

A strategy never works on the active events as a whole. It first splits them
(`split_events`) into

- the **pinned** system message: the latest stored (non-synthetic) system message, which always
  stays active where it is and is never summarized;
- the **superseded** system messages: every other stored system message, archived on every pass;
- the **synthetic** events: earlier summary turns, kept where they are (or folded into the next
  recursive summary);
- the **real** events: user and assistant messages and tool results, the only events a strategy's
  limits count and the only ones it cuts;
- and anything else (events of custom types), which is left untouched where it is.

A cut is an index into ``real``: ``real[:cut]`` is archived, ``real[cut:]`` kept. It is moved
forward to the next turn start (`snap_to_turn_start`), so a turn is never split and a tool
call never loses its results, and back to the last turn start if it would archive everything
(`retain_last_turn`), so the newest turn is always kept. The result keeps every event that is
not archived in log order: nothing is ever reordered.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TypeAlias, cast

from .._checks import require_compactor, require_event
from ..compaction_protocols import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    TriggerLike,
    check_strategy,
    check_trigger,
)
from ..events import EventType, SessionEvent
from ..exceptions import UsageError
from ..messages import AssistantMessage, ToolResponseMessage
from .tokens import TokenCountEstimator

__all__ = [
    "EventFormatter",
    "EventSplit",
    "archiving",
    "check_worker_parts",
    "events_of",
    "format_event",
    "positive_int",
    "retain_last_turn",
    "select_cut",
    "snap_to_turn_start",
    "split_events",
    "tokens_of",
    "unchanged_except_superseded",
]


def positive_int(value: object, name: str) -> int:
    """``value`` if it is a positive ``int`` (not a ``bool``).

    Raises:
        UsageError: it is not.
    """
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"{name} must be a positive int, not {value!r}")
    return value


def check_worker_parts(service: object, trigger: TriggerLike, strategy: CompactionStrategy) -> None:
    """Refuse a worker's service, trigger or strategy that is not one, naming the argument.

    Raises:
        UsageError: one of them is not what it should be.
    """
    require_compactor(service, "service")
    check_trigger(trigger, "trigger")
    check_strategy(strategy, "strategy")


def events_of(request: CompactionRequest, where: str) -> tuple[SessionEvent, ...]:
    """The events of ``request``, refusing anything that is not a ``CompactionRequest``.

    Raises:
        UsageError: ``request`` is not a ``CompactionRequest`` (for example ``None``).
    """
    given = cast(object, request)  # callers outside the type checker may pass anything
    if not isinstance(given, CompactionRequest):
        raise UsageError(f"{where} needs a CompactionRequest, not {given!r}")
    return request.events


EventFormatter: TypeAlias = Callable[[SessionEvent], str]
"""Turns an event into one line of text, for token estimates and summarization prompts."""

_NO_TEXT = "[no text content]"


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
    text = message.text
    has_text = text is not None and bool(text.strip())
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        if has_text:
            return f"Assistant: {text} [tool calls: {calls}]"
        return f"Assistant [tool calls: {calls}]"
    role = message.message_type.capitalize()
    return f"{role}: {text if has_text else _NO_TEXT}"


def tokens_of(
    events: Iterable[SessionEvent],
    estimator: TokenCountEstimator,
    formatter: EventFormatter = format_event,
) -> int:
    """The estimated tokens of these events, each formatted as one line."""
    return sum(estimator.estimate(formatter(event)) for event in events)


@dataclass(frozen=True, slots=True)
class EventSplit:
    """The active events of a request, sorted into the roles compaction treats differently."""

    events: tuple[SessionEvent, ...]
    """Every event, in log order."""
    pinned: SessionEvent | None
    """The latest stored (non-synthetic) system message: stays active, never summarized."""
    superseded: tuple[SessionEvent, ...]
    """Every other stored system message: archived on every pass."""
    synthetic: tuple[SessionEvent, ...]
    """Events compaction wrote (earlier summary turns), in log order."""
    real: tuple[SessionEvent, ...]
    """User and assistant messages and tool results: what strategies count and cut."""

    @property
    def budgeted(self) -> list[SessionEvent]:
        """What a token budget counts: the pinned system message, synthetic and real events."""
        counted = {e.id for e in self.real} | {e.id for e in self.synthetic}
        if self.pinned is not None:
            counted.add(self.pinned.id)
        return [e for e in self.events if e.id in counted]


def split_events(events: Sequence[SessionEvent]) -> EventSplit:
    """Sort events into pinned, superseded, synthetic and real; custom events are in none."""
    stored_system = [
        e for e in events if e.is_message and e.type == EventType.SYSTEM and not e.is_synthetic
    ]
    pinned = stored_system[-1] if stored_system else None
    return EventSplit(
        events=tuple(events),
        pinned=pinned,
        superseded=tuple(stored_system[:-1]),
        synthetic=tuple(e for e in events if e.is_message and e.is_synthetic),
        real=tuple(
            e for e in events if e.is_message and not e.is_synthetic and e.type != EventType.SYSTEM
        ),
    )


def snap_to_turn_start(real: Sequence[SessionEvent], cut: int) -> int:
    """Move ``cut`` forward to the next turn start in ``real`` (or to its end)."""
    cut = max(0, cut)
    while cut < len(real) and not real[cut].is_turn_start:
        cut += 1
    return cut


def retain_last_turn(real: Sequence[SessionEvent], cut: int) -> int:
    """Move a cut that would archive everything back to the newest turn start.

    With no user message at all there is no turn to keep whole, so nothing is archived (0).
    """
    if cut < len(real):
        return cut
    for index in range(len(real) - 1, -1, -1):
        if real[index].is_turn_start:
            return index
    return 0


def select_cut(real: Sequence[SessionEvent], raw_cut: int) -> int:
    """A raw cut made safe: snapped forward to a turn start, and never past the newest turn."""
    return retain_last_turn(real, snap_to_turn_start(real, raw_cut))


def unchanged_except_superseded(
    split: EventSplit,
    estimator: TokenCountEstimator,
    formatter: EventFormatter = format_event,
) -> CompactionResult:
    """Keep every event but the superseded system messages (latest-wins applies on every pass)."""
    if not split.superseded:
        return CompactionResult.unchanged(split.events)
    gone = {e.id for e in split.superseded}
    return CompactionResult(
        compacted_events=tuple(e for e in split.events if e.id not in gone),
        archived_events=split.superseded,
        tokens_estimated_saved=tokens_of(split.superseded, estimator, formatter),
    )


def archiving(
    split: EventSplit,
    removed_real: Sequence[SessionEvent],
    estimator: TokenCountEstimator,
    formatter: EventFormatter = format_event,
) -> CompactionResult:
    """Archive ``removed_real`` and the superseded system messages; keep the rest where it is."""
    gone = {e.id for e in removed_real} | {e.id for e in split.superseded}
    archived = tuple(e for e in split.events if e.id in gone)
    return CompactionResult(
        compacted_events=tuple(e for e in split.events if e.id not in gone),
        archived_events=archived,
        tokens_estimated_saved=tokens_of(archived, estimator, formatter),
    )
