"""Compaction: keep long sessions inside the model's context window without losing anything.

Old turns leave the active view (they stay in the log, archived and searchable), optionally
replaced by a summary turn. A trigger decides when, a strategy decides what, and the result is
appended as one commit (the summaries, then a ``COMPACTION`` event naming the new view) with a
compare-and-swap on the session's version::

    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(openai_client, "gpt-4.1-mini"), max_events_to_keep=12
    )
    result = await service.compact(session_id, TurnCountTrigger(20), strategy)

- Triggers: `TurnCountTrigger`, `TokenCountTrigger`, `ContextWindowTrigger` (on the usage the
  model reported), `any_of`, `all_of`, or any function of a `CompactionRequest` returning a bool.
- Strategies: `SlidingWindowCompactionStrategy`, `TurnWindowCompactionStrategy`,
  `TokenCountCompactionStrategy`, `RecursiveSummarizationCompactionStrategy` (with a
  `Summarizer`, e.g. ``asyncsession.openai.OpenAISummarizer``), and Spring AI 2.1's
  `WindowCompactionStrategy` (by turns or by events). Each takes an ``estimator`` (any object
  with ``estimate(text) -> int``; `HeuristicTokenCountEstimator` by default) and a
  ``memory_flush`` (e.g. ``asyncsession.openai.ModelMemoryFlush``) that sees the turns about to
  be archived first.
- Background work: `CompactionWorker` in this process; a durable queue shared by every process,
  `MongoCompactionQueue`, drained by `MongoCompactionWorker` processes (the
  ``asyncsession worker`` command). A client's ``compaction=`` takes any of the three.
"""

from ..compaction_protocols import (
    CompactionRecord,
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    CompactionTrigger,
)
from ._mongo_queue import MongoCompactionQueue
from ._mongo_worker import MongoCompactionWorker
from ._strategies import (
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    Summarizer,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
    WindowCompactionStrategy,
)
from ._tokens import HeuristicTokenCountEstimator
from ._triggers import ContextWindowTrigger, TokenCountTrigger, TurnCountTrigger, all_of, any_of
from ._worker import CompactionWorker

__all__ = [
    "CompactionRecord",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "CompactionWorker",
    "ContextWindowTrigger",
    "HeuristicTokenCountEstimator",
    "MongoCompactionQueue",
    "MongoCompactionWorker",
    "RecursiveSummarizationCompactionStrategy",
    "SlidingWindowCompactionStrategy",
    "Summarizer",
    "TokenCountCompactionStrategy",
    "TokenCountTrigger",
    "TurnCountTrigger",
    "TurnWindowCompactionStrategy",
    "WindowCompactionStrategy",
    "all_of",
    "any_of",
]
