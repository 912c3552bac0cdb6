"""Compaction strategies: what to archive, and what (if anything) replaces it.

A strategy is pure: it receives the active events in a
[`CompactionRequest`][asyncsession.compaction.strategies.CompactionRequest] and returns a
[`CompactionResult`][asyncsession.compaction.strategies.CompactionResult]; it never touches the
repository.

Every strategy here keeps the same rules (see ``asyncsession.compaction._pipeline``):

- the kept window starts at a turn start, so a turn is never split and a tool call is never
  separated from its results;
- the newest turn is never archived, even when it alone is over the limit;
- the latest stored system message stays active where it is and is never summarized; older
  stored system messages are archived on every pass;
- limits count real events only (user and assistant messages and tool results): stored system
  messages and summary events do not use them up;
- summary turns stay where they are, except that recursive summarization folds them into its
  new summary and archives them;
- events of custom types are left alone, and the log is never reordered.
"""

from __future__ import annotations

import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Final, TypeAlias

from pydantic import JsonValue

from .._checks import require_estimator
from ..compaction_protocols import CompactionRequest, CompactionResult, CompactionStrategy
from ..events import COMPACTION_SOURCE, SYNTHETIC, EventType, SessionEvent, utc_now
from ..exceptions import CompactionError, UsageError
from ..messages import AssistantMessage, UserMessage
from ._pipeline import (
    EventFormatter,
    EventSplit,
    archiving,
    events_of,
    format_event,
    positive_int,
    select_cut,
    split_events,
    tokens_of,
    unchanged_except_superseded,
)
from .flush import MemoryFlush, run_memory_flush
from .summarizer import DEFAULT_SUMMARIZER_SYSTEM_PROMPT, Summarizer
from .tokens import HeuristicTokenCountEstimator, TokenCountEstimator

__all__ = [
    "CompactionStrategy",
    "RecursiveSummarizationCompactionStrategy",
    "SlidingWindowCompactionStrategy",
    "TokenCountCompactionStrategy",
    "TurnWindowCompactionStrategy",
]

logger: logging.Logger = logging.getLogger(__name__)

DEFAULT_SHADOW_PROMPT: Final = "Summarize the conversation we had so far."
"""The synthetic user message that opens a summary turn."""
RECURSIVE_SUMMARIZATION_SOURCE: Final = "recursive-summarization"
"""The ``COMPACTION_SOURCE`` of the summary turns recursive summarization writes."""

OnSummarizationFailure: TypeAlias = Callable[
    [CompactionRequest, CompactionError], Awaitable[object] | object
]
"""Called (sync or async) when a summary could not be written; the error says why."""


class SlidingWindowCompactionStrategy:
    """Keeps about the newest ``max_events`` real events, whole turns only.

    When there are more real events than ``max_events``, the cut falls ``max_events`` from the
    end and moves forward to the next turn start, so the kept window can be a little shorter; if
    that would archive everything, the newest turn is kept whole however long it is. Summary
    turns and the latest system message stay where they are and do not count.

    Raises:
        UsageError: ``max_events`` is not a positive int.
    """

    __slots__ = ("estimator", "max_events")

    def __init__(
        self, max_events: int = 20, *, estimator: TokenCountEstimator | None = None
    ) -> None:
        self.max_events: int = positive_int(max_events, "max_events")
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Archive the oldest whole turns beyond ``max_events`` real events."""
        split = split_events(events_of(request, "SlidingWindowCompactionStrategy.compact"))
        real = split.real
        if len(real) <= self.max_events:
            return unchanged_except_superseded(split, self.estimator)
        cut = select_cut(real, len(real) - self.max_events)
        if cut == 0:
            return unchanged_except_superseded(split, self.estimator)
        return archiving(split, real[:cut], self.estimator)

    def __repr__(self) -> str:
        return f"SlidingWindowCompactionStrategy(max_events={self.max_events!r})"


class TurnWindowCompactionStrategy:
    """Keeps the newest ``max_turns`` real turns.

    Real events before the first user message (a greeting, say) are a preamble that is always
    kept in place. Summary turns and the latest system message do not count as turns.

    Raises:
        UsageError: ``max_turns`` is not a positive int.
    """

    __slots__ = ("estimator", "max_turns")

    def __init__(
        self, max_turns: int = 10, *, estimator: TokenCountEstimator | None = None
    ) -> None:
        self.max_turns: int = positive_int(max_turns, "max_turns")
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Archive the oldest whole turns beyond ``max_turns``."""
        split = split_events(events_of(request, "TurnWindowCompactionStrategy.compact"))
        real = split.real
        starts = [index for index, event in enumerate(real) if event.is_turn_start]
        if len(starts) <= self.max_turns:
            return unchanged_except_superseded(split, self.estimator)
        cut = starts[len(starts) - self.max_turns]
        return archiving(split, real[starts[0] : cut], self.estimator)

    def __repr__(self) -> str:
        return f"TurnWindowCompactionStrategy(max_turns={self.max_turns!r})"


