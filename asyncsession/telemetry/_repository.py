"""`TracingSessionRepository`: a span per store operation, around any repository."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

from .._checks import REPOSITORY_METHODS, require_object
from .._lifecycle import ForwardsLoop
from .._telemetry import AttributeValue, current_turn, span
from ..events import Session, SessionEvent
from ..filters import EventFilter
from ..repository import Lease, SessionRepository, SessionSnapshot
from ..rewinds import LogPoint

__all__ = ["TracingSessionRepository"]

T = TypeVar("T")


class TracingSessionRepository(ForwardsLoop, SessionRepository):
    """Wraps a repository: every operation runs in a ``session_store <operation>`` span.

    A span's attributes: ``db.operation.name`` (the repository method), ``db.system.name``
    (``mongodb`` for the MongoDB store), ``asyncsession.store`` (the wrapped class) and
    ``asyncsession.session.id`` (also as ``gen_ai.conversation.id``) where the operation names
    one; a failure sets ``error.type``.
    Each operation also counts towards the current turn's ``asyncsession.turn.store_operations``.

    Methods of the wrapped store beyond the base class (``ensure_indexes``) pass through,
    traced, so wrapping costs no database command.

    Args:
        repository: the repository to trace (borrowed: closing is still its owner's job).
    """

    def __init__(self, repository: SessionRepository) -> None:
        require_object(repository, "repository", "a SessionRepository", methods=REPOSITORY_METHODS)
        self.repository = repository
        """The wrapped repository."""
        name = type(repository).__name__
        self._attributes: dict[str, AttributeValue | None] = {
            "asyncsession.store": name,
            "db.system.name": "mongodb" if name.startswith("Mongo") else None,
        }

    def __repr__(self) -> str:
        return f"TracingSessionRepository({self.repository!r})"

    async def _traced(
        self, operation: str, session_id: str | None, work: Callable[[], Awaitable[T]]
    ) -> T:
        stats = current_turn()
        if stats is not None:
            stats.store_operations += 1
        attributes = {
            **self._attributes,
            "db.operation.name": operation,
            "asyncsession.session.id": session_id,
            "gen_ai.conversation.id": session_id,
        }
        with span(f"session_store {operation}", kind="client", attributes=attributes):
            return await work()

    def __getattr__(self, name: str) -> Any:
        """An optional capability of the wrapped store, traced when it is a coroutine."""
        found = getattr(self.repository, name)
        if not inspect.iscoroutinefunction(found):
            return found

        @functools.wraps(found)
        async def traced(*args: Any, **kwargs: Any) -> Any:
            first = args[0] if args else kwargs.get("session_id")
            session_id = first if isinstance(first, str) else None
            return await self._traced(name, session_id, lambda: found(*args, **kwargs))

        return traced

    async def save(self, session: Session) -> Session:
        """Traced."""
        return await self._traced("save", session.id, lambda: self.repository.save(session))

    async def save_if_absent(self, session: Session) -> bool:
        """Traced."""
        return await self._traced(
            "save_if_absent", session.id, lambda: self.repository.save_if_absent(session)
        )

    async def find_by_id(self, session_id: str) -> Session | None:
        """Traced."""
        return await self._traced(
            "find_by_id", session_id, lambda: self.repository.find_by_id(session_id)
        )

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Traced."""
        return await self._traced(
            "find_by_user_id", None, lambda: self.repository.find_by_user_id(user_id)
        )

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """Traced."""
        return await self._traced(
            "find_by_metadata",
            None,
            lambda: self.repository.find_by_metadata(name, value, limit=limit),
        )

    async def delete(self, session_id: str) -> None:
        """Traced."""
        await self._traced("delete", session_id, lambda: self.repository.delete(session_id))

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Traced."""
        return await self._traced(
            "delete_expired_sessions", None, lambda: self.repository.delete_expired_sessions(before)
        )

    async def fork(
        self,
        session_id: str,
        child: Session,
        *,
        at: int | str | None = None,
        before: str | None = None,
    ) -> Session:
        """Traced."""
        return await self._traced(
            "fork",
            session_id,
            lambda: self.repository.fork(session_id, child, at=at, before=before),
        )

    async def locate(
        self, session_id: str, *, at: int | str | None = None, before: str | None = None
    ) -> tuple[LogPoint, int] | None:
        """Traced."""
        return await self._traced(
            "locate", session_id, lambda: self.repository.locate(session_id, at=at, before=before)
        )

    async def find_forks(self, session_id: str) -> list[Session]:
        """Traced."""
        return await self._traced(
            "find_forks", session_id, lambda: self.repository.find_forks(session_id)
        )

    async def append_event(self, event: SessionEvent) -> None:
        """Traced."""
        await self._traced(
            "append_event", event.session_id, lambda: self.repository.append_event(event)
        )

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Traced."""
        return await self._traced(
            "append_events",
            session_id,
            lambda: self.repository.append_events(
                session_id, events, expected_version, lease=lease
            ),
        )

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Traced."""
        return await self._traced(
            "find_events", session_id, lambda: self.repository.find_events(session_id, filter)
        )

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Traced."""
        return await self._traced(
            "find_events_by_user_id",
            None,
            lambda: self.repository.find_events_by_user_id(user_id, filter),
        )

    async def get_event_version(self, session_id: str) -> int:
        """Traced."""
        return await self._traced(
            "get_event_version", session_id, lambda: self.repository.get_event_version(session_id)
        )

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Traced."""
        return await self._traced(
            "acquire_lease",
            session_id,
            lambda: self.repository.acquire_lease(session_id, version, lease),
        )

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """Traced."""
        await self._traced(
            "release_lease",
            session_id,
            lambda: self.repository.release_lease(session_id, version, holder),
        )

    async def aclose(self) -> None:
        """Close the wrapped store (traced)."""
        await self._traced("aclose", None, self.repository.aclose)

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """Traced."""
        return await self._traced(
            "read_snapshot", session_id, lambda: self.repository.read_snapshot(session_id, filter)
        )
