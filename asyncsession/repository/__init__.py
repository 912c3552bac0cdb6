"""Session stores: the protocol, the in-memory default, and MongoDB."""

from ._protocol import SessionRepository, SessionSnapshot, snapshot_by_parts
from .memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "InMemorySessionRepository",
    "MongoSessionRepository",
    "SessionRepository",
    "SessionSnapshot",
    "snapshot_by_parts",
]
