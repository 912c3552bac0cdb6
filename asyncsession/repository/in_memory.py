"""``InMemorySessionRepository``: the embedded default store and the reference semantics.

Every operation runs to completion without awaiting, so on one event loop it is atomic with
respect to every other task; a lock makes it safe from several threads too. Appends are O(1)
amortised and a ``last_n`` read walks back from the end of the log, so its cost follows the
window, not the log. Nothing survives the process.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Self

from .._lifecycle import closed_error
from ..compaction_protocols import CompactionPlan
from ..events import Session, SessionAttributes, SessionEvent
from ..exceptions import AccessDenied, EventIdConflict, SessionNotFound
from ..filters import EventFilter
from ._compaction_key import compaction_key
from ._metadata_index import DEFAULT_LIMIT, check_lookup, index_entries, index_entry, indexed_keys
from ._protocol import SessionSnapshot, check_batch, check_session
from ._turn import check_creation

__all__ = ["InMemorySessionRepository"]


@dataclass(slots=True)
class _Log:
    session: Session
    events: list[SessionEvent] = field(default_factory=list[SessionEvent])
    ids: set[str] = field(default_factory=set[str])
    version: int = 0
    compacted_at: int = 0
    """How many events the log held right after its newest compaction."""
    compaction: str = ""
    """The newest compaction's key: a retry of that call reports it applied."""
    leases: dict[str, tuple[str, datetime]] = field(default_factory=dict[str, tuple[str, datetime]])
    """Turn leases: request id -> (holder, expiry)."""


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


