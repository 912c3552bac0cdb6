"""``InMemorySessionRepository``: the embedded default store and the reference semantics.

Every operation runs to completion without awaiting, so on one event loop it is atomic with
respect to every other task; a lock makes it safe from several threads too. An append is O(1)
amortised (a compaction's also takes its view), and a ``last_n`` read walks back from the end
of the log, so its cost follows the window, not the log. Nothing survives the process.

**Encryption** (``encryption=``): each event's content and each session's metadata are kept
encrypted with the owner's data key (in a key vault of this process), as the MongoDB store keeps
them, and decrypted on read: a read takes the log under the lock and decrypts, outside it, only
the events it reaches. **Large bodies** are offloaded as the MongoDB store offloads them: the log
holds the preview, a dictionary beside it the whole event.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, cast

from bson.binary import Binary

from .._lifecycle import closed_error
from .._view import ReadLog
from ..compaction_protocols import CompactionRecord
from ..encryption import EncryptionOptions, UserKeys
from ..events import EventType, Session, SessionAttributes, SessionEvent
from ..exceptions import EventIdConflict, SessionNotFound
from ..filters import EventFilter
from ..memory import MemoryStore
from ._erasure import ErasureReport, InMemoryErasureLedger, UserEraser
from ._metadata_index import DEFAULT_LIMIT, check_lookup, index_entries, index_entry, indexed_keys
from ._offload import DEFAULT_OFFLOAD_THRESHOLD, DEFAULT_PREVIEW_CHARS, Offloading
from ._protocol import (
    Lease,
    SessionRepository,
    SessionSnapshot,
    check_batch,
    check_session,
    check_version,
)
from ._sealing import LogView, Sealed, keys_of, open_event, read_sealed, seal_event, search_sealed

__all__ = ["InMemorySessionRepository"]


@dataclass(slots=True)
class _Log:
    session: Session
    """The session; its metadata is empty while it is sealed in ``metadata``."""
    entries: list[str] = field(default_factory=list[str])
    """The index entries of the session's metadata, for ``find_by_metadata``."""
    metadata: Binary | None = None
    """The session's metadata, encrypted (with encryption on and metadata to keep)."""
    events: list[SessionEvent | Sealed] = field(default_factory=list[SessionEvent | Sealed])
    """The log: events, or sealed events with encryption on; previews of offloaded ones."""
    bodies: dict[str, SessionEvent | Sealed] = field(
        default_factory=dict[str, SessionEvent | Sealed]
    )
    """The whole events the log holds previews of, by id."""
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
        """The log of a store without encryption, whose entries are all events."""
        events = cast(list[SessionEvent], self.events)
        return ReadLog(events, self.boundary, self.view, self.positions)

    def taken(self) -> LogView:
        """The log as it is now, to read outside the lock."""
        return LogView(
            session_id=self.session.id,
            user_id=self.session.user_id,
            entries=self.events,
            count=len(self.events),
            boundary=self.boundary,
            view=self.view,
            positions=self.positions,
        )


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


_Entry = SessionEvent | Sealed


