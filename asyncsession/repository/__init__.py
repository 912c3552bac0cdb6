"""Session stores: the protocol, the in-memory default, and MongoDB."""

from ._protocol import SessionRepository, SessionSnapshot, snapshot_by_parts
from ._turn import TurnRepository, start_turn, supports_turns
from .memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "InMemorySessionRepository",
    "MongoSessionRepository",
    "SessionRepository",
    "SessionSnapshot",
    "TurnRepository",
    "snapshot_by_parts",
    "start_turn",
    "supports_turns",
]
