"""The advisor pipeline: ordered async advisors around every model call and stream.

- `Advisor`, `BaseAdvisor`, `CallContext`: the protocol, a base with ``before``/``after``
  hooks, and the per-call context.
- `SessionAdvisors`: the turn advisor and the memory advisor of one service, in one call.
- `SessionTurnAdvisor` (order ``SESSION_TURN_ORDER``): once per call; resolves the session,
  compacts after a complete turn.
- `ToolCallingAdvisor` (``TOOL_LOOP_ORDER``): the tool loop over
  [`Tool`][asyncsession.tools.Tool]s (`Tool` and `tool` are re-exported here from
  [`asyncsession.tools`][asyncsession.tools]).
- `SessionMemoryAdvisor` (``SESSION_MEMORY_ORDER``): once per round; loads, guards and
  stores history.
- `AutoMemoryToolsAdvisor` (``AUTO_MEMORY_ORDER``): long-term memory tools and prompt, per user.
- `SessionRecallAdvisor` (``RECALL_ORDER``): ``conversation_search`` over the whole log.
- `IdempotentTurnAdvisor` (``IDEMPOTENCY_ORDER``): a retried request
  (``REQUEST_ID_CONTEXT_KEY``) gets the reply its first attempt stored, without a model call.
- `MessageFilter`, the event id generators, and `SessionContexts` with the context keys.
"""

from ..tools import Tool, tool
from ._session import CompactionSubmitter
from .auto_memory import AutoMemoryToolsAdvisor, ConsolidationTrigger
from .base import (
    AUTO_MEMORY_ORDER,
    HIGHEST_PRECEDENCE,
    IDEMPOTENCY_ORDER,
    LOWEST_PRECEDENCE,
    RECALL_ORDER,
    SESSION_MEMORY_ORDER,
    SESSION_TURN_ORDER,
    TOOL_LOOP_ORDER,
    Advisor,
    BaseAdvisor,
    CallContext,
    CallNext,
    CallState,
    ChunkStream,
    StateKey,
    StreamNext,
)
from .contexts import (
    DEFAULT_USER_ID,
    EVENT_FILTER_CONTEXT_KEY,
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    SESSION_METADATA_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    SessionContexts,
)
from .filters import MessageFilter
from .idempotency import IdempotentTurnAdvisor
from .ids import (
    REQUEST_ID_CONTEXT_KEY,
    EventIdGenerator,
    IdempotentSessionEventIdGenerator,
    RandomEventIdGenerator,
    RequestIdEventIdGenerator,
)
from .memory import SessionMemoryAdvisor
from .recall import SessionRecallAdvisor
from .session_advisors import SessionAdvisors
from .tool_calling import ToolCallingAdvisor
from .turn import SessionTurnAdvisor

__all__ = [
    "AUTO_MEMORY_ORDER",
    "DEFAULT_USER_ID",
    "EVENT_FILTER_CONTEXT_KEY",
    "HIGHEST_PRECEDENCE",
    "IDEMPOTENCY_ORDER",
    "LOWEST_PRECEDENCE",
    "RECALL_ORDER",
    "REQUEST_EVENT_IDS_CONTEXT_KEY",
    "REQUEST_ID_CONTEXT_KEY",
    "RESPONSE_EVENT_IDS_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "SESSION_MEMORY_ORDER",
    "SESSION_METADATA_CONTEXT_KEY",
    "SESSION_TURN_ORDER",
    "TOOL_LOOP_ORDER",
    "USER_ID_CONTEXT_KEY",
    "Advisor",
    "AutoMemoryToolsAdvisor",
    "BaseAdvisor",
    "CallContext",
    "CallNext",
    "CallState",
    "ChunkStream",
    "CompactionSubmitter",
    "ConsolidationTrigger",
    "EventIdGenerator",
    "IdempotentSessionEventIdGenerator",
    "IdempotentTurnAdvisor",
    "MessageFilter",
    "RandomEventIdGenerator",
    "RequestIdEventIdGenerator",
    "SessionAdvisors",
    "SessionContexts",
    "SessionMemoryAdvisor",
    "SessionRecallAdvisor",
    "SessionTurnAdvisor",
    "StateKey",
    "StreamNext",
    "Tool",
    "ToolCallingAdvisor",
    "tool",
]
