"""`DelegatingSessionService`: a service that forwards every call, the base of decorators."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import cast

from pydantic import JsonValue

from .._checks import SERVICE_METHODS, require_object
from ..compaction_protocols import CompactionResult, CompactionStrategy, TriggerLike
from ..events import CreateSessionRequest, Session, SessionEvent
from ..exceptions import UsageError
from ..filters import EventFilter, EventQuery
from ..messages import Message
from ..repository import SessionSnapshot
from ._capabilities import allows_system_messages, new_event_id
from ._protocol import SessionService

__all__ = ["DelegatingSessionService"]


class DelegatingSessionService:
    """A ``SessionService`` that forwards every call to ``delegate``.

    Subclass it and override only what your decorator changes (authorization, metrics,
    logging); everything else passes through.
    """

    def __init__(self, delegate: SessionService) -> None:
        if cast(object, delegate) is None:
            raise UsageError("DelegatingSessionService needs a SessionService, not None")
        require_object(
            delegate,
            "DelegatingSessionService's delegate",
            "a SessionService",
            methods=SERVICE_METHODS,
        )
        self.delegate = delegate

    @property
    def allow_system_messages(self) -> bool:
        """Forwarded: whether the delegate stores system messages (``True`` if it does not say)."""
        return allows_system_messages(self.delegate)

    async def create(self, request: CreateSessionRequest) -> Session:
        """Forwarded."""
        return await self.delegate.create(request)

    async def find_or_create(self, request: CreateSessionRequest) -> Session:
        """Forwarded."""
        return await self.delegate.find_or_create(request)

    async def find_by_id(self, session_id: str) -> Session | None:
        """Forwarded."""
        return await self.delegate.find_by_id(session_id)

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Forwarded."""
        return await self.delegate.find_by_user_id(user_id)

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """Forwarded."""
        return await self.delegate.find_by_metadata(name, value, limit=limit)

    async def delete(self, session_id: str) -> None:
        """Forwarded."""
        await self.delegate.delete(session_id)

    async def delete_expired_sessions(self, before: datetime | None = None) -> int:
        """Forwarded."""
        return await self.delegate.delete_expired_sessions(before)

    async def append_event(self, event: SessionEvent) -> None:
        """Forwarded."""
        await self.delegate.append_event(event)

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        """Forwarded."""
        return await self.delegate.append_events(session_id, events, expected_version)

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        event_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        """Forwarded."""
        return await self.delegate.append_message(
            session_id, message, event_id=event_id, metadata=metadata
        )

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        event_ids: Sequence[str] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> list[SessionEvent]:
        """Forwarded."""
        return await self.delegate.append_messages(
            session_id, messages, event_ids=event_ids, metadata=metadata
        )

    async def get_events(
        self, session_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """Forwarded."""
        return await self.delegate.get_events(session_id, filter)

    async def search_events(self, session_id: str, query: EventQuery) -> list[SessionEvent]:
        """Forwarded."""
        return await self.delegate.search_events(session_id, query)

    async def get_messages(self, session_id: str) -> list[Message]:
        """Forwarded."""
        return await self.delegate.get_messages(session_id)

    async def get_active_messages(self, session_id: str) -> list[Message]:
        """Forwarded."""
        return await self.delegate.get_active_messages(session_id)

    async def get_event_version(self, session_id: str) -> int:
        """Forwarded."""
        return await self.delegate.get_event_version(session_id)

    async def get_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """Forwarded."""
        return await self.delegate.get_snapshot(session_id, filter)

    async def draw_event_id(self, session_id: str) -> str:
        """Forwarded when the delegate draws ids (see `new_event_id`), else a random UUID."""
        return await new_event_id(self.delegate, session_id)

    async def start_turn(
        self,
        session_id: str,
        message: Message,
        filter: EventFilter,
        *,
        event_id: str | None = None,
        user_id: str | None = None,
        reserve_event_ids: Sequence[str] = (),
        create: CreateSessionRequest | None = None,
    ) -> tuple[SessionEvent, SessionSnapshot]:
        """Forwarded."""
        return await self.delegate.start_turn(
            session_id,
            message,
            filter,
            event_id=event_id,
            user_id=user_id,
            reserve_event_ids=reserve_event_ids,
            create=create,
        )

    async def find_events_by_user_id(
        self, user_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """Forwarded."""
        return await self.delegate.find_events_by_user_id(user_id, filter)

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Forwarded."""
        return await self.delegate.compact(session_id, trigger, strategy)
