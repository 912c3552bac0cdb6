"""The optional capabilities a `SessionService` may declare, and the helpers that use them.

Each is an explicit protocol: `EventIdDrawingService` (it hands out event ids, see
`new_event_id`) and `SystemMessagePolicy` (it says whether it stores system messages, see
`allows_system_messages`).
"""

from __future__ import annotations

import uuid
from typing import Protocol, runtime_checkable

from .._checks import require_object
from ._protocol import SessionService

__all__ = [
    "EventIdDrawingService",
    "SystemMessagePolicy",
    "allows_system_messages",
    "new_event_id",
]


@runtime_checkable
class EventIdDrawingService(Protocol):
    """An optional service capability: it hands out the ids of events it will append."""

    async def draw_event_id(self, session_id: str) -> str:
        """A new event id for an append to ``session_id``."""
        ...


@runtime_checkable
class SystemMessagePolicy(Protocol):
    """An optional service capability: it says whether it stores system messages."""

    @property
    def allow_system_messages(self) -> bool:
        """Whether system messages may be stored."""
        ...


def allows_system_messages(service: object) -> bool:
    """Whether ``service`` may store system messages: what it declares
    (`SystemMessagePolicy`), else ``True`` (a service that does not say may).

    Raises:
        UsageError: ``service`` is ``None`` or a plain value (a string, a number).
    """
    require_object(service, "service", "a SessionService", methods=())
    if isinstance(service, SystemMessagePolicy):
        return bool(service.allow_system_messages)
    return True


async def new_event_id(service: SessionService, session_id: str) -> str:
    """A new event id for an append to ``session_id`` through ``service``: drawn by the
    service when it can (`DefaultSessionService.draw_event_id`, and a
    `DelegatingSessionService` around one), else a random UUID, as `SessionEvent` would pick.

    For callers that must know an event's id before its append (to retry the append with it).
    """
    if isinstance(service, EventIdDrawingService):
        return await service.draw_event_id(session_id)
    return str(uuid.uuid4())
