"""Compaction strategies: what to archive, and what (if anything) replaces it.

A strategy is pure: it turns a `CompactionRequest` into a `CompactionResult` and never touches
the repository. The built-in ones sort the events first (`split_events`), cut only the real
events (user and assistant messages, tool results) at a turn start (`select_cut`), and never
reorder the log; the guarantees are listed in the compaction guide.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Final, Protocol, TypeAlias, cast, runtime_checkable

from pydantic import JsonValue

from .._compaction_pass import (
    EventFormatter,
    MemoryFlush,
    TokenCountEstimator,
    format_event,
    spliced,
)
from ..compaction_protocols import CompactionRequest, CompactionResult
from ..events import COMPACTION_SOURCE, SYNTHETIC, EventType, SessionEvent, utc_now
from ..exceptions import CompactionError, UsageError
from ..messages import AssistantMessage, UserMessage
from ._tokens import estimator_or_default, tokens_of

logger: logging.Logger = logging.getLogger("asyncsession.compaction.strategies")

DEFAULT_SHADOW_PROMPT: Final = "Summarize the conversation we had so far."
"""The synthetic user message that opens a summary turn."""
RECURSIVE_SUMMARIZATION_SOURCE: Final = "recursive-summarization"
"""The ``COMPACTION_SOURCE`` of the summary turns recursive summarization writes."""
MEMORY_FLUSH_SECONDS: Final = 60.0
"""How long a memory flush may take before the compaction goes on without it."""

DEFAULT_SUMMARIZER_SYSTEM_PROMPT: Final = """\
You condense conversations between a user and an AI assistant. Your summary will stand in for \
the messages it covers: the assistant will see only the summary and the messages that follow \
it, so it must carry everything needed to continue the conversation without a gap.

Keep:
- the facts, names, numbers and decisions that were established;
- what the user wants, prefers or asked to avoid;
- what the assistant did or found, and the outcome of tool calls that still matters;
- open questions, unfinished tasks and anything either side promised to do next.

Write in the third person ("The user asked ...", "The assistant found ..."), as a short narrative \
in plain prose, without greetings or commentary about the summary itself. Leave out small talk \
and details that no longer matter. If a prior summary is given, fold its content into the new \
summary in your own words instead of repeating it verbatim. Text marked as upcoming context is \
only there so the summary leads into it; do not summarize it."""
"""The default system prompt of recursive summarization."""

OnSummarizationFailure: TypeAlias = Callable[
    [CompactionRequest, CompactionError], Awaitable[object] | object
]
"""Called (sync or async) when a summary could not be written; the error says why."""


@runtime_checkable
class Summarizer(Protocol):
    """Writes a summary with a model (``asyncsession.openai.OpenAISummarizer`` calls OpenAI)."""

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        """The model's answer to ``prompt`` under ``system_prompt``: the summary text.

        Raise (any exception) when the model cannot be reached; the strategy then leaves the log
        untouched and reports the failure.
        """
        ...


async def run_memory_flush(
    flush: MemoryFlush | None, request: CompactionRequest, events: Sequence[SessionEvent]
) -> None:
    """Run ``flush`` over the real messages among ``events``, bounded in time; a failure is
    logged and never blocks the compaction (only cancellation propagates)."""
    real = [e for e in events if e.is_message and not e.is_synthetic]
    if flush is None or not real:
        return
    try:
        async with asyncio.timeout(MEMORY_FLUSH_SECONDS):
            await flush.flush(request, real)
    except Exception:
        logging.getLogger("asyncsession.compaction").warning(
            "Memory flush of session %r failed; compacting anyway",
            request.session.id,
            exc_info=True,
        )


def positive_int(value: object, name: str) -> int:
    """``value`` if it is a positive ``int`` (not a ``bool``); else a `UsageError`."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise UsageError(f"{name} must be a positive int, not {value!r}")
    return value