class InMemorySessionRepository(SessionRepository):
    """Sessions and their logs in process memory.

    It shares the lifecycle of every store: `aclose` (idempotent) ends it, ``async with``
    closes it on exit, and a call after closing raises `UsageError`.

    Args:
        indexed_metadata_keys: the metadata keys, besides the well-known
            [`SessionAttributes`][asyncsession.events.SessionAttributes], that
            [`find_by_metadata`][asyncsession.repository.in_memory.InMemorySessionRepository.find_by_metadata]
            looks sessions up by.
        encryption: keep each event's content and each session's metadata encrypted with the
            data key of the session's owner (`asyncsession.encryption`; local master keys only,
            the keys kept in this process). The indexed metadata values stay readable.
        offload_threshold: events whose content takes more bytes than this as JSON are kept
            whole beside the log, which holds a preview (see
            [`OffloadedBody`][asyncsession.repository.OffloadedBody]); ``None``: never.
        preview_chars: how many characters of each text a preview keeps.
    """

    def __init__(
        self,
        *,
        indexed_metadata_keys: Iterable[str] = (),
        encryption: EncryptionOptions | UserKeys | None = None,
        offload_threshold: int | None = DEFAULT_OFFLOAD_THRESHOLD,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
    ) -> None:
        self._indexed_keys = indexed_keys(indexed_metadata_keys)
        self._keys = keys_of(encryption, None)
        self._offloading = Offloading.of(offload_threshold, preview_chars)
        self._ledger = InMemoryErasureLedger()
        self._logs: dict[str, _Log] = {}
        self._owners: dict[str, str] = {}
        self._lock = _OpenLock()

    @property
    def keys(self) -> UserKeys | None:
        """The user keys the store encrypts with; ``None`` without encryption."""
        return self._keys

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

    async def _sealed(self, session: Session) -> tuple[Session, Binary | None]:
        """The session as kept, and its metadata encrypted (``None``: kept in clear)."""
        if self._keys is None or not session.metadata:
            return session, None
        metadata = json.dumps(session.metadata).encode()
        sealed = await self._keys.encrypt(session.user_id, metadata)
        return session.model_copy(update={"metadata": {}}), sealed

    async def _opened(self, kept: tuple[Session, Binary | None]) -> Session:
        """The session a kept one stands for, its metadata decrypted."""
        session, sealed = kept
        if sealed is None or self._keys is None:
            return session
        metadata: dict[str, Any] = json.loads(await self._keys.decrypt(session.user_id, sealed))
        return session.model_copy(update={"metadata": metadata})

    async def save(self, session: Session) -> Session:
        """Create or update a session; an update keeps ``created_at``, the log and the version."""
        check_session(session)
        kept, sealed = await self._sealed(session)
        entries = index_entries(session, self._indexed_keys)
        with self._lock:
            log = self._logs.get(session.id)
            if log is None:
                self._logs[session.id] = _Log(session=kept, entries=entries, metadata=sealed)
                return session
            log.session = log.session.model_copy(
                update={
                    "user_id": kept.user_id,
                    "expires_at": kept.expires_at,
                    "metadata": dict(kept.metadata),
                }
            )
            log.entries, log.metadata = entries, sealed
            stored = log.session
        if sealed is None:
            return stored
        return stored.model_copy(update={"metadata": dict(session.metadata)})

    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists."""
        check_session(session)
        kept, sealed = await self._sealed(session)
        entries = index_entries(session, self._indexed_keys)
        with self._lock:
            if session.id in self._logs:
                return False
            self._logs[session.id] = _Log(session=kept, entries=entries, metadata=sealed)
            return True

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            kept = (log.session, log.metadata)
        return await self._opened(kept)

    async def _sessions(self, kept: list[tuple[Session, Binary | None]]) -> list[Session]:
        kept.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
        return [await self._opened(pair) for pair in kept]

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user, oldest first (by ``created_at``, then id)."""
        with self._lock:
            kept = [
                (log.session, log.metadata)
                for log in self._logs.values()
                if log.session.user_id == user_id
            ]
        return await self._sessions(kept)

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
            kept = [
                (log.session, log.metadata) for log in self._logs.values() if entry in log.entries
            ]
        kept.sort(key=lambda pair: (pair[0].created_at, pair[0].id))
        return await self._sessions(kept[:limit])

    async def delete(self, session_id: str) -> None:
        """Remove the session, its events and their offloaded bodies."""
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

    # --- erasure -------------------------------------------------------------------------------

    async def erase_user(
        self, user_id: str, *, memories: MemoryStore | None = None
    ) -> ErasureReport:
        """Erase ``user_id``: their data key first (with encryption on), then their sessions and,
        given ``memories`` (a memory store of any scope), their memory files. A `UserEraser`
        over this store and a ledger of its own; see `asyncsession.erasure`."""
        eraser = UserEraser(self, ledger=self._ledger, keys=self._keys, memories=memories)
        return await eraser.erase_user(user_id)

    async def finish_erasures(self, *, memories: MemoryStore | None = None) -> list[ErasureReport]:
        """Finish every erasure of this store that an error interrupted."""
        eraser = UserEraser(self, ledger=self._ledger, keys=self._keys, memories=memories)
        return await eraser.finish_pending()

    # --- appends -------------------------------------------------------------------------------

    async def _prepare(
        self, session_id: str, batch: list[SessionEvent]
    ) -> dict[str, tuple[_Entry, _Entry | None]]:
        """Each event as the log keeps it (its preview when offloaded; sealed with encryption
        on) and, when offloaded, the whole event as kept beside the log."""
        log = self._logs.get(session_id)
        if log is None:
            raise SessionNotFound(session_id)
        user_id = log.session.user_id
        prepared: dict[str, tuple[_Entry, _Entry | None]] = {}
        for event in batch:
            kept = event.model_copy(update={"archived": False}) if event.archived else event
            whole: SessionEvent | None = None
            content = None if self._offloading is None else self._offloading.needs(kept)
            if content is not None and self._offloading is not None:
                whole, kept = kept, self._offloading.preview(kept, len(content))
            if self._keys is None:
                prepared[event.id] = (kept, whole)
                continue
            sealed = await seal_event(self._keys, user_id, kept)
            whole_sealed = None if whole is None else await seal_event(self._keys, user_id, whole)
            prepared[event.id] = (sealed, whole_sealed)
        return prepared

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
        self._lock.check_open()
        prepared = await self._prepare(session_id, batch)
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
                kept, whole = prepared[event.id]
                log.positions[event.id] = len(log.events)
                log.events.append(kept)
                if whole is not None:
                    log.bodies[event.id] = whole
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

    async def _read(self, taken: LogView, filter: EventFilter) -> list[SessionEvent]:
        """What ``filter`` selects from a log of a store with encryption on."""
        assert self._keys is not None
        if filter.has_text_criteria:
            where = f"session {taken.session_id!r}"
            return (await search_sealed(self._keys, [taken], filter, where))[0]
        return await read_sealed(self._keys, taken, filter)

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The matching events of one session (see ``SessionRepository.find_events``)."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return []
            if self._keys is None:
                return filter.read_backwards(log.read())
            taken = log.taken()
        return await self._read(taken, filter)

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest lease, atomically."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            if self._keys is None:
                return SessionSnapshot(
                    session=log.session,
                    version=log.version,
                    events=tuple(filter.read_backwards(log.read())),
                    lease=log.leases.get(log.version),
                )
            kept = (log.session, log.metadata)
            version, lease, taken = log.version, log.leases.get(log.version), log.taken()
        return SessionSnapshot(
            session=await self._opened(kept),
            version=version,
            events=tuple(await self._read(taken, filter)),
            lease=lease,
        )

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of all the user's sessions, by timestamp; ties keep log order."""
        unwindowed = filter.without_window()
        found: list[list[SessionEvent]] = []
        with self._lock:
            logs = [log for log in self._logs.values() if log.session.user_id == user_id]
            taken = [log.taken() for log in logs]
            if self._keys is None:
                found = [unwindowed.read_backwards(log.read()) for log in logs]
        if self._keys is not None and unwindowed.has_text_criteria:
            where = f"the sessions of user {user_id!r}"
            found = await search_sealed(self._keys, taken, unwindowed, where)
        elif self._keys is not None:
            found = [await read_sealed(self._keys, log, unwindowed) for log in taken]
        matched = [event for events in found for event in events]
        matched.sort(key=lambda e: e.timestamp)  # stable: ties keep each session's order
        return filter.apply_window(matched)

    async def get_event_version(self, session_id: str) -> int:
        """The session's version; 0 when unknown."""
        self._lock.check_open()
        log = self._logs.get(session_id)
        return 0 if log is None else log.version

    async def read_body(self, session_id: str, event_id: str) -> SessionEvent | None:
        """The event as it was appended, whole (see ``SessionRepository.read_body``)."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            entry = log.bodies.get(event_id)
            if entry is None:
                index = log.positions.get(event_id)
                if index is None:
                    return None
                entry = log.events[index]
            user_id = log.session.user_id
        if isinstance(entry, Sealed):
            assert self._keys is not None
            return await open_event(self._keys, user_id, session_id, entry)
        return entry
