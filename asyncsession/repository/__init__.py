"""Session stores: the `SessionRepository` base class, the in-memory default, and MongoDB."""

from ._erasure import ErasureReport
from ._protocol import Lease, SessionRepository, SessionSnapshot
from .in_memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "ErasureReport",
    "InMemorySessionRepository",
    "Lease",
    "MongoSessionRepository",
    "SessionRepository",
    "SessionSnapshot",
]