class InMemorySessionRepository:
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

    async def __aenter__(self) -> Self:
        with self._lock:
            return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

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
        """Every session of the user, oldest first."""
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

    async def acquire_turn_lease(
        self, session_id: str, request_id: str, holder: str, ttl: timedelta
    ) -> bool:
        """Lease the request to ``holder`` unless another holder's lease runs (see
        `asyncsession.repository.TurnLeaseRepository`)."""
        now = datetime.now(UTC)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                raise SessionNotFound(session_id)
            held = log.leases.get(request_id)
            if held is not None and held[0] != holder and held[1] > now:
                return False
            log.leases[request_id] = (holder, now + ttl)
            return True

    async def release_turn_lease(self, session_id: str, request_id: str, holder: str) -> None:
        """Give the lease up if ``holder`` still holds it."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is not None and log.leases.get(request_id, ("",))[0] == holder:
                del log.leases[request_id]

    async def delete(self, session_id: str) -> None:
        """Remove the session and its events."""
        with self._lock:
            self._drop(session_id)

    def _drop(self, session_id: str) -> None:
        log = self._logs.pop(session_id, None)
        if log is not None:
            for event_id in log.ids:
                self._owners.pop(event_id, None)

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``."""
        with self._lock:
            expired = [sid for sid, log in self._logs.items() if log.session.is_expired(before)]
            for session_id in expired:
                self._drop(session_id)
            return len(expired)

    # --- appends -------------------------------------------------------------------------------

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event; a replay of its id is a no-op."""
        await self.append_events(event.session_id, [event])

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        """Append a batch atomically as one version; see ``SessionRepository.append_events``."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                raise SessionNotFound(session_id)
            fresh = self._fresh(session_id, events)
            if not fresh:
                return expected_version is None or bool(events) or log.version == expected_version
            if expected_version is not None and log.version != expected_version:
                return False
            self._append(log, fresh)
            return True

    def _fresh(self, session_id: str, events: Sequence[SessionEvent]) -> list[SessionEvent]:
        """The events of a batch not in the log yet; raises for one that cannot be appended."""
        check_batch(session_id, events)
        fresh: list[SessionEvent] = []
        seen: set[str] = set()
        for event in events:
            owner = self._owners.get(event.id)
            if owner is not None and owner != session_id:
                raise EventIdConflict(event.id, session_id, owner)
            if owner is None and event.id not in seen:
                seen.add(event.id)
                fresh.append(event)
        return fresh

    def _append(self, log: _Log, fresh: Sequence[SessionEvent]) -> None:
        for event in fresh:
            log.events.append(event)
            log.ids.add(event.id)
            self._owners[event.id] = log.session.id
        log.version += 1

    async def start_turn(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        filter: EventFilter,
        *,
        user_id: str | None = None,
        reserve_event_ids: Sequence[str] = (),
        create: Session | None = None,
    ) -> SessionSnapshot:
        """Append ``events`` and return the window before them, in one atomic step.

        See `asyncsession.repository.start_turn`; ``reserve_event_ids`` saves nothing in
        memory.
        """
        check_creation(session_id, user_id, create)
        if create is not None:
            check_session(create)
        with self._lock:
            log = self._logs.get(session_id)
            session = create if log is None else log.session
            if session is None:
                raise SessionNotFound(session_id)
            if user_id is not None and session.user_id != user_id:
                raise AccessDenied(session_id, user_id)
            fresh = self._fresh(session_id, events)
            if log is None:
                log = self._logs[session_id] = _Log(session=session)
            ids = {event.id for event in events}
            window = tuple(_read(log, filter, skip=ids))
            if fresh:
                self._append(log, fresh)
            return SessionSnapshot(session=log.session, version=log.version, events=window)

    # --- reads ---------------------------------------------------------------------------------

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The matching events of one session, oldest first."""
        with self._lock:
            log = self._logs.get(session_id)
            return [] if log is None else _read(log, filter)

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version and its matching events, taken atomically."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            return SessionSnapshot(
                session=log.session, version=log.version, events=tuple(_read(log, filter))
            )

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of all the user's sessions, by timestamp; ties keep log order."""
        unwindowed = filter.without_window()
        with self._lock:
            matched = [
                event
                for log in self._logs.values()
                if log.session.user_id == user_id
                for event in unwindowed.apply(log.events, compacted_at=log.compacted_at)
            ]
        matched.sort(key=lambda e: e.timestamp)  # stable: ties keep each session's log order
        return filter.apply_window(matched)

    async def get_event_version(self, session_id: str) -> int:
        """The session's version; 0 when unknown."""
        self._lock.check_open()
        log = self._logs.get(session_id)
        return 0 if log is None else log.version

    # --- compaction ----------------------------------------------------------------------------

    async def apply_compaction(
        self, session_id: str, plan: CompactionPlan, expected_version: int
    ) -> bool:
        """Apply ``plan`` if the version is still ``expected_version``."""
        check_batch(session_id, plan.inserted_events)
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                raise SessionNotFound(session_id)
            key = compaction_key(plan, expected_version)
            if log.version != expected_version:
                return log.compaction == key  # a retry of the applied newest compaction
            for event in plan.inserted_events:
                owner = self._owners.get(event.id)
                if owner is not None:
                    raise EventIdConflict(event.id, session_id, owner)
            log.events = plan.apply_to(log.events, session_id=session_id)
            for event in plan.inserted_events:
                log.ids.add(event.id)
                self._owners[event.id] = session_id
            log.version += 1
            log.compacted_at = len(log.events)
            log.compaction = key
            return True


def _read(
    log: _Log, filter: EventFilter, skip: frozenset[str] | set[str] = frozenset()
) -> list[SessionEvent]:
    """The events ``filter`` selects from the log, as if the events ``skip`` names were not in
    it."""
    if filter.last_n is None:
        if not skip:
            return filter.apply(log.events, compacted_at=log.compacted_at)
        kept = [(i, e) for i, e in enumerate(log.events) if e.id not in skip]
        compacted_at = sum(1 for i, _ in kept if i < log.compacted_at)
        return filter.apply([e for _, e in kept], compacted_at=compacted_at)
    # Walk back from the end so the cost follows the window, not the log.
    n = filter.last_n
    window: list[SessionEvent] = []
    matches = _matching_backwards(log, filter, skip)
    for event in matches:
        window.append(event)
        if len(window) == n:
            break
    if len(window) == n and not filter.has_text_criteria and not window[-1].is_turn_start:
        extension: list[SessionEvent] = []
        for event in matches:
            extension.append(event)
            if event.is_turn_start:
                window.extend(extension)
                break
    window.reverse()
    return window


def _matching_backwards(
    log: _Log, filter: EventFilter, skip: frozenset[str] | set[str]
) -> Iterator[SessionEvent]:
    events = log.events
    for index in range(len(events) - 1, -1, -1):
        event = events[index]
        if event.id in skip or not filter.matches(event):
            continue
        if filter.active_view and not event.is_message and index < log.compacted_at:
            continue
        yield event
