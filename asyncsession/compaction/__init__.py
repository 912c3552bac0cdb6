"""Compaction: keep long sessions inside the model's context window without losing anything.

Old turns are archived (kept and searchable), optionally replaced by a summary turn. A trigger
decides when, a strategy decides what, and the result is applied as a
:class:`CompactionPlan` with a compare-and-swap on the session's version.
"""

from .plan import CompactionPlan, Insert
from .request import CompactionRequest, CompactionResult
from .strategies import CompactionStrategy
from .triggers import CompactionTrigger, TriggerLike, should_compact

__all__ = [
    "CompactionPlan",
    "CompactionRequest",
    "CompactionResult",
    "CompactionStrategy",
    "CompactionTrigger",
    "Insert",
    "TriggerLike",
    "should_compact",
]
