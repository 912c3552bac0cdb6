"""asyncsession: durable, concurrent-safe, asyncio-native conversation sessions for LLM apps.

A session is an append-only log of events on MongoDB (or in memory). Reads are filtered and
windowed, writes are idempotent and compare-and-swap versioned, and compaction archives old
turns without losing them.
"""

from ._version import __version__
from .events import (
    COMPACTION_SOURCE,
    SYNTHETIC,
    CreateSessionRequest,
    EventType,
    Session,
    SessionEvent,
)
from .exceptions import (
    AccessDenied,
    AsyncSessionError,
    ChatError,
    CompactionError,
    EventIdConflict,
    EventTooLarge,
    InvalidCompactionPlan,
    InvalidFilter,
    MissingSessionId,
    RepositoryError,
    SessionExists,
    SessionNotFound,
    StorageError,
    StorageUnavailable,
    StreamInterrupted,
    ToolError,
    UsageError,
)
from .filters import EventFilter, MatchMode
from .messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    message_from_openai,
    messages_from_openai,
    messages_to_openai,
)
from .plans import CompactionPlan, CompactionResult, Insert
from .repository import (
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionRepository,
    SessionSnapshot,
)
from .service import DefaultSessionService, DelegatingSessionService, SessionService

__all__ = [
    "COMPACTION_SOURCE",
    "SYNTHETIC",
    "AccessDenied",
    "AssistantMessage",
    "AsyncSessionError",
    "ChatError",
    "CompactionError",
    "CompactionPlan",
    "CompactionResult",
    "CreateSessionRequest",
    "DefaultSessionService",
    "DelegatingSessionService",
    "EventFilter",
    "EventIdConflict",
    "EventTooLarge",
    "EventType",
    "InMemorySessionRepository",
    "Insert",
    "InvalidCompactionPlan",
    "InvalidFilter",
    "MatchMode",
    "Message",
    "MessageType",
    "MissingSessionId",
    "MongoSessionRepository",
    "RepositoryError",
    "Session",
    "SessionEvent",
    "SessionExists",
    "SessionNotFound",
    "SessionRepository",
    "SessionService",
    "SessionSnapshot",
    "StorageError",
    "StorageUnavailable",
    "StreamInterrupted",
    "SystemMessage",
    "ToolCall",
    "ToolError",
    "ToolResponse",
    "ToolResponseMessage",
    "UsageError",
    "UserMessage",
    "__version__",
    "message_from_openai",
    "messages_from_openai",
    "messages_to_openai",
]
