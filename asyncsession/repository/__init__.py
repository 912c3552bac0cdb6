"""Session stores: the `SessionRepository` base class, the in-memory default, and MongoDB."""

from ._protocol import Lease, SessionRepository, SessionSnapshot
from .in_memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "InMemorySessionRepository",
    "Lease",
    "MongoSessionRepository",
    "SessionRepository",
    "SessionSnapshot",
]
