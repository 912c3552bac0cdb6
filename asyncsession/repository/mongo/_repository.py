"""The ``MongoSessionRepository`` class; the package docstring describes the stored layout."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any, ClassVar, Final, Self

from pymongo import AsyncMongoClient, WriteConcern
from pymongo.asynchronous.database import AsyncDatabase

from ..._checks import require_database
from ..._lifecycle import Closable
from ..._pymongo_errors import storage_errors
from ..._shield import shielded
from ...compaction_protocols import CompactionPlan
from ...events import Session, SessionEvent
from ...exceptions import SessionNotFound, UsageError
from ...filters import EventFilter
from .._metadata_index import DEFAULT_LIMIT, check_lookup
from .._metadata_index import indexed_keys as _indexed_keys
from .._protocol import SessionSnapshot, check_batch, check_session
from .._turn import check_creation
from ._batch import FindBatcher
from ._cache import DEFAULT_CACHE_BYTES, EventCache
from ._client import driver_info, identify
from ._codec import (
    SESSION_PROJECTION,
    Doc,
    new_session_doc,
    session_from_doc,
)
from ._delete import delete_expired, delete_session
from ._indexes import create_indexes
from ._layout import EVENT_IDS, EVENTS, FENCES, ID, SESSIONS, TAIL, USER_ID
from ._leases import acquire_lease, release_lease
from ._metadata import find_by_metadata, with_index_entries
from ._prepare import prepare
from ._read import LogReader
from ._sessions import insert_session, save_session
from ._state import LogState, decode_state
from ._store import Store, session_version
from ._timeouts import with_web_timeouts
from ._user_reads import read_user_events
from ._write import LogWriter

__all__ = ["MongoSessionRepository"]

_WRITE_CONCERN: Final = WriteConcern("majority", j=True)
_WINDOW_SLACK: Final = 4
"""Tail entries a ``last_n`` read fetches beyond ``n``, so that a window that reaches back to
its turn's start, or skips a few archived or custom events, still needs one read."""


