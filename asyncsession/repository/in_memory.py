"""``InMemorySessionRepository``: the embedded default store and the reference semantics.

Every operation runs to completion without awaiting, so on one event loop it is atomic with
respect to every other task; a lock makes it safe from several threads too. An append is O(1)
amortised (a compaction's also takes its view), and a ``last_n`` read walks back from the end
of the log, so its cost follows the window, not the log. Nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .._lifecycle import closed_error
from .._view import ReadLog
from ..compaction_protocols import CompactionRecord
from ..events import EventType, Session, SessionAttributes, SessionEvent
from ..exceptions import EventIdConflict, SessionNotFound
from ..filters import EventFilter
from ._metadata_index import DEFAULT_LIMIT, check_lookup, index_entries, index_entry, indexed_keys
from ._protocol import (
    Lease,
    SessionRepository,
    SessionSnapshot,
    check_batch,
    check_session,
    check_version,
)

__all__ = ["InMemorySessionRepository"]


@dataclass(slots=True)
class _Log:
    session: Session
    events: list[SessionEvent] = field(default_factory=list[SessionEvent])
    positions: dict[str, int] = field(default_factory=dict[str, int])
    """Each event id's index in ``events``."""
    version: int = 0
    boundary: int = -1
    """The index of the newest ``COMPACTION`` event; -1 when none."""
    view: tuple[str, ...] = ()
    """The ids of the active view that boundary names."""
    leases: dict[int, Lease] = field(default_factory=dict[int, Lease])
    """Commit number (0: the session) -> its lease."""

    def read(self) -> ReadLog:
        return ReadLog(self.events, self.boundary, self.view, self.positions)


class _OpenLock:
    """The store's lock, which refuses to be taken once the store is closed."""

    __slots__ = ("_lock", "closed")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.closed = False

    def check_open(self) -> None:
        if self.closed:
            raise closed_error("InMemorySessionRepository", "the store")

    def __enter__(self) -> None:
        self.check_open()
        self._lock.__enter__()

    def __exit__(self, *exc_info: object) -> None:
        self._lock.__exit__(None, None, None)


