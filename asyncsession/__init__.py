"""asyncsession: durable, concurrent-safe, asyncio-native conversation sessions for LLM apps.

A session is an append-only log of events on MongoDB (or in memory). Reads are filtered and
windowed, writes are idempotent and compare-and-swap versioned, and compaction takes old turns
out of the model's view without deleting them. A chat client (``asyncsession.openai``) runs
each call as one turn on a session: history in, question and reply stored, turns of one
session one after another.
"""

from ._version import __version__
from .chat import ChatChunk, ChatOptions, ChatResponse
from .events import CreateSessionRequest, EventType, Session, SessionEvent
from .exceptions import (
    AccessDenied,
    AsyncSessionError,
    ChatError,
    ChatTimeout,
    ContentErased,
    EncryptionError,
    EventIdConflict,
    EventTooLarge,
    RequestIdReused,
    SessionExists,
    SessionNotFound,
    StorageUnavailable,
    ToolLoopLimitExceeded,
    TurnInProgress,
    UsageError,
)
from .filters import EventFilter
from .messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from .repository import InMemorySessionRepository, MongoSessionRepository, SessionRepository
from .service import DefaultSessionService, SessionService
from .tools import Tool, tool

__all__ = [
    "AccessDenied",
    "AssistantMessage",
    "AsyncSessionError",
    "ChatChunk",
    "ChatError",
    "ChatOptions",
    "ChatResponse",
    "ChatTimeout",
    "ContentErased",
    "CreateSessionRequest",
    "DefaultSessionService",
    "EncryptionError",
    "EventFilter",
    "EventIdConflict",
    "EventTooLarge",
    "EventType",
    "InMemorySessionRepository",
    "Message",
    "MongoSessionRepository",
    "RequestIdReused",
    "Session",
    "SessionEvent",
    "SessionExists",
    "SessionNotFound",
    "SessionRepository",
    "SessionService",
    "StorageUnavailable",
    "SystemMessage",
    "Tool",
    "ToolCall",
    "ToolLoopLimitExceeded",
    "ToolResponse",
    "ToolResponseMessage",
    "TurnInProgress",
    "UsageError",
    "UserMessage",
    "__version__",
    "tool",
]
