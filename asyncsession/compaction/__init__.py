"""Compaction: keep long sessions inside the model's context window without losing anything.

Old turns are archived (kept and searchable), optionally replaced by a summary turn. A trigger
decides when, a strategy decides what, and the result is applied as a
:class:`CompactionPlan` with a compare-and-swap on the session's version::

    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(openai_client, "gpt-4.1-mini"), max_events_to_keep=12
    )
    result = await service.compact(session_id, TurnCountTrigger(20), strategy)

- Triggers: :class:`TurnCountTrigger`, :class:`TokenCountTrigger`, :func:`any_of`,
  :func:`all_of`, or any function of a :class:`CompactionRequest` returning a bool.
- Strategies: :class:`SlidingWindowCompactionStrategy`, :class:`TurnWindowCompactionStrategy`,
  :class:`TokenCountCompactionStrategy`, :class:`RecursiveSummarizationCompactionStrategy`.
- Models and tokens: :class:`Summarizer` (:class:`OpenAISummarizer`) and
  :class:`TokenCountEstimator` (:class:`HeuristicTokenCountEstimator`).
- Background work: `CompactionWorker` in this process; a durable queue shared by every process,
  `MongoCompactionQueue`, drained by `MongoCompactionWorker` processes (the
  ``asyncsession worker`` command). They take any `Compactor` (a ``SessionService``) and share
  one interface, `CompactionQueue`.
"""

from ..plans import CompactionPlan, CompactionResult, Insert
from ._pipeline import EventFormatter, format_event
from .compactor import CompactionQueue, Compactor
from .mongo_queue import CompactionJob, CompactionLease, JobState, MongoCompactionQueue
from .mongo_worker import MongoCompactionWorker, WakeMode
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
    CompactionTrigger,
    TokenCountTrigger,
    TriggerLike,
    TurnCountTrigger,
    all_of,
    any_of,
    should_compact,
)
from .worker import CompactionOutcome, CompactionTicket, CompactionWorker

__all__ = [
    "DEFAULT_SHADOW_PROMPT",
    "DEFAULT_SUMMARIZER_SYSTEM_PROMPT",
    "RECURSIVE_SUMMARIZATION_SOURCE",
    "CompactionJob",
    "CompactionLease",
    "CompactionOutcome",
    "CompactionPlan",
    "CompactionQueue",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTicket",
    "CompactionTrigger",
    "CompactionWorker",
    "Compactor",
    "EventFormatter",
    "HeuristicTokenCountEstimator",
    "Insert",
    "JobState",
    "MongoCompactionQueue",
    "MongoCompactionWorker",
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
    "WakeMode",
    "all_of",
    "any_of",
    "format_event",
    "should_compact",
]
