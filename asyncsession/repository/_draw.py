"""Drawing new event ids from the store: an optional capability.

`DefaultSessionService.append_message` (and ``start_turn``) without an ``event_id`` needs a new
random id. A store that implements `DrawsEventIds` hands out ids it has prepared for the
session: ``MongoSessionRepository`` registers a few ids for the session ahead, together with an
append's own registration, so the next appends that use them need no registration of their
own. Any other store gets a random UUID, as `SessionEvent` would pick.
"""

from __future__ import annotations

import uuid
from typing import Protocol, TypeGuard, runtime_checkable

from .._checks import require_object, require_text
from ._protocol import SessionRepository

__all__ = ["DrawsEventIds", "draw_event_id", "supports_drawing"]


@runtime_checkable
class DrawsEventIds(SessionRepository, Protocol):
    """A store that hands out new event ids for a session's next appends."""

    async def draw_event_id(self, session_id: str) -> str:
        """A new, random event id (a UUID string) for an append to ``session_id``.

        Every id drawn is new, whether it is used or not. Use it for ``session_id`` only: the
        store may have registered it for that session already, so in another session's append
        it is another session's id (`EventIdConflict`).
        """
        ...


async def draw_event_id(repository: SessionRepository, session_id: str) -> str:
    """A new event id for an append to ``session_id``: drawn from the store when it can, else a
    random UUID.

    Raises:
        UsageError: ``repository`` is ``None`` or a plain value, or ``session_id`` is not text.
    """
    require_object(repository, "repository", "a SessionRepository", methods=())
    require_text(session_id, "session_id")
    if supports_drawing(repository):
        return await repository.draw_event_id(session_id)
    return str(uuid.uuid4())


@runtime_checkable
class _Draws(Protocol):
    """The one method that tells a `DrawsEventIds` store from a plain one (a cheap check)."""

    async def draw_event_id(self, session_id: str) -> str: ...


def supports_drawing(repository: SessionRepository) -> TypeGuard[DrawsEventIds]:
    """Whether ``repository`` declares the `DrawsEventIds` capability (also through a wrapper
    that passes its optional capabilities through)."""
    return isinstance(repository, _Draws)
