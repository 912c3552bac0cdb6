"""`SessionService`: the session operations applications and turns call, as an abstract base."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from pydantic import JsonValue

from ..compaction_protocols import CompactionResult, CompactionStrategy, TriggerLike
from ..events import CreateSessionRequest, Session, SessionEvent
from ..filters import DEFAULT_PAGE_SIZE, EventFilter, MatchMode
from ..messages import Message, MessageType
from ..repository import Lease, SessionSnapshot
from ..rewinds import RewindRecord

__all__ = ["SessionService"]


class SessionService(ABC):
    """The session operations applications and chat turns use.

    Subclass `DefaultSessionService` to change one operation (a decorator: authorization,
    metrics) and call ``super()`` for the rest; subclass this to build a service from scratch.
    """

    @property
    def loop_bound(self) -> bool:
        """Whether the service's store belongs to one event loop (see
        [`SessionRepository.loop_bound`][asyncsession.repository.SessionRepository.loop_bound]);
        ``False`` unless a service says otherwise."""
        return False

    @property
    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the service's store belongs to, once one has used it; ``None``
        unless a service says otherwise."""
        return None

    @property
    def allow_system_messages(self) -> bool:
        """Whether system messages may be stored (a turn looks up the latest stored one only
        when they may); ``True`` unless a service says otherwise."""
        return True

    @abstractmethod
    async def create(self, request: CreateSessionRequest) -> Session:
        """Create a session; raises ``SessionExists`` if its id is taken."""

    @abstractmethod
    async def find_or_create(self, request: CreateSessionRequest) -> Session:
        """The session with ``request.id``, created from the request if it does not exist."""

    @abstractmethod
    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""

    @abstractmethod
    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user."""

    @abstractmethod
    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """At most ``limit`` sessions whose metadata holds ``value`` under the indexed key
        ``name``, oldest first; raises ``UsageError`` for a key the store does not index."""

    @abstractmethod
    async def delete(self, session_id: str) -> None:
        """Remove the session and all its events."""

    @abstractmethod
    async def delete_expired_sessions(self, before: datetime | None = None) -> int:
        """Remove the sessions that expired before ``before`` (default: now); returns the count."""

    @abstractmethod
    async def append_event(self, event: SessionEvent) -> None:
        """Append one event; a replay of its id is a no-op."""

    @abstractmethod
    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Append a batch as one commit; with ``expected_version``, only if nothing changed
        since; the commit carries ``lease`` (a commit without one ends any lease before it)."""

    @abstractmethod
    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        event_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        """Wrap a message in a new event, append it, and return the event."""

    @abstractmethod
    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        event_ids: Sequence[str] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> list[SessionEvent]:
        """Wrap each message in a new event and append them all as one version."""

    @abstractmethod
    async def get_events(
        self, session_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """The session's events that match ``filter`` (default: all, archived included)."""

    @abstractmethod
    async def search_events(
        self,
        session_id: str,
        keywords: Sequence[str],
        *,
        match_mode: MatchMode = "any",
        message_types: Iterable[MessageType] | None = None,
        since: datetime | None = None,
        include_synthetic: bool = False,
        page: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> list[SessionEvent]:
        """One page of the session's message events that contain any (or all) of ``keywords``,
        archived ones included, oldest first."""

    @abstractmethod
    async def get_messages(self, session_id: str) -> list[Message]:
        """Every message of the log, archived ones included."""

    @abstractmethod
    async def get_active_messages(self, session_id: str) -> list[Message]:
        """The messages of the active view: what the model is sent."""

    @abstractmethod
    async def get_event_version(self, session_id: str) -> int:
        """The session's event-log version."""

    @abstractmethod
    async def get_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest commit's lease in one
        read; ``None`` for an unknown session."""

    @abstractmethod
    async def fork(
        self,
        session_id: str,
        *,
        at: int | str | None = None,
        before: str | None = None,
        fork_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> Session:
        """A new session whose log begins with this one's up to a point, read without a copy;
        both stay writable."""

    @abstractmethod
    async def rewind(
        self,
        session_id: str,
        *,
        to: int | str | None = None,
        before: str | None = None,
        event_id: str | None = None,
    ) -> RewindRecord:
        """Make the active view the one the log had at a point, by appending a ``REWIND``
        boundary: nothing leaves the log."""

    @abstractmethod
    async def find_events_by_user_id(
        self, user_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """Matching events across all the user's sessions, by timestamp."""

    @abstractmethod
    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact the session if the trigger fires; a lost compare-and-swap is a no-op."""

    @abstractmethod
    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Take (or renew) the lease on commit ``version`` (0: the session itself); ``False``
        while another holder's lease runs."""

    @abstractmethod
    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it."""
