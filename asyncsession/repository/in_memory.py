"""``InMemorySessionRepository``: the embedded default store and the reference semantics.

Every operation runs to completion without awaiting, so on one event loop it is atomic with
respect to every other task; a lock makes it safe from several threads too. An append is O(1)
amortised, and a ``last_n`` read walks back from the end of the log, so its cost follows the
window, not the log. A fork refers to its parent's events (`_memory_log`): O(1) whatever the
parent's length. Nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from .._lifecycle import closed_error
from .._view import is_boundary
from ..events import ForkPoint, Session, SessionAttributes, SessionEvent
from ..exceptions import EventIdConflict, SessionExists, SessionNotFound
from ..filters import EventFilter
from ..rewinds import LogPoint
from ._memory_log import MemoryLog as _Log
from ._metadata_index import DEFAULT_LIMIT, check_lookup, index_entries, index_entry, indexed_keys
from ._protocol import (
    Lease,
    SessionRepository,
    SessionSnapshot,
    check_batch,
    check_point,
    check_session,
    check_version,
)

__all__ = ["InMemorySessionRepository"]


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
        """Event id -> the session whose own events hold it."""
        self._retained: dict[str, _Log] = {}
        """Deleted sessions whose events forks still read."""
        self._dependents: dict[str, set[str]] = {}
        """Session id -> the live sessions whose prefix reads its events."""
        self._lock = _OpenLock()

    # --- lifecycle -----------------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the store and let go of its sessions; closing again does nothing."""
        if self._lock.closed:
            return
        with self._lock:
            self._logs.clear()
            self._owners.clear()
            self._retained.clear()
            self._dependents.clear()
            self._lock.closed = True

    async def __aenter__(self) -> InMemorySessionRepository:
        self._lock.check_open()
        return self

    # --- sessions ------------------------------------------------------------------------------

    async def save(self, session: Session) -> Session:
        """Create or update a session; an update keeps ``created_at``, the log, the version and
        ``forked_from``."""
        check_session(session)
        with self._lock:
            log = self._logs.get(session.id)
            if session.id in self._retained:
                raise SessionExists(session.id)
            if log is None:
                session = _plain(session)
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
            if session.id in self._logs or session.id in self._retained:
                return False
            self._logs[session.id] = _Log(session=_plain(session))
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
        """Remove the session; keep its events forks read (out of sight) until they go."""
        log = self._logs.pop(session_id, None)
        if log is None:
            return
        for piece in log.pieces:
            readers = self._dependents.get(piece.log.session.id)
            if readers is not None:
                readers.discard(session_id)
            self._collect(piece.log.session.id)
        readers = self._dependents.get(session_id)
        if not readers:
            self._forget(log, 0)
            return
        self._retained[session_id] = log
        needed = max(
            p.stop
            for reader in readers
            for p in self._logs[reader].pieces
            if p.log.session.id == session_id
        )
        self._forget(log, needed)

    def _collect(self, session_id: str) -> None:
        """Forget a deleted session whose events no fork reads any more."""
        if session_id in self._retained and not self._dependents.get(session_id):
            self._dependents.pop(session_id, None)
            self._forget(self._retained.pop(session_id), 0)

    def _forget(self, log: _Log, keep: int) -> None:
        """Forget the own events of ``log`` from index ``keep`` on (their ids are free again)."""
        for event in log.events[keep:]:
            self._owners.pop(event.id, None)
            log.positions.pop(event.id, None)
        del log.events[keep:]

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
                    if log.position(event.id) is None:  # not a prefix event of this fork
                        raise EventIdConflict(event.id, session_id, owner)
                elif owner is None:
                    fresh.append(event)
            if not fresh:  # replays only; an empty batch compares the version
                return bool(batch) or expected_version in (None, log.version)
            if expected_version is not None and log.version != expected_version:
                return False
            for event in fresh:
                log.positions[event.id] = len(log.events)
                log.events.append(event.model_copy(update={"archived": False}))
                self._owners[event.id] = session_id
            log.ends.append(len(log.events))
            log.version += 1
            if is_boundary(fresh[-1]):
                log.boundaries.append(len(log.events) - 1)
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
            version = _own(log, version)
            held = log.leases.get(version)
            if held is not None and held.holder != lease.holder and held.is_live(now):
                return False
            log.leases[version] = lease
            return True

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return
            version = _own(log, version)
            held = log.leases.get(version)
            if held is not None and held.holder == holder:
                del log.leases[version]

    # --- reads ---------------------------------------------------------------------------------

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The matching events of one session (see ``SessionRepository.find_events``)."""
        with self._lock:
            log = self._logs.get(session_id)
            return [] if log is None else filter.read_backwards(log.read(filter.as_of))

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest lease, atomically."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            version = log.version if filter.as_of is None else min(filter.as_of, log.version)
            return SessionSnapshot(
                session=log.session,
                version=version,
                events=tuple(filter.read_backwards(log.read(filter.as_of))),
                lease=log.leases.get(_own(log, version)),
            )

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of all the user's sessions, by timestamp; ties keep log order."""
        unwindowed = filter.without_window()
        with self._lock:
            matched = [
                event
                for log in self._logs.values()
                if log.session.user_id == user_id
                for event in unwindowed.read_backwards(log.read(filter.as_of))
            ]
        matched.sort(key=lambda e: e.timestamp)  # stable: ties keep each session's order
        return filter.apply_window(matched)

    async def get_event_version(self, session_id: str) -> int:
        """The session's version; 0 when unknown."""
        self._lock.check_open()
        log = self._logs.get(session_id)
        return 0 if log is None else log.version

    # --- forks ---------------------------------------------------------------------------------

    async def fork(
        self,
        session_id: str,
        child: Session,
        *,
        at: int | str | None = None,
        before: str | None = None,
    ) -> Session:
        """Create ``child`` as a fork of the session (see ``SessionRepository.fork``): it
        refers to the parent's events, O(1) whatever their number."""
        check_point(at, before)
        check_session(child)
        with self._lock:
            parent = self._logs.get(session_id)
            if parent is None:
                raise SessionNotFound(session_id)
            point = parent.locate(at, before)
            origin = ForkPoint(
                session_id=session_id, version=point.version, event_id=point.event_id
            )
            existing = self._logs.get(child.id)
            if existing is not None or child.id in self._retained:
                if existing is not None and _same_fork(existing.session, child, origin):
                    return existing.session
                raise SessionExists(child.id)
            session = child.model_copy(update={"forked_from": origin})
            pieces = parent.prefix_at(point)
            self._logs[child.id] = _Log(
                session=session, base=point.version, version=point.version, pieces=pieces
            )
            for piece in pieces:
                self._dependents.setdefault(piece.log.session.id, set()).add(child.id)
            return session

    async def locate(
        self, session_id: str, *, at: int | str | None = None, before: str | None = None
    ) -> tuple[LogPoint, int] | None:
        """The point ``at`` or ``before`` names, and the session's version."""
        check_point(at, before)
        with self._lock:
            log = self._logs.get(session_id)
            return None if log is None else (log.locate(at, before), log.version)

    async def find_forks(self, session_id: str) -> list[Session]:
        """The sessions forked from this one, oldest first."""
        with self._lock:
            forks = [
                log.session
                for log in self._logs.values()
                if log.session.forked_from is not None
                and log.session.forked_from.session_id == session_id
            ]
        return sorted(forks, key=lambda s: (s.created_at, s.id))


def _plain(session: Session) -> Session:
    """``session`` as a save creates it: no fork (only `fork` makes one)."""
    if session.forked_from is None:
        return session
    return session.model_copy(update={"forked_from": None})


def _own(log: _Log, version: int) -> int:
    """Where the lease on commit ``version`` lives: 0 (the session) for a commit of a fork's
    prefix."""
    return version if version > log.base else 0


def _same_fork(stored: Session, child: Session, origin: ForkPoint) -> bool:
    """Whether ``stored`` is the fork ``child`` at ``origin`` would make (a repeated call)."""
    return stored.forked_from == origin and stored.user_id == child.user_id