def _window_projection(filter: EventFilter, added: int = 0) -> Doc | None:
    """For a ``last_n`` window: a projection of the session document that returns only the
    newest tail entries the window is likely to need (``added`` more for the events a commit
    appends); ``None`` (the whole document) for any other read."""
    n = filter.last_n
    if n is None or filter.page_size is not None:
        return None
    # Excluding ``fences`` (which reads never need) makes it an exclusion projection on every
    # server and on mongomock, which takes a lone ``$slice`` for an inclusion.
    return {TAIL: {"$slice": -(n + max(_WINDOW_SLACK, n // 4) + added)}, FENCES: 0}


def _complete(state: LogState, filter: EventFilter) -> bool:
    """Whether the newest tail entries of a `partial` state answer ``filter`` as the whole tail
    would: they hold every unarchived entry, and the filter leaves archived events out."""
    return (filter.exclude_archived or filter.active_view) and state.holds_unarchived


def _unique(events: Sequence[SessionEvent]) -> list[SessionEvent]:
    seen: set[str] = set()
    unique: list[SessionEvent] = []
    for event in events:
        if event.id not in seen:
            seen.add(event.id)
            unique.append(event)
    return unique


class MongoSessionRepository(Closable):
    """Sessions and their event logs in MongoDB; see the module docs for the design.

    Args:
        database: a PyMongo ``AsyncDatabase`` (at run time a Motor or mongomock-motor database
            works too). It is borrowed: `aclose` never closes its client.
        sessions_collection: the collection of session documents.
        events_collection: the collection of events that left the session documents.
        event_ids_collection: the registry of event ids.
        cache_bytes: the process memory (estimated) the cache of decoded events may hold, 32 MiB
            by default (``0``: none); the tail hints and id reservations get a sixteenth each.
            Bodies over 16 KiB are never cached; every read returns events of its own.
        indexed_metadata_keys: the metadata keys, besides the well-known
            [`SessionAttributes`][asyncsession.events.SessionAttributes], that
            [`find_by_metadata`][asyncsession.repository.mongo.MongoSessionRepository.find_by_metadata]
            looks sessions up by (string values only). A session saved before a key was declared
            is found by it once it is saved again.

    Call [`ensure_indexes`][asyncsession.repository.mongo.MongoSessionRepository.ensure_indexes]
    once (it is idempotent) before serving traffic.
    """

    _keep_using: ClassVar[str] = "the store"

    def __init__(
        self,
        database: AsyncDatabase[Any],
        *,
        sessions_collection: str = SESSIONS,
        events_collection: str = EVENTS,
        event_ids_collection: str = EVENT_IDS,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        indexed_metadata_keys: Iterable[str] = (),
    ) -> None:
        require_database(database, "database", "MongoSessionRepository")
        names = (sessions_collection, events_collection, event_ids_collection)
        self._setup(
            database, None, *names, cache_bytes=cache_bytes, indexed_keys=indexed_metadata_keys
        )
        identify(getattr(database, "client", None))

    def _setup(
        self,
        database: AsyncDatabase[Any],
        client: AsyncMongoClient[Any] | None,
        sessions_collection: str,
        events_collection: str,
        event_ids_collection: str,
        *,
        cache_bytes: int,
        indexed_keys: Iterable[str] = (),
    ) -> None:
        keys = _indexed_keys(indexed_keys)
        if cache_bytes < 0:
            raise UsageError(f"cache_bytes must be >= 0, not {cache_bytes}")
        self._database = database
        self._client = client
        self._store = Store(
            sessions=database.get_collection(sessions_collection, write_concern=_WRITE_CONCERN),
            events=database.get_collection(events_collection, write_concern=_WRITE_CONCERN),
            event_ids=database.get_collection(event_ids_collection, write_concern=_WRITE_CONCERN),
            cache=EventCache(cache_bytes),
            cache_bytes=cache_bytes,
            indexed_keys=keys,
        )
        self._reader = LogReader(self._store)
        self._writer = LogWriter(self._store)
        self._finds = FindBatcher(lambda: self._store.sessions)

    @classmethod
    def from_uri(
        cls,
        uri: str,
        db_name: str,
        *,
        sessions_collection: str = SESSIONS,
        events_collection: str = EVENTS,
        event_ids_collection: str = EVENT_IDS,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
        indexed_metadata_keys: Iterable[str] = (),
        **client_options: Any,
    ) -> Self:
        """A repository with a client of its own, which
        [`aclose`][asyncsession.repository.mongo.MongoSessionRepository.aclose] closes.

        ``client_options`` go to ``AsyncMongoClient``; ``tz_aware`` defaults to ``True``. The
        client's timeouts suit a web request: ``serverSelectionTimeoutMS=5000``,
        ``connectTimeoutMS=5000``, ``socketTimeoutMS=10000`` and ``timeoutMS=5000`` (one bound
        per operation, end to end) unless ``client_options`` or the URI set them, so an
        unreachable or a frozen server raises `StorageUnavailable` within about five seconds
        instead of PyMongo's thirty or never. ``cache_bytes`` and ``indexed_metadata_keys`` are as
        for the constructor.
        """
        options: dict[str, Any] = {"tz_aware": True, **with_web_timeouts(uri, client_options)}
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, driver=driver_info(), **options)
        repository = cls.__new__(cls)
        names = (sessions_collection, events_collection, event_ids_collection)
        repository._setup(
            client[db_name],
            client,
            *names,
            cache_bytes=cache_bytes,
            indexed_keys=indexed_metadata_keys,
        )
        return repository

    # --- lifecycle -------------------------------------------------------------------------------

    async def ensure_indexes(self) -> None:
        """Create the indexes the store needs; safe to call any number of times."""
        self._check_open()
        await create_indexes(self._store, self._database)

    async def aclose(self) -> None:
        """Stop using the store (first letting go of the registrations of ids this process
        moved below the tail, see ``_rollforward``); closes the client only if
        [`from_uri`][asyncsession.repository.mongo.MongoSessionRepository.from_uri] made it."""
        await super().aclose()

    async def _release(self) -> None:
        await shielded(self._writer.let_go())
        if self._client is not None:
            await self._client.close()

    # --- sessions --------------------------------------------------------------------------------

    async def save(self, session: Session) -> Session:
        """Create the session, or update its owner, expiry and metadata; returns it as stored."""
        self._check_open()
        check_session(session)
        return await shielded(save_session(self._store, session))

    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists; ``True`` if this call inserted it."""
        self._check_open()
        check_session(session)
        return await shielded(insert_session(self._store, session))

    async def acquire_turn_lease(
        self, session_id: str, request_id: str, holder: str, ttl: timedelta
    ) -> bool:
        """Lease the request to ``holder`` unless another holder's lease runs (see
        `asyncsession.repository.TurnLeaseRepository`): one conditional update."""
        self._check_open()
        return await shielded(acquire_lease(self._store, session_id, request_id, holder, ttl))

    async def release_turn_lease(self, session_id: str, request_id: str, holder: str) -> None:
        """Give the lease up if ``holder`` still holds it."""
        self._check_open()
        await shielded(release_lease(self._store, session_id, request_id, holder))

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        self._check_open()
        with storage_errors(f"read session {session_id!r}"):
            doc = await self._store.sessions.find_one({ID: session_id}, SESSION_PROJECTION)
        return None if doc is None else session_from_doc(doc)

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user, oldest first."""
        self._check_open()
        with storage_errors(f"read sessions of user {user_id!r}"):
            docs = await self._store.sessions.find({USER_ID: user_id}, SESSION_PROJECTION).to_list(
                None
            )
        sessions = [session_from_doc(doc) for doc in docs]
        return sorted(sessions, key=lambda s: (s.created_at, s.id))

    async def find_by_metadata(
        self, name: str, value: str, *, limit: int = DEFAULT_LIMIT
    ) -> list[Session]:
        """The sessions whose metadata holds ``value`` under the indexed key ``name``, oldest
        first, at most ``limit``: one ``find`` on an index (the principal's is ``user_id``'s)."""
        self._check_open()
        check_lookup(name, value, limit, self._store.indexed_keys)
        return await find_by_metadata(self._store, name, value, limit)

    async def delete(self, session_id: str) -> None:
        """Remove the session, its events and its event ids; an unknown id is not an error.

        The writes are ordered so that a delete that dies halfway is finished by the next
        delete of the id or by any sweep (see ``asyncsession.repository.mongo._delete``).
        """
        self._check_open()
        await shielded(delete_session(self._store, session_id))

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``, with its events.

        Each session is re-checked and claimed atomically, so a TTL extended meanwhile wins.
        Each is shielded on its own: a cancelled sweep stops after the session it is on.
        """
        self._check_open()
        return await delete_expired(self._store, before)

    # --- appends ---------------------------------------------------------------------------------

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event to ``event.session_id``'s log; a replay of its id is a no-op."""
        await self.append_events(event.session_id, [event])

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        """Append a batch atomically, in order, as one new version.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: an event id belongs to another session; nothing is written.
            EventTooLarge: an event is over the server's document size limit; nothing is
                written.
            UsageError: an event belongs to another session than ``session_id``.
        """
        self._check_open()
        check_batch(session_id, events)
        if not events:
            version = await session_version(self._store, session_id)
            if version is None:
                raise SessionNotFound(session_id)
            return expected_version is None or version == expected_version
        prepared = prepare(session_id, _unique(events), self._store.max_document_size)
        return await shielded(self._writer.append_batch(session_id, prepared, expected_version))

    async def draw_event_id(self, session_id: str) -> str:
        """A new random event id for ``session_id``, registered ahead when it can be."""
        self._check_open()
        return self._writer.draw(session_id)

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
        """Append ``events`` and return the window before them: the commit, after the
        registration of ids not registered ahead; the insert of a new session.

        See `asyncsession.repository.start_turn`.
        """
        self._check_open()
        check_batch(session_id, events)
        check_creation(session_id, user_id, create)
        if create is not None:
            check_session(create)
        new = (
            None
            if create is None
            else with_index_entries(new_session_doc(create), create, self._store.indexed_keys)
        )
        unique = _unique(events)
        prepared = prepare(session_id, unique, self._store.max_document_size)
        doc = await shielded(
            self._writer.start_turn(
                session_id,
                prepared,
                user_id=user_id,
                reserve_ids=reserve_event_ids,
                create=new,
                window=_window_projection(filter, len(unique)),
            )
        )
        state = decode_state(doc)
        exclude = frozenset(event.id for event in unique)
        if state.partial and not _complete(state, filter):
            window = await self._reader.read_slice(state, filter, exclude=exclude)
            if window is not None:
                return SessionSnapshot(
                    session=state.session, version=state.version, events=tuple(window)
                )
            # The newest entries did not hold the window: read the whole tail, leaving out
            # what was appended after this commit.
            whole = await self._log(session_id)
            if whole is None:
                raise SessionNotFound(session_id)
            later = {e.id for e in decode_state(whole).tail if e.seq > state.counter}
            window = await self._reader.read(decode_state(whole), filter, exclude=exclude | later)
        else:
            window = await self._reader.read(state, filter, exclude=exclude)
        return SessionSnapshot(session=state.session, version=state.version, events=tuple(window))

    # --- reads -----------------------------------------------------------------------------------

    async def get_event_version(self, session_id: str) -> int:
        """The session's version: 0 at first, +1 per appended batch and per compaction."""
        self._check_open()
        return await session_version(self._store, session_id) or 0

    def _decode(self, doc: Doc) -> LogState:
        """Decode a whole session document, noting its tail for the next commit."""
        state = decode_state(doc)
        self._writer.note(state)
        return state

    async def _log(self, session_id: str, projection: Doc | None = None) -> Doc | None:
        with storage_errors(f"read session {session_id!r}"):
            return await self._finds.find_one(session_id, projection)

    async def _read(
        self, session_id: str, filter: EventFilter
    ) -> tuple[LogState, list[SessionEvent]] | None:
        """The decoded session document and the matching events; ``None`` for no session.

        A ``last_n`` window first reads only the newest tail entries; when they do not hold
        the window, the whole document is read (a second command)."""
        doc = await self._log(session_id, _window_projection(filter))
        if doc is None:
            return None
        state = self._decode(doc)
        if state.partial and not _complete(state, filter):
            events = await self._reader.read_slice(state, filter)
            if events is not None:
                return state, events
            doc = await self._log(session_id)
            if doc is None:
                return None
            state = self._decode(doc)
        return state, await self._reader.read(state, filter)

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The session's matching events, oldest first; empty for an unknown session."""
        self._check_open()
        found = await self._read(session_id, filter)
        return [] if found is None else found[1]

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version and its matching events, from one session document."""
        self._check_open()
        found = await self._read(session_id, filter)
        if found is None:
            return None
        state, events = found
        return SessionSnapshot(session=state.session, version=state.version, events=tuple(events))

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of every session of the user, by timestamp, with a plain window.

        Sessions are read in chunks of 256 with the window pushed down; see
        ``asyncsession.repository.mongo._user_reads``.
        """
        self._check_open()
        return await read_user_events(self._store, self._reader, user_id, filter)

    # --- compaction ------------------------------------------------------------------------------

    async def apply_compaction(
        self, session_id: str, plan: CompactionPlan, expected_version: int
    ) -> bool:
        """Apply ``plan`` if the session's version is still ``expected_version``.

        Raises:
            SessionNotFound: the session does not exist.
            InvalidCompactionPlan: an archive or anchor id is not in the log; nothing changes.
            EventIdConflict: an inserted event's id is already used; nothing changes.
        """
        self._check_open()
        inserted = plan.inserted_events
        check_batch(session_id, inserted)
        prepared = {
            p.event.id: p
            for p in prepare(session_id, _unique(inserted), self._store.max_document_size)
        }
        return await shielded(self._writer.compact(session_id, plan, expected_version, prepared))
