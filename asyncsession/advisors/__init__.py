"""Advisors: your code around a chat call, and the advisors the library ships.

A client runs its ``advisors`` around the whole turn (once per call) and its ``model_advisors``
around each model call (once per round of the tool loop), each list in the order given, the
first outermost.

- `Advisor`, `BaseAdvisor`, `CallContext`, `ChunkStream`, `CallNext`, `StreamNext`: write one.
- `AutoMemoryToolsAdvisor`: long-term memory tools and prompt, per user.
- `SessionRecallAdvisor`: ``conversation_search`` over the session's whole log.
- `MessageFilter`: which messages a turn stores.
- `EventIdGenerator`, `IdempotentSessionEventIdGenerator`: the ids of stored events.
- The reference's context keys, which name the same values as the call's keywords.
"""

from ._auto_memory import AutoMemoryToolsAdvisor
from ._base import (
    EVENT_FILTER_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    Advisor,
    BaseAdvisor,
    CallContext,
    CallNext,
    ChunkStream,
    MessageFilter,
    StreamNext,
)
from ._ids import EventIdGenerator, IdempotentSessionEventIdGenerator
from ._recall import SessionRecallAdvisor

__all__ = [
    "EVENT_FILTER_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "USER_ID_CONTEXT_KEY",
    "Advisor",
    "AutoMemoryToolsAdvisor",
    "BaseAdvisor",
    "CallContext",
    "CallNext",
    "ChunkStream",
    "EventIdGenerator",
    "IdempotentSessionEventIdGenerator",
    "MessageFilter",
    "SessionRecallAdvisor",
    "StreamNext",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (
    AutoMemoryToolsAdvisor,
    Advisor,
    BaseAdvisor,
    CallContext,
    ChunkStream,
    EventIdGenerator,
    IdempotentSessionEventIdGenerator,
    MessageFilter,
    SessionRecallAdvisor,
):
    _public.__module__ = __name__
