"""Session stores: the protocol, the in-memory default, and MongoDB."""

from ._draw import DrawsEventIds, draw_event_id
from ._leases import TurnLeaseRepository
from ._protocol import SessionRepository, SessionSnapshot, snapshot_by_parts
from ._turn import TurnRepository, start_turn, supports_turns
from .in_memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "DrawsEventIds",
    "InMemorySessionRepository",
    "MongoSessionRepository",
    "SessionRepository",
    "SessionSnapshot",
    "TurnLeaseRepository",
    "TurnRepository",
    "draw_event_id",
    "snapshot_by_parts",
    "start_turn",
    "supports_turns",
]
