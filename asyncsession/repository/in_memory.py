"""``InMemorySessionRepository``: the embedded default store and the reference semantics.

Every operation runs to completion without awaiting, so on one event loop it is atomic with
respect to every other task; a lock makes it safe from several threads too. An append is O(1)
amortised, and a ``last_n`` read walks back from the end of the log, so its cost follows the
window, not the log. A fork refers to its parent's events (`_memory_log`): O(1) whatever the
parent's length. Nothing survives the process.

**Encryption** (``encryption=``): each event's content and each session's metadata are kept
encrypted with the owner's data key (in a key vault of this process), as the MongoDB store keeps
them, and decrypted on read: a read takes the log under the lock and decrypts, outside it, only
the events it reaches. **Large bodies** are offloaded as the MongoDB store offloads them: the log
holds the preview, a dictionary beside it the whole event. A fork belongs to its parent's owner,
so it reads the parent's sealed events with the same key, and its parent's bodies by reference.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from typing import Any

from bson.binary import Binary

from .._lifecycle import closed_error
from .._offload import DEFAULT_OFFLOAD_THRESHOLD, DEFAULT_PREVIEW_CHARS, Offloading
from .._view import is_boundary
from ..encryption import EncryptionOptions, UserKeys
from ..events import PRINCIPAL_NAME, ForkPoint, Session, SessionEvent
from ..exceptions import EventIdConflict, SessionExists, SessionNotFound
from ..filters import EventFilter
from ..memory import MemoryStore
from ..rewinds import LogPoint
from ._erasure import ErasureReport, Ledger, UserEraser
from ._memory_log import Entry as _Entry
from ._memory_log import MemoryLog as _Log
from ._metadata_index import DEFAULT_LIMIT, check_lookup, index_entries, index_entry, indexed_keys
from ._protocol import (
    Lease,
    SessionRepository,
    SessionSnapshot,
    check_batch,
    check_owner,
    check_point,
    check_session,
    check_version,
)
from ._sealing import LogView, Sealed, keys_of, open_event, read_sealed, seal_event, search_sealed

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
        indexed_metadata_keys: the metadata keys, besides the well-known ones of
            [`Session.metadata`][asyncsession.events.Session.metadata], that
            [`find_by_metadata`][asyncsession.repository.in_memory.InMemorySessionRepository.find_by_metadata]
            looks sessions up by.
        encryption: keep each event's content and each session's metadata encrypted with the
            data key of the session's owner (`asyncsession.encryption`; local master keys only,
            the keys kept in this process). The indexed metadata values stay readable.
        offload_threshold: events whose content takes more bytes than this as JSON are kept
            whole beside the log, which holds a preview (`SessionRepository.read_body`);
            ``None``: never.
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
        self._ledger = Ledger()
        self._logs: dict[str, _Log] = {}
        self._owners: dict[str, str] = {}
        """Event id -> the session whose own events hold it."""
        self._retained: dict[str, _Log] = {}
        """Deleted sessions whose events forks still read."""
        self._dependents: dict[str, set[str]] = {}
        """Session id -> the live sessions whose prefix reads its events."""
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
            self._retained.clear()
            self._dependents.clear()
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
        """Create or update a session; an update keeps ``created_at``, the log, the version and
        ``forked_from``.

        Raises:
            SessionExists: the id is a deleted session's whose events forks still read.
        """
        check_session(session)
        kept, sealed = await self._sealed(_plain(session))
        entries = index_entries(session, self._indexed_keys)
        with self._lock:
            log = self._logs.get(session.id)
            if session.id in self._retained:
                raise SessionExists(session.id)
            if log is None:
                self._logs[session.id] = _Log(session=kept, entries=entries, metadata=sealed)
                return _plain(session)
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
        kept, sealed = await self._sealed(_plain(session))
        entries = index_entries(session, self._indexed_keys)
        with self._lock:
            if session.id in self._logs or session.id in self._retained:
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
        if name == PRINCIPAL_NAME:
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
        """Remove the session; keep its events that forks read (out of sight) until they go."""
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
            self._dependents.pop(session_id, None)
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
        """Forget the own events of ``log`` from index ``keep`` on (their ids are free again),
        with their bodies."""
        for event_id in log.forget(keep):
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
        given ``memories`` (a memory store of any scope), their memory files, as
        [`MongoSessionRepository.erase_user`][asyncsession.repository.mongo.MongoSessionRepository.erase_user]
        does, with a ledger in this process."""
        eraser = UserEraser(self, self._ledger, self._keys, memories)
        return await eraser.erase_user(user_id)

    async def finish_erasures(self, *, memories: MemoryStore | None = None) -> list[ErasureReport]:
        """Finish every erasure of this store that an error interrupted."""
        eraser = UserEraser(self, self._ledger, self._keys, memories)
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
                    if log.position(event.id) is None:  # not a prefix event of this fork
                        raise EventIdConflict(event.id, session_id, owner)
                elif owner is None:
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
                return filter.read_backwards(log.read(filter.as_of))
            taken = log.taken(filter.as_of)
        return await self._read(taken, filter)

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest lease, atomically."""
        with self._lock:
            log = self._logs.get(session_id)
            if log is None:
                return None
            version = log.version if filter.as_of is None else min(filter.as_of, log.version)
            lease = log.leases.get(_own(log, version))
            if self._keys is None:
                return SessionSnapshot(
                    session=log.session,
                    version=version,
                    events=tuple(filter.read_backwards(log.read(filter.as_of))),
                    lease=lease,
                )
            kept = (log.session, log.metadata)
            taken = log.taken(filter.as_of)
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
            taken = [log.taken(filter.as_of) for log in logs]
            if self._keys is None:
                found = [unwindowed.read_backwards(log.read(filter.as_of)) for log in logs]
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
            entry = log.body(event_id)
            if entry is None:
                return None
            user_id = log.session.user_id
        if isinstance(entry, Sealed):
            assert self._keys is not None
            return await open_event(self._keys, user_id, session_id, entry)
        return entry

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
        refers to the parent's events and bodies, O(1) whatever their number."""
        check_point(at, before)
        check_session(child)
        kept, sealed = await self._sealed(_plain(child))
        entries = index_entries(child, self._indexed_keys)
        with self._lock:
            parent = self._logs.get(session_id)
            if parent is None:
                raise SessionNotFound(session_id)
            check_owner(parent.session, child)
            point = parent.locate(at, before)
            origin = ForkPoint(
                session_id=session_id, version=point.version, event_id=point.event_id
            )
            existing = self._logs.get(child.id)
            if existing is not None or child.id in self._retained:
                if existing is not None and existing.session.forked_from == origin:
                    stored = (existing.session, existing.metadata)
                else:
                    raise SessionExists(child.id)
            else:
                pieces = parent.prefix_at(point)
                log = _Log(
                    session=kept.model_copy(update={"forked_from": origin}),
                    entries=entries,
                    metadata=sealed,
                    base=point.version,
                    version=point.version,
                    pieces=pieces,
                )
                self._logs[child.id] = log
                for piece in pieces:
                    self._dependents.setdefault(piece.log.session.id, set()).add(child.id)
                stored = (log.session, log.metadata)
        return await self._opened(stored)

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
            kept = [
                (log.session, log.metadata)
                for log in self._logs.values()
                if log.session.forked_from is not None
                and log.session.forked_from.session_id == session_id
            ]
        return await self._sessions(kept)


def _plain(session: Session) -> Session:
    """``session`` as a save creates it: no fork (only `fork` makes one)."""
    if session.forked_from is None:
        return session
    return session.model_copy(update={"forked_from": None})


def _own(log: _Log, version: int) -> int:
    """Where the lease on commit ``version`` lives: 0 (the session) for a commit of a fork's
    prefix."""
    return version if version > log.base else 0
