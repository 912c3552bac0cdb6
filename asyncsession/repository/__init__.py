"""Session stores: the protocol, the in-memory default, and MongoDB."""

from ._protocol import SessionRepository, SessionSnapshot, snapshot_by_parts
from .memory import InMemorySessionRepository

__all__ = [
    "InMemorySessionRepository",
    "SessionRepository",
    "SessionSnapshot",
    "snapshot_by_parts",
]
