"""The chat turn: one object that owns the steps of a call in order (see `asyncsession._turn.turn`).

The clients in ``asyncsession.openai`` build a `Turn` per call; advisors go around it.
"""

from .log import (
    SERVER_COMPACTION_STRATEGY,
    SERVER_COMPACTION_TRIGGER,
    Compaction,
    compacted_during,
)
from .turn import RETURNED_METADATA_KEY, SessionMemory, StoreQuestion, Turn, request_event_id

__all__ = [
    "RETURNED_METADATA_KEY",
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "Compaction",
    "SessionMemory",
    "StoreQuestion",
    "Turn",
    "compacted_during",
    "request_event_id",
]
