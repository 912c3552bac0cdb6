"""Compaction: keep long sessions inside the model's context window without losing anything.

Old turns leave the active view (they stay in the log, archived and searchable), optionally
replaced by a summary turn. A trigger decides when, a strategy decides what, and the result is
appended as one commit (the summaries, then a ``COMPACTION`` event naming the new view) with a
compare-and-swap on the session's version::

    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(openai_client, "gpt-4.1-mini"), max_events_to_keep=12
    )
    result = await service.compact(session_id, TurnCountTrigger(20), strategy)

- Triggers: [`TurnCountTrigger`][asyncsession.compaction.TurnCountTrigger],
  [`TokenCountTrigger`][asyncsession.compaction.TokenCountTrigger],
  [`ContextWindowTrigger`][asyncsession.compaction.ContextWindowTrigger] (on the usage the model
  reported), [`any_of`][asyncsession.compaction.any_of], [`all_of`][asyncsession.compaction.all_of],
  or any function of a [`CompactionRequest`][asyncsession.compaction.CompactionRequest] returning a
  bool.
- Strategies:
  [`SlidingWindowCompactionStrategy`][asyncsession.compaction.SlidingWindowCompactionStrategy],
  [`TurnWindowCompactionStrategy`][asyncsession.compaction.TurnWindowCompactionStrategy],
  [`TokenCountCompactionStrategy`][asyncsession.compaction.TokenCountCompactionStrategy],
  `RecursiveSummarizationCompactionStrategy`, and Spring AI 2.1's
  [`WindowCompactionStrategy`][asyncsession.compaction.WindowCompactionStrategy] (by turns or
  by events).
- Models and tokens: [`Summarizer`][asyncsession.compaction.Summarizer]
  ([`OpenAISummarizer`][asyncsession.openai.OpenAISummarizer] in `asyncsession.openai`) and
  [`TokenCountEstimator`][asyncsession.compaction.TokenCountEstimator]
  ([`HeuristicTokenCountEstimator`][asyncsession.compaction.HeuristicTokenCountEstimator]).
- Memory flush before archiving: `MemoryFlush`, `MemoryFlushingCompactionStrategy`.
- Background work: [`CompactionWorker`][asyncsession.compaction.CompactionWorker] in this
  process; a durable queue shared by every process,
  [`MongoCompactionQueue`][asyncsession.compaction.MongoCompactionQueue], drained by
  [`MongoCompactionWorker`][asyncsession.compaction.MongoCompactionWorker] processes (the
  ``asyncsession worker`` command). They take any `Compactor` (a ``SessionService``) and share
  one interface, `CompactionQueue`.
"""

from ..compaction_protocols import CompactionRequest, CompactionResult
from ._pipeline import EventFormatter, format_event
from .compactor import CompactionQueue, Compactor
from .flush import MemoryFlush, MemoryFlushingCompactionStrategy, run_memory_flush
from .mongo import (
    CompactionJob,
    CompactionLease,
    MongoCompactionQueue,
    MongoCompactionWorker,
)
from .strategies import (
    CompactionStrategy,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from .summarizer import Summarizer
from .tokens import HeuristicTokenCountEstimator, TokenCountEstimator
from .triggers import (
    CompactionTrigger,
    ContextWindowTrigger,
    TokenCountTrigger,
    TurnCountTrigger,
    all_of,
    any_of,
    should_compact,
    usage_metadata,
)
from .window import WindowCompactionStrategy
from .worker import CompactionOutcome, CompactionTicket, CompactionWorker

__all__ = [
    "CompactionJob",
    "CompactionLease",
    "CompactionOutcome",
    "CompactionQueue",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTicket",
    "CompactionTrigger",
    "CompactionWorker",
    "Compactor",
    "ContextWindowTrigger",
    "EventFormatter",
    "HeuristicTokenCountEstimator",
    "MemoryFlush",
    "MemoryFlushingCompactionStrategy",
    "MongoCompactionQueue",
    "MongoCompactionWorker",
    "RecursiveSummarizationCompactionStrategy",
    "SlidingWindowCompactionStrategy",
    "Summarizer",
    "TokenCountCompactionStrategy",
    "TokenCountEstimator",
    "TokenCountTrigger",
    "TurnCountTrigger",
    "TurnWindowCompactionStrategy",
    "WindowCompactionStrategy",
    "all_of",
    "any_of",
    "format_event",
    "run_memory_flush",
    "should_compact",
    "usage_metadata",
]