class TokenCountCompactionStrategy:
    """Keeps the newest real events that fit in ``max_tokens``, whole turns only.

    The latest system message and the summary events are counted first; the real events fill
    what is left, newest first, until the next one would not fit. The cut then moves forward to
    a turn start, so the kept window is within budget, except that the newest turn is always
    kept, even over budget. Each event is estimated as one formatted line.

    Raises:
        UsageError: ``max_tokens`` is not a positive int.
    """

    __slots__ = ("estimator", "max_tokens")

    def __init__(
        self, max_tokens: int = 4000, *, estimator: TokenCountEstimator | None = None
    ) -> None:
        self.max_tokens: int = positive_int(max_tokens, "max_tokens")
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Archive the oldest whole turns that do not fit in ``max_tokens``."""
        split = split_events(events_of(request, "TokenCountCompactionStrategy.compact"))
        real = split.real
        fixed = [*split.synthetic, *([split.pinned] if split.pinned else [])]
        remaining = self.max_tokens - tokens_of(fixed, self.estimator)
        used = 0
        raw_cut = len(real)
        for index in range(len(real) - 1, -1, -1):
            cost = self.estimator.estimate(format_event(real[index]))
            if used + cost > remaining:
                break
            used += cost
            raw_cut = index
        cut = select_cut(real, raw_cut)
        if cut == 0:
            return unchanged_except_superseded(split, self.estimator)
        return archiving(split, real[:cut], self.estimator)

    def __repr__(self) -> str:
        return f"TokenCountCompactionStrategy(max_tokens={self.max_tokens!r})"


class RecursiveSummarizationCompactionStrategy:
    """Replaces the oldest turns with a summary turn written by a model.

    When there are more than ``max_events_to_keep`` real events, the oldest whole turns are cut
    as the sliding window does; the model summarizes them, folding in the previous summary, and
    the summary turn (the synthetic ``shadow_prompt`` user message and the synthetic summary,
    same timestamp, ``COMPACTION_SOURCE`` ``"recursive-summarization"``) goes immediately
    before the kept window. The summarized events and the previous summary turn are archived in
    place. The first ``overlap_size`` kept events are shown to the model as upcoming context, so
    the summary leads into them; they are not summarized. Stored system messages are never sent
    to the summarizer.

    If the summarizer raises or returns a blank summary, nothing is summarized or archived
    (except superseded system messages), a warning is logged, ``on_failure`` is called, and the
    result's ``error`` says what happened.

    Args:
        summarizer: the model that writes summaries.
        max_events_to_keep: how many real events stay active, about (whole turns).
        overlap_size: how many kept events the model sees as upcoming context.
        system_prompt: the summarizer's instructions.
        shadow_prompt: the text of the synthetic user message opening the summary turn.
        estimator: estimates ``tokens_estimated_saved``.
        event_formatter: renders events for the prompt and the token estimates.
        on_failure: called (sync or async) with the request and the error when no summary
            could be written; its own exceptions are logged and ignored.
        clock: the time source for the summary turn's timestamp.
        memory_flush: before summarizing, give the turns about to be archived to this flush
            (e.g. ``asyncsession.openai.ModelMemoryFlush``) so durable facts reach long-term
            memory; a failed flush is logged and never blocks the compaction.

    Raises:
        UsageError: a limit is out of range, or ``overlap_size >= max_events_to_keep``.
    """

    __slots__ = (
        "clock",
        "estimator",
        "event_formatter",
        "max_events_to_keep",
        "memory_flush",
        "on_failure",
        "overlap_size",
        "shadow_prompt",
        "summarizer",
        "system_prompt",
    )

    def __init__(
        self,
        summarizer: Summarizer,
        *,
        max_events_to_keep: int = 10,
        overlap_size: int = 2,
        system_prompt: str = DEFAULT_SUMMARIZER_SYSTEM_PROMPT,
        shadow_prompt: str = DEFAULT_SHADOW_PROMPT,
        estimator: TokenCountEstimator | None = None,
        event_formatter: EventFormatter = format_event,
        on_failure: OnSummarizationFailure | None = None,
        clock: Callable[[], datetime] = utc_now,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        if isinstance(summarizer, type) or not isinstance(summarizer, Summarizer):
            raise UsageError(f"summarizer must have an async summarize() method: {summarizer!r}")
        self.max_events_to_keep: int = positive_int(max_events_to_keep, "max_events_to_keep")
        if isinstance(overlap_size, bool) or not isinstance(overlap_size, int) or overlap_size < 0:
            raise UsageError(f"overlap_size must be an int >= 0, not {overlap_size!r}")
        if overlap_size >= max_events_to_keep:
            raise UsageError(
                f"overlap_size ({overlap_size}) must be smaller than max_events_to_keep "
                f"({max_events_to_keep})"
            )
        for name, text in (("system_prompt", system_prompt), ("shadow_prompt", shadow_prompt)):
            if not isinstance(text, str) or not text.strip():
                raise UsageError(f"{name} must be a non-empty string")
        self.summarizer: Summarizer = summarizer
        self.overlap_size: int = overlap_size
        self.system_prompt: str = system_prompt
        self.shadow_prompt: str = shadow_prompt
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )
        self.event_formatter: EventFormatter = event_formatter
        self.on_failure: OnSummarizationFailure | None = on_failure
        self.clock: Callable[[], datetime] = clock
        self.memory_flush: MemoryFlush | None = memory_flush

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Summarize and archive the oldest whole turns beyond ``max_events_to_keep``."""
        split = split_events(events_of(request, "RecursiveSummarizationCompactionStrategy.compact"))
        real = split.real
        if len(real) <= self.max_events_to_keep:
            return self._unchanged(split)
        cut = select_cut(real, len(real) - self.max_events_to_keep)
        if cut == 0:
            return self._unchanged(split)
        to_summarize = real[:cut]
        upcoming = real[cut : cut + self.overlap_size]
        await run_memory_flush(self.memory_flush, request, to_summarize, seconds=60.0)
        prompt = self.build_prompt(split.synthetic, to_summarize, upcoming)
        try:
            summary = await self.summarizer.summarize(self.system_prompt, prompt)
        except CompactionError as exc:
            return await self._failed(request, split, exc)
        except Exception as exc:
            error = CompactionError(f"the summarizer failed: {exc!r}")
            error.__cause__ = exc
            return await self._failed(request, split, error)
        if not isinstance(summary, str) or not summary.strip():
            error = CompactionError(f"the summarizer returned an empty summary: {summary!r}")
            return await self._failed(request, split, error)
        return self._summarized(request, split, to_summarize, real[cut], summary.strip())

    def build_prompt(
        self,
        prior: Sequence[SessionEvent],
        to_summarize: Sequence[SessionEvent],
        upcoming: Sequence[SessionEvent],
    ) -> str:
        """The user prompt sent to the summarizer.

        Sections, each followed by a blank line: ``=== PRIOR SUMMARY ===`` with the text of the
        previous summary (only when there is one), ``=== CONVERSATION TO SUMMARIZE ===`` with one
        formatted line per event, ``=== UPCOMING CONTEXT (do not summarize — for continuity
        only) ===`` (only with an overlap), and finally ``Please write the summary now:``.
        System messages are never included.
        """
        lines: list[str] = []
        prior_texts = [
            event.text
            for event in prior
            if event.type != EventType.USER and event.text is not None and event.text.strip()
        ]
        if prior_texts:
            lines += ["=== PRIOR SUMMARY ===", *prior_texts, ""]
        lines.append("=== CONVERSATION TO SUMMARIZE ===")
        lines += [self.event_formatter(e) for e in to_summarize if e.type != EventType.SYSTEM]
        lines.append("")
        overlap = [self.event_formatter(e) for e in upcoming if e.type != EventType.SYSTEM]
        if overlap:
            lines += [
                "=== UPCOMING CONTEXT (do not summarize — for continuity only) ===",
                *overlap,
                "",
            ]
        lines.append("Please write the summary now:")
        return "\n".join(lines)

    def _tokens(self, events: Sequence[SessionEvent]) -> int:
        return tokens_of(events, self.estimator, self.event_formatter)

    def _unchanged(self, split: EventSplit) -> CompactionResult:
        return unchanged_except_superseded(split, self.estimator, self.event_formatter)

    def _summarized(
        self,
        request: CompactionRequest,
        split: EventSplit,
        to_summarize: Sequence[SessionEvent],
        first_kept: SessionEvent,
        summary: str,
    ) -> CompactionResult:
        now = self.clock()
        metadata: dict[str, JsonValue] = {
            SYNTHETIC: True,
            COMPACTION_SOURCE: RECURSIVE_SUMMARIZATION_SOURCE,
        }
        session_id = request.session.id
        pair = (
            SessionEvent(
                session_id=session_id,
                timestamp=now,
                message=UserMessage(text=self.shadow_prompt),
                metadata=dict(metadata),
            ),
            SessionEvent(
                session_id=session_id,
                timestamp=now,
                message=AssistantMessage(text=summary),
                metadata=dict(metadata),
            ),
        )
        # The previous summary turn is folded into the new one: it leaves the window too.
        gone = {e.id for e in (*to_summarize, *split.superseded, *split.synthetic)}
        compacted: list[SessionEvent] = []
        for event in split.events:
            if event.id == first_kept.id:
                compacted.extend(pair)
            if event.id not in gone:
                compacted.append(event)
        archived_real = [e for e in split.events if e.id in gone and not e.is_synthetic]
        saved = self._tokens(archived_real) + self._tokens(split.synthetic) - self._tokens(pair)
        return CompactionResult(
            compacted_events=tuple(compacted),
            archived_events=tuple(e for e in split.events if e.id in gone),
            tokens_estimated_saved=max(0, saved),
        )

    async def _failed(
        self, request: CompactionRequest, split: EventSplit, error: CompactionError
    ) -> CompactionResult:
        logger.warning(
            "Recursive summarization of session %r left the log unchanged: %s",
            request.session.id,
            error,
        )
        if self.on_failure is not None:
            try:
                outcome = self.on_failure(request, error)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("on_failure callback of %r raised", self)
        return dataclasses.replace(self._unchanged(split), error=str(error))

    def __repr__(self) -> str:
        return (
            "RecursiveSummarizationCompactionStrategy("
            f"{self.summarizer!r}, max_events_to_keep={self.max_events_to_keep!r}, "
            f"overlap_size={self.overlap_size!r})"
        )
