"""Advisors: your code around a chat call, and the advisors the library ships.

A client runs its ``advisors`` around the whole turn (once per call) and its ``model_advisors``
around each model call (once per round of the tool loop), each list in the order given, the
first outermost.

- `Advisor`, `CallContext`, `ChunkStream`: write one.
- `AutoMemoryToolsAdvisor`: long-term memory tools and prompt, per user.
- `SessionRecallAdvisor`: ``conversation_search`` over the session's whole log.
- `MessageFilter`: which messages a turn stores.
- `IdempotentSessionEventIdGenerator`: event ids derived from the message (the reference's).
- The reference's context keys, which name the same values as the call's keywords.
"""

from ..chat import (
    EVENT_FILTER_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    Advisor,
    CallContext,
    ChunkStream,
    MessageFilter,
)
from ._auto_memory import AutoMemoryToolsAdvisor
from ._ids import IdempotentSessionEventIdGenerator
from ._recall import SessionRecallAdvisor

__all__ = [
    "EVENT_FILTER_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "USER_ID_CONTEXT_KEY",
    "Advisor",
    "AutoMemoryToolsAdvisor",
    "CallContext",
    "ChunkStream",
    "IdempotentSessionEventIdGenerator",
    "MessageFilter",
    "SessionRecallAdvisor",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (AutoMemoryToolsAdvisor, IdempotentSessionEventIdGenerator, SessionRecallAdvisor):
    _public.__module__ = __name__
