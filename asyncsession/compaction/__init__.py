"""Compaction: keep long sessions inside the model's context window without losing anything.

Old turns are archived (kept and searchable), optionally replaced by a summary turn. A trigger
decides when, a strategy decides what, and the result is applied as a
:class:`CompactionPlan` with a compare-and-swap on the session's version::

    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(openai_client, "gpt-4.1-mini"), max_events_to_keep=12
    )
    result = await service.compact(session_id, TurnCountTrigger(20), strategy)

- Triggers: :class:`TurnCountTrigger`, :class:`TokenCountTrigger`,
  :class:`ContextWindowTrigger` (on the usage the model reported), :func:`any_of`,
  :func:`all_of`, or any function of a :class:`CompactionRequest` returning a bool.
- Strategies: :class:`SlidingWindowCompactionStrategy`, :class:`TurnWindowCompactionStrategy`,
  :class:`TokenCountCompactionStrategy`, :class:`RecursiveSummarizationCompactionStrategy`.
- Models and tokens: :class:`Summarizer` (:class:`OpenAISummarizer`) and
  :class:`TokenCountEstimator` (:class:`HeuristicTokenCountEstimator`).
- Memory flush before archiving: :class:`MemoryFlush`, :class:`MemoryFlushingCompactionStrategy`.
- Background work: :class:`CompactionWorker`.
"""

from ..plans import CompactionPlan, CompactionResult, Insert
from ._pipeline import EventFormatter, format_event
from .flush import MemoryFlush, MemoryFlushingCompactionStrategy, run_memory_flush
from .request import CompactionRequest
from .strategies import (
    DEFAULT_SHADOW_PROMPT,
    RECURSIVE_SUMMARIZATION_SOURCE,
    CompactionStrategy,
    OnSummarizationFailure,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from .summarizer import DEFAULT_SUMMARIZER_SYSTEM_PROMPT, OpenAISummarizer, Summarizer
from .tokens import HeuristicTokenCountEstimator, TokenCountEstimator
from .triggers import (
    USAGE_METADATA_KEY,
    CompactionTrigger,
    ContextWindowTrigger,
    TokenCountTrigger,
    TriggerLike,
    TurnCountTrigger,
    all_of,
    any_of,
    should_compact,
    usage_metadata,
)
from .worker import CompactionOutcome, CompactionTicket, CompactionWorker

__all__ = [
    "DEFAULT_SHADOW_PROMPT",
    "DEFAULT_SUMMARIZER_SYSTEM_PROMPT",
    "RECURSIVE_SUMMARIZATION_SOURCE",
    "USAGE_METADATA_KEY",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTicket",
    "CompactionTrigger",
    "CompactionWorker",
    "ContextWindowTrigger",
    "EventFormatter",
    "HeuristicTokenCountEstimator",
    "Insert",
    "MemoryFlush",
    "MemoryFlushingCompactionStrategy",
    "OnSummarizationFailure",
    "OpenAISummarizer",
    "RecursiveSummarizationCompactionStrategy",
    "SlidingWindowCompactionStrategy",
    "Summarizer",
    "TokenCountCompactionStrategy",
    "TokenCountEstimator",
    "TokenCountTrigger",
    "TriggerLike",
    "TurnCountTrigger",
    "TurnWindowCompactionStrategy",
    "all_of",
    "any_of",
    "format_event",
    "run_memory_flush",
    "should_compact",
    "usage_metadata",
]
