"""The `SessionService` protocol: the session operations applications and advisors call."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Protocol, runtime_checkable

from pydantic import JsonValue

from ..compaction_protocols import CompactionResult, CompactionStrategy, TriggerLike
from ..events import CreateSessionRequest, Session, SessionEvent
from ..filters import EventFilter, EventQuery
from ..messages import Message
from ..repository import SessionSnapshot

__all__ = ["SessionService"]


@runtime_checkable
class SessionService(Protocol):
    """The session operations applications and advisors use."""

    async def create(self, request: CreateSessionRequest) -> Session:
        """Create a session; raises ``SessionExists`` if its id is taken."""
        ...

    async def find_or_create(self, request: CreateSessionRequest) -> Session:
        """The session with ``request.id``, created from the request if it does not exist."""
        ...

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        ...

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user."""
        ...

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """At most ``limit`` sessions whose metadata holds ``value`` under the indexed key
        ``name``, oldest first; raises ``UsageError`` for a key the store does not index."""
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session and all its events."""
        ...

    async def delete_expired_sessions(self, before: datetime | None = None) -> int:
        """Remove the sessions that expired before ``before`` (default: now); returns the count."""
        ...

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event; a replay of its id is a no-op."""
        ...

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        """Append a batch as one version; with ``expected_version``, only if nothing changed."""
        ...

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        event_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        """Wrap a message in a new event, append it, and return the event."""
        ...

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        event_ids: Sequence[str] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> list[SessionEvent]:
        """Wrap each message in a new event and append them all as one version."""
        ...

    async def get_events(
        self, session_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """The session's events that match ``filter`` (default: all, archived included)."""
        ...

    async def search_events(self, session_id: str, query: EventQuery) -> list[SessionEvent]:
        """One page of the session's message events that match ``query``, oldest first."""
        ...

    async def get_messages(self, session_id: str) -> list[Message]:
        """Every message of the log, archived ones included."""
        ...

    async def get_active_messages(self, session_id: str) -> list[Message]:
        """The messages of the active view: what the model is sent."""
        ...

    async def get_event_version(self, session_id: str) -> int:
        """The session's event-log version."""
        ...

    async def get_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version and its matching events in one read."""
        ...

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
        """Start a chat turn: check the owner (creating the session from ``create`` if it does
        not exist), append ``message``, read the window before it.

        ``reserve_event_ids`` is deprecated: the store registers the ids it hands out itself.
        """
        ...

    async def find_events_by_user_id(
        self, user_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """Matching events across all the user's sessions, by timestamp."""
        ...

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact the session if the trigger fires; a lost compare-and-swap is a no-op."""
        ...
