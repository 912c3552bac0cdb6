"""The chat turn: one object that owns the steps of a call in order (see `asyncsession._turn.turn`).

The clients in ``asyncsession.openai`` build a `Turn` per call; advisors go around it.
"""

from .calls import Decisions
from .compaction import SERVER_COMPACTION_STRATEGY, SERVER_COMPACTION_TRIGGER
from .log import (
    Compaction,
    SessionMemory,
    StoreQuestion,
    request_event_id,
)
from .turn import Turn

__all__ = [
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "Compaction",
    "Decisions",
    "SessionMemory",
    "StoreQuestion",
    "Turn",
    "request_event_id",
]