def events_of(request: CompactionRequest, where: str) -> tuple[SessionEvent, ...]:
    """The events of ``request``; a `UsageError` naming ``where`` if it is not a request."""
    given = cast(object, request)  # callers outside the type checker may pass anything
    if not isinstance(given, CompactionRequest):
        raise UsageError(f"{where} needs a CompactionRequest, not {given!r}")
    return request.events


@dataclass(frozen=True, slots=True)
class EventSplit:
    """The active events of a request, sorted into the roles compaction treats differently."""

    events: tuple[SessionEvent, ...]
    pinned: SessionEvent | None
    superseded: tuple[SessionEvent, ...]
    synthetic: tuple[SessionEvent, ...]
    real: tuple[SessionEvent, ...]

    @property
    def budgeted(self) -> list[SessionEvent]:
        """What a token budget counts: the pinned system message, synthetic and real events."""
        counted = {e.id for e in (*self.real, *self.synthetic)}
        if self.pinned is not None:
            counted.add(self.pinned.id)
        return [e for e in self.events if e.id in counted]


def split_events(events: Sequence[SessionEvent]) -> EventSplit:
    """Sort events into pinned, superseded, synthetic and real; custom events are in none."""
    stored_system = [
        e for e in events if e.is_message and e.type == EventType.SYSTEM and not e.is_synthetic
    ]
    return EventSplit(
        events=tuple(events),
        pinned=stored_system[-1] if stored_system else None,
        superseded=tuple(stored_system[:-1]),
        synthetic=tuple(e for e in events if e.is_message and e.is_synthetic),
        real=tuple(
            e for e in events if e.is_message and not e.is_synthetic and e.type != EventType.SYSTEM
        ),
    )


def select_cut(real: Sequence[SessionEvent], cut: int) -> int:
    """``cut`` moved forward to the next turn start, and back to the newest turn start if it
    would archive everything (0, nothing, when there is no user message at all)."""
    cut = max(0, cut)
    while cut < len(real) and not real[cut].is_turn_start:
        cut += 1
    if cut < len(real):
        return cut
    return next((i for i in range(len(real) - 1, -1, -1) if real[i].is_turn_start), 0)


def by_events(real: Sequence[SessionEvent], keep: int) -> Sequence[SessionEvent]:
    """The real events to archive to keep about the newest ``keep``, whole turns only."""
    return real[: select_cut(real, len(real) - keep)] if len(real) > keep else ()


def by_turns(real: Sequence[SessionEvent], keep: int) -> Sequence[SessionEvent]:
    """The real events to archive to keep the newest ``keep`` turns (a preamble stays)."""
    starts = [index for index, event in enumerate(real) if event.is_turn_start]
    return real[starts[0] : starts[-keep]] if len(starts) > keep else ()


