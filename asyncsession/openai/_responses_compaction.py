"""``ResponsesCompactionStrategy``: compaction by the Responses API's ``responses.compact``."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any, Final

from openai import AsyncOpenAI
from openai.types.responses import CompactedResponse
from pydantic import JsonValue

from .._checks import require_estimator, require_open_client
from .._compaction_pass import MemoryFlush, TokenCountEstimator, format_event, spliced
from .._responses_items import items_to_messages, messages_to_items
from ..compaction import (
    CompactionRequest,
    CompactionResult,
    HeuristicTokenCountEstimator,
    SlidingWindowCompactionStrategy,
)
from ..events import COMPACTION_SOURCE, SYNTHETIC, EventType, SessionEvent, utc_now
from ..exceptions import CompactionError, UsageError
from ..messages import AssistantMessage, Message
from ._client import map_openai_errors

__all__ = ["COMPACTION_USAGE_KEY", "RESPONSES_COMPACT_SOURCE", "ResponsesCompactionStrategy"]

logger = logging.getLogger(__name__)

RESPONSES_COMPACT_SOURCE: Final = "responses-compact"
"""The ``COMPACTION_SOURCE`` of the events `ResponsesCompactionStrategy` writes."""
COMPACTION_USAGE_KEY: Final = "compactionUsage"
"""Metadata of the compaction item's event: ``{"input_tokens": n, "output_tokens": m}`` that
``responses.compact`` reported (kept apart from the ``usage`` key the context-window trigger
reads, which describes a reply's prompt)."""


class ResponsesCompactionStrategy:
    """Replaces the oldest turns with what ``client.responses.compact`` returns for them.

    It picks what leaves the active window as the sliding window does (whole turns beyond
    ``max_events_to_keep`` real events, never the newest turn), sends those events, after the
    compaction turn a previous pass wrote, to ``responses.compact``, and writes what comes back
    as the new compaction turn: the user messages the API keeps, then one assistant message
    whose only item is the opaque ``compaction`` item. The service applies the result with a
    compare-and-swap, so an append that lands meanwhile makes this pass lose (nothing written).
    Chat Completions cannot read a ``compaction`` item: for a session also answered by
    ``ChatClient``, use ``RecursiveSummarizationCompactionStrategy`` instead.

    If the call fails (or returns no ``compaction`` item), nothing is compacted or archived
    except superseded system messages, a warning is logged and the result's ``error`` says why.

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the model that compacts (it must be the model the conversation continues with).
        max_events_to_keep: how many real events stay active, about (whole turns).
        instructions: the ``instructions`` of the compact request.
        estimator: estimates ``tokens_estimated_saved``.
        clock: the time source for the compaction turn's timestamp.
        memory_flush: before the compact call, give the turns about to leave the window to this
            flush (e.g. ``ModelMemoryFlush``), as the other strategies do.

    Raises:
        UsageError: ``model`` is blank or ``max_events_to_keep`` is not a positive int.
    """

    __slots__ = ("_window", "clock", "estimator", "instructions", "model", "openai_client")

    def __init__(
        self,
        openai_client: AsyncOpenAI,
        *,
        model: str,
        max_events_to_keep: int = 10,
        instructions: str | None = None,
        estimator: TokenCountEstimator | None = None,
        clock: Callable[[], datetime] = utc_now,
        memory_flush: MemoryFlush | None = None,
    ) -> None:
        require_open_client(openai_client, "openai_client")
        if not isinstance(model, str) or not model.strip():
            raise UsageError(f"model must be a non-empty string, not {model!r}")
        self.openai_client = openai_client
        """The SDK client."""
        self.model = model
        """The model that compacts."""
        self.instructions = instructions
        """The ``instructions`` of the compact request."""
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )
        """Estimates ``tokens_estimated_saved``."""
        self.clock = clock
        """The time source of the compaction turn."""
        self._window = SlidingWindowCompactionStrategy(
            max_events_to_keep, estimator=self.estimator, memory_flush=memory_flush
        )

    @property
    def max_events_to_keep(self) -> int:
        """How many real events stay active, about."""
        return self._window.max_events

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """Compact the turns beyond ``max_events_to_keep`` with ``responses.compact``."""
        window = await self._window.compact(request)
        cut = [e for e in window.archived_events if _is_conversation(e)]
        if not cut:
            return window
        prior = [e for e in window.compacted_events if e.is_synthetic and e.is_message]
        covered = [*prior, *cut]
        try:
            compacted = await self._call([e.message for e in covered if e.message is not None])
            turn = self._turn(request.session.id, compacted)
        except CompactionError as exc:
            logger.warning(
                "responses.compact of session %r left the log unchanged: %s",
                request.session.id,
                exc,
            )
            return _failed(request, window, exc)
        gone = {e.id for e in (*window.archived_events, *prior)}
        first = next(e for e in request.events if e.id in gone and _is_conversation(e))
        saved = self._tokens(covered) - self._tokens(turn)
        return CompactionResult(
            compacted_events=spliced(request.events, turn, first.id, gone),
            archived_events=tuple(e for e in request.events if e.id in gone),
            tokens_estimated_saved=max(0, saved),
        )

    async def _call(self, messages: Sequence[Message]) -> CompactedResponse:
        params: dict[str, Any] = {"model": self.model, "input": messages_to_items(messages)}
        if self.instructions is not None:
            params["instructions"] = self.instructions
        try:
            with map_openai_errors():
                return await self.openai_client.responses.compact(**params)
        except Exception as exc:
            raise CompactionError(f"responses.compact failed: {exc!r}") from exc

    def _turn(self, session_id: str, compacted: CompactedResponse) -> list[SessionEvent]:
        # The SDK types output messages as the assistant's; the user messages here are input
        # messages, so they are read as plain dicts, without the serializer's type warnings.
        output = [item.to_dict(warnings=False) for item in compacted.output]
        if not any(item.get("type") == "compaction" for item in output):
            raise CompactionError("responses.compact returned no compaction item")
        now = self.clock()
        usage = compacted.usage
        metadata: dict[str, JsonValue] = {
            SYNTHETIC: True,
            COMPACTION_SOURCE: RESPONSES_COMPACT_SOURCE,
        }
        turn: list[SessionEvent] = []
        for message in items_to_messages(output):
            extra: dict[str, JsonValue] = {}
            if isinstance(message, AssistantMessage):
                extra[COMPACTION_USAGE_KEY] = {
                    "input_tokens": usage.input_tokens,
                    "output_tokens": usage.output_tokens,
                }
            turn.append(
                SessionEvent(
                    session_id=session_id,
                    timestamp=now,
                    message=message,
                    metadata={**metadata, **extra},
                )
            )
        return turn

    def _tokens(self, events: Sequence[SessionEvent]) -> int:
        return sum(self.estimator.estimate(format_event(e)) for e in events)

    def __repr__(self) -> str:
        return (
            f"ResponsesCompactionStrategy(model={self.model!r}, "
            f"max_events_to_keep={self.max_events_to_keep!r})"
        )


def _is_conversation(event: SessionEvent) -> bool:
    """A real user or assistant message or tool result (not a stored system message)."""
    return event.is_message and event.type != EventType.SYSTEM and not event.is_synthetic


def _failed(
    request: CompactionRequest, window: CompactionResult, error: CompactionError
) -> CompactionResult:
    """Only the superseded system messages the window would archive leave; the error is kept."""
    superseded = [e for e in window.archived_events if not _is_conversation(e)]
    if not superseded:
        return dataclasses.replace(CompactionResult.unchanged(request.events), error=str(error))
    gone = {e.id for e in superseded}
    return CompactionResult(
        compacted_events=tuple(e for e in request.events if e.id not in gone),
        archived_events=tuple(superseded),
        error=str(error),
    )