class InMemorySessionRepository(SessionRepository):
    """Sessions and their logs in process memory.

    It shares the lifecycle of every store: `aclose` (idempotent) ends it, ``async with``
    closes it on exit, and a call after closing raises `UsageError`.

    Args:
        indexed_metadata_keys: the metadata keys, besides the well-known
            [`SessionAttributes`][asyncsession.events.SessionAttributes], that
            [`find_by_metadata`][asyncsession.repository.in_memory.InMemorySessionRepository.find_by_metadata]
            looks sessions up by.
    """

    def __init__(self, *, indexed_metadata_keys: Iterable[str] = ()) -> None:
        self._indexed_keys = indexed_keys(indexed_metadata_keys)
        self._logs: dict[str, _Log] = {}
        self._owners: dict[str, str] = {}
        self._lock = _OpenLock()

    # --- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store and let go of its sessions; closing again does nothing."""
        if self._lock.closed:
            return
        with self._lock:
            self._logs.clear()
            self._owners.clear()
            self._lock.closed = True

    async def __aenter__(self) -> InMemorySessionRepository:
        self._lock.check_open()
        return self

    # --- sessions ------------------------------------------------------------------------------

    async def save(self, session: Session) -> Session:
        """Create or update a session; an update keeps ``created_at``, the log and the version."""
        check_session(session)
        with self._lock:
            log = self._logs.get(session.id)
            if log is None:
                self._logs[session.id] = _Log(session=session)
                return session
            log.session = log.session.model_copy(
                update={
                    "user_id": session.user_id,
                    "expires_at": session.expires_at,
                    "metadata": dict(session.metadata),
                }
            )
            return log.session

    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists."""
        check_session(session)
        with self._lock:
            if session.id in self._logs:
                return False
            self._logs[session.id] = _Log(session=session)
            return True

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        self._lock.check_open()
        log = self._logs.get(session_id)
        return None if log is None else log.session

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user, oldest first (by ``created_at``, then id)."""
        with self._lock:
            sessions = [
                log.session for log in self._logs.values() if log.session.user_id == user_id
            ]
        return sorted(sessions, key=lambda s: (s.created_at, s.id))

    async def find_by_metadata(
        self, name: str, value: str, *, limit: int = DEFAULT_LIMIT
    ) -> list[Session]:
        """The sessions whose metadata holds ``value`` under the indexed key ``name``, oldest
        first, at most ``limit``; the principal is the ``user_id``."""
        check_lookup(name, value, limit, self._indexed_keys)
        if name == SessionAttributes.PRINCIPAL_NAME:
            return (await self.find_by_user_id(value))[:limit]
        entry = index_entry(name, value)
        with self._lock:
            sessions = [
                log.session
                for log in self._logs.values()
                if entry in index_entries(log.session, self._indexed_keys)
            ]
        return sorted(sessions, key=lambda s: (s.created_at, s.id))[:limit]

    async def delete(self, session_id: str) -> None:
        """Remove the session and its events."""
        with self._lock:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        log = self._logs.pop(session_id, None)
        if log is not None:
            for event_id in log.positions:
                self._owners.pop(event_id, None)

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``."""
        with self._lock:
            expired = [sid for sid, log in self._logs.items() if log.session.is_expired(before)]
            for session_id in expired:
                self._drop(session_id)
            return len(expired)

    # --- appends -------------------------------------------------------------------------------

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Append a batch atomically as one commit; see ``SessionRepository.append_events``."""
        batch = check_batch(session_id, events)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                raise SessionNotFound(session_id)
            fresh: list[SessionEvent] = []
            for event in batch:
                owner = self._owners.get(event.id)
                if owner is not None and owner != session_id:
                    raise EventIdConflict(event.id, session_id, owner)
                if owner is None:
                    fresh.append(event)
            if not fresh:  # replays only; an empty batch compares the version
                return bool(batch) or expected_version in (None, log.version)
            if expected_version is not None and log.version != expected_version:
                return False
            for event in fresh:
                log.positions[event.id] = len(log.events)
                log.events.append(event.model_copy(update={"archived": False}))
                self._owners[event.id] = session_id
            log.version += 1
            if fresh[-1].type == EventType.COMPACTION:
                log.boundary = len(log.events) - 1
                log.view = CompactionRecord.from_event(fresh[-1]).view
            if lease is not None:
                log.leases[log.version] = lease
            return True

    # --- leases --------------------------------------------------------------------------------

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Take or renew the lease on commit ``version`` (see
        ``SessionRepository.acquire_lease``)."""
        check_version(version)
        now = datetime.now(UTC)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                raise SessionNotFound(session_id)
            if version > log.version:
                return False
            held = log.leases.get(version)
            if held is not None and held.holder != lease.holder and held.is_live(now):
                return False
            log.leases[version] = lease
            return True

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it."""
        with self._lock:
            log = self._logs.get(session_id)
            held = None if log is None else log.leases.get(version)
            if log is not None and held is not None and held.holder == holder:
                del log.leases[version]

    # --- reads ---------------------------------------------------------------------------------

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The matching events of one session (see ``SessionRepository.find_events``)."""
        with self._lock:
            log = self._logs.get(session_id)
            return [] if log is None else filter.read_backwards(log.read())

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest lease, atomically."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            return SessionSnapshot(
                session=log.session,
                version=log.version,
                events=tuple(filter.read_backwards(log.read())),
                lease=log.leases.get(log.version),
            )

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of all the user's sessions, by timestamp; ties keep log order."""
        unwindowed = filter.without_window()
        with self._lock:
            matched = [
                event
                for log in self._logs.values()
                if log.session.user_id == user_id
                for event in unwindowed.read_backwards(log.read())
            ]
        matched.sort(key=lambda e: e.timestamp)  # stable: ties keep each session's order
        return filter.apply_window(matched)

    async def get_event_version(self, session_id: str) -> int:
        """The session's version; 0 when unknown."""
        self._lock.check_open()
        log = self._logs.get(session_id)
        return 0 if log is None else log.version