class _Strategy:
    """What the built-in strategies share: an estimator, a memory flush, and archiving the
    real events `_removed` chooses with the superseded system messages."""

    __slots__ = ("estimator", "memory_flush")

    def __init__(
        self, estimator: TokenCountEstimator | None, memory_flush: MemoryFlush | None
    ) -> None:
        self.estimator: TokenCountEstimator = estimator_or_default(estimator)
        if memory_flush is not None and (
            isinstance(memory_flush, type) or not isinstance(memory_flush, MemoryFlush)
        ):
            raise UsageError(
                "memory_flush must be a memory flush (with an async flush(request, events)), "
                f"not {memory_flush!r} (for a model that saves to memory: "
                "ModelMemoryFlush(client, store))"
            )
        self.memory_flush: MemoryFlush | None = memory_flush

    def _removed(self, split: EventSplit) -> Sequence[SessionEvent]:
        raise NotImplementedError

    def _format(self, event: SessionEvent) -> str:
        return format_event(event)

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Archive the oldest whole turns beyond the limit (and superseded system messages),
        after the memory flush, if any, has seen the turns that leave."""
        split = split_events(events_of(request, f"{type(self).__name__}.compact"))
        removed = self._removed(split)
        await run_memory_flush(self.memory_flush, request, removed)
        return self._archiving(split, removed)

    def _archiving(self, split: EventSplit, removed: Sequence[SessionEvent]) -> CompactionResult:
        gone = {e.id for e in (*removed, *split.superseded)}
        if not gone:
            return CompactionResult.unchanged(split.events)
        archived = tuple(e for e in split.events if e.id in gone)
        return CompactionResult(
            compacted_events=tuple(e for e in split.events if e.id not in gone),
            archived_events=archived,
            tokens_estimated_saved=tokens_of(archived, self.estimator, self._format),
        )


class SlidingWindowCompactionStrategy(_Strategy):
    """Keeps about the newest ``max_events`` real events, whole turns only.

    The cut falls ``max_events`` from the end and moves forward to the next turn start, so the
    kept window can be a little shorter; the newest turn is kept whole however long it is.
    Summary turns and the latest system message stay where they are and do not count.
    ``memory_flush`` (e.g. ``ModelMemoryFlush``) sees the archived turns first.

    Raises:
        UsageError: ``max_events`` is not a positive int.
    """

    __slots__ = ("max_events",)

    def __init__(
        self,
        max_events: int = 20,
        *,
        estimator: TokenCountEstimator | None = None,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        self.max_events: int = positive_int(max_events, "max_events")
        super().__init__(estimator, memory_flush)

    def _removed(self, split: EventSplit) -> Sequence[SessionEvent]:
        return by_events(split.real, self.max_events)

    def __repr__(self) -> str:
        return f"SlidingWindowCompactionStrategy(max_events={self.max_events!r})"


class TurnWindowCompactionStrategy(_Strategy):
    """Keeps the newest ``max_turns`` real turns.

    Real events before the first user message (a greeting, say) are a preamble that is always
    kept in place. Summary turns and the latest system message do not count as turns.
    ``memory_flush`` sees the archived turns first.

    Raises:
        UsageError: ``max_turns`` is not a positive int.
    """

    __slots__ = ("max_turns",)

    def __init__(
        self,
        max_turns: int = 10,
        *,
        estimator: TokenCountEstimator | None = None,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        self.max_turns: int = positive_int(max_turns, "max_turns")
        super().__init__(estimator, memory_flush)

    def _removed(self, split: EventSplit) -> Sequence[SessionEvent]:
        return by_turns(split.real, self.max_turns)

    def __repr__(self) -> str:
        return f"TurnWindowCompactionStrategy(max_turns={self.max_turns!r})"


class WindowCompactionStrategy(_Strategy):
    """Spring AI 2.1's window: the newest ``last_turns`` turns (as
    `TurnWindowCompactionStrategy`), or about the newest ``last_events`` real events, whole turns
    only (as `SlidingWindowCompactionStrategy`). Give one of the two; with neither, it keeps the
    newest ten turns.

    Raises:
        UsageError: both are given, or the one given is not a positive int.
    """

    __slots__ = ("last_events", "last_turns")

    def __init__(
        self,
        *,
        last_turns: int | None = None,
        last_events: int | None = None,
        estimator: TokenCountEstimator | None = None,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        if last_turns is not None and last_events is not None:
            raise UsageError("give WindowCompactionStrategy last_turns or last_events, not both")
        self.last_events: int | None = None
        """The events kept, or ``None`` for a window by turns."""
        self.last_turns: int | None = None
        """The turns kept, or ``None`` for a window by events."""
        if last_events is not None:
            self.last_events = positive_int(last_events, "max_events")
        else:
            self.last_turns = positive_int(10 if last_turns is None else last_turns, "max_turns")
        super().__init__(estimator, memory_flush)

    def _removed(self, split: EventSplit) -> Sequence[SessionEvent]:
        if self.last_events is not None:
            return by_events(split.real, self.last_events)
        assert self.last_turns is not None
        return by_turns(split.real, self.last_turns)

    def __repr__(self) -> str:
        if self.last_events is not None:
            return f"WindowCompactionStrategy(last_events={self.last_events!r})"
        return f"WindowCompactionStrategy(last_turns={self.last_turns!r})"


class TokenCountCompactionStrategy(_Strategy):
    """Keeps the newest real events that fit in ``max_tokens``, whole turns only.

    The latest system message and the summary events are counted first; the real events fill
    what is left, newest first, until the next one would not fit. The cut then moves forward to
    a turn start, so the kept window is within budget, except that the newest turn is always
    kept, even over budget. Each event is estimated as one formatted line. ``memory_flush`` sees
    the archived turns first.

    Raises:
        UsageError: ``max_tokens`` is not a positive int.
    """

    __slots__ = ("max_tokens",)

    def __init__(
        self,
        max_tokens: int = 4000,
        *,
        estimator: TokenCountEstimator | None = None,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        self.max_tokens: int = positive_int(max_tokens, "max_tokens")
        super().__init__(estimator, memory_flush)

    def _removed(self, split: EventSplit) -> Sequence[SessionEvent]:
        real = split.real
        fixed = [*split.synthetic, *([split.pinned] if split.pinned else [])]
        remaining = self.max_tokens - tokens_of(fixed, self.estimator)
        cut = len(real)
        for index in range(len(real) - 1, -1, -1):
            remaining -= self.estimator.estimate(format_event(real[index]))
            if remaining < 0:
                break
            cut = index
        return real[: select_cut(real, cut)]

    def __repr__(self) -> str:
        return f"TokenCountCompactionStrategy(max_tokens={self.max_tokens!r})"


class RecursiveSummarizationCompactionStrategy(_Strategy):
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
        "event_formatter",
        "max_events_to_keep",
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
        super().__init__(estimator, memory_flush)
        self.summarizer: Summarizer = summarizer
        self.overlap_size: int = overlap_size
        self.system_prompt: str = system_prompt
        self.shadow_prompt: str = shadow_prompt
        self.event_formatter: EventFormatter = event_formatter
        self.on_failure: OnSummarizationFailure | None = on_failure
        self.clock: Callable[[], datetime] = clock

    def _format(self, event: SessionEvent) -> str:
        return self.event_formatter(event)

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Summarize and archive the oldest whole turns beyond ``max_events_to_keep``."""
        split = split_events(events_of(request, "RecursiveSummarizationCompactionStrategy.compact"))
        to_summarize = by_events(split.real, self.max_events_to_keep)
        if not to_summarize:
            return self._archiving(split, ())
        cut = len(to_summarize)
        await run_memory_flush(self.memory_flush, request, to_summarize)
        upcoming = split.real[cut : cut + self.overlap_size]
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
        return self._summarized(request, split, to_summarize, split.real[cut], summary.strip())

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
        pair = tuple(
            SessionEvent(
                session_id=request.session.id, timestamp=now, message=message, metadata={**metadata}
            )
            for message in (UserMessage(text=self.shadow_prompt), AssistantMessage(text=summary))
        )
        # The previous summary turn is folded into the new one: it leaves the window too.
        gone = {e.id for e in (*to_summarize, *split.superseded, *split.synthetic)}
        archived = tuple(e for e in split.events if e.id in gone)
        saved = tokens_of(archived, self.estimator, self.event_formatter) - tokens_of(
            pair, self.estimator, self.event_formatter
        )
        return CompactionResult(
            compacted_events=spliced(split.events, pair, first_kept.id, gone),
            archived_events=archived,
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
        return dataclasses.replace(self._archiving(split, ()), error=str(error))

    def __repr__(self) -> str:
        return (
            "RecursiveSummarizationCompactionStrategy("
            f"{self.summarizer!r}, max_events_to_keep={self.max_events_to_keep!r}, "
            f"overlap_size={self.overlap_size!r})"
        )
