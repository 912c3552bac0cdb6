"""The `MongoSessionRepository` class: input checks, one deadline per public call (the
client's ``timeoutMS``, shared by every command of the call), shielded writes, and the client
options `from_uri` sets (docs/mongodb.md says which and why)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Self, TypeVar, TypeVarTuple, cast
from urllib.parse import parse_qsl, urlsplit

import pymongo
from pymongo import AsyncMongoClient, MongoClient, WriteConcern
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.driver_info import DriverInfo
from pymongo.errors import PyMongoError

from ..._checks import require_database
from ..._lifecycle import Closable
from ..._offload import DEFAULT_OFFLOAD_THRESHOLD, DEFAULT_PREVIEW_CHARS, Offloading
from ..._pymongo_errors import storage_errors
from ..._shield import shielded
from ..._version import __version__
from ...encryption import EncryptionOptions, UserKeys
from ...events import Session, SessionEvent
from ...exceptions import SessionNotFound
from ...filters import EventFilter
from ...memory import MemoryStore
from ...rewinds import LogPoint
from .._erasure import ErasureReport, Ledger, UserEraser
from .._metadata_index import DEFAULT_LIMIT, check_lookup
from .._metadata_index import indexed_keys as _indexed_keys
from .._protocol import (
    Lease,
    SessionRepository,
    SessionSnapshot,
    check_batch,
    check_point,
    check_session,
    check_version,
)
from .._sealing import keys_of
from ._append import append
from ._forks import (
    create_fork_indexes,
    find_forks,
    fork,
    fork_body,
    lease_version,
    locate,
    on_prefix,
)
from ._layout import BODIES, COMMITS, ERASURES, SESSIONS, Bucket, Store, create_indexes
from ._read import find_events, first_read, read_body, snapshot_of, user_events
from ._sessions import (
    acquire_lease,
    delete_expired,
    delete_session,
    find_by_id,
    find_sessions,
    insert_session,
    release_lease,
    save_session,
)

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "DEFAULT_SOCKET_TIMEOUT_MS",
    "DEFAULT_TIMEOUT_MS",
    "MongoSessionRepository",
    "with_web_timeouts",
]

_WRITE_CONCERN: Final = WriteConcern("majority", j=True)
_T = TypeVar("_T")
_A = TypeVarTuple("_A")


# --- the client: timeouts, deadline, handshake ----------------------------------------------

DEFAULT_SERVER_SELECTION_TIMEOUT_MS: Final = 5_000
"""How long an operation waits for a suitable server (``serverSelectionTimeoutMS``)."""
DEFAULT_CONNECT_TIMEOUT_MS: Final = 5_000
"""How long opening one connection may take (``connectTimeoutMS``)."""
DEFAULT_SOCKET_TIMEOUT_MS: Final = 10_000
"""How long one reply may take once sent (``socketTimeoutMS``)."""
DEFAULT_TIMEOUT_MS: Final = 5_000
"""How long one store operation may take end to end (``timeoutMS``): as long as selecting a
server, so an unreachable and a frozen server fail within the same bound."""

_DEFAULTS: Final[Mapping[str, int]] = {
    "serverSelectionTimeoutMS": DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
    "connectTimeoutMS": DEFAULT_CONNECT_TIMEOUT_MS,
    "socketTimeoutMS": DEFAULT_SOCKET_TIMEOUT_MS,
    "timeoutMS": DEFAULT_TIMEOUT_MS,
}


_REPLACED_BY_TIMEOUT: Final = frozenset({"serverselectiontimeoutms", "sockettimeoutms"})
"""The per-step bounds ``timeoutMS`` would override: a caller who sets one keeps it."""


def _uri_option_names(uri: str) -> set[str]:
    query = urlsplit(uri).query
    return {name.lower() for name, _ in parse_qsl(query, keep_blank_values=True)}


def with_web_timeouts(uri: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The client options with the web timeouts added where neither they nor the URI set one."""
    given = {name.lower() for name in options} | _uri_option_names(uri)
    if given & _REPLACED_BY_TIMEOUT:
        given.add("timeoutms")
    defaults = {name: value for name, value in _DEFAULTS.items() if name.lower() not in given}
    return {**defaults, **options}


def driver_info() -> DriverInfo:
    """The library's name and version, for a client's handshake."""
    return DriverInfo(name="asyncsession", version=__version__)


def _driver_client(database: object) -> object:
    client: object = getattr(database, "client", None)
    if isinstance(client, AsyncMongoClient):
        return cast(object, client)
    return cast(object, getattr(client, "delegate", None))  # Motor wraps a PyMongo client


def identify(database: object) -> None:
    """Name the library in a borrowed PyMongo client's handshake (Motor wraps one)."""
    client = _driver_client(database)
    if isinstance(client, AsyncMongoClient | MongoClient):
        client.append_metadata(driver_info())


def client_timeout(database: object) -> float | None:
    """The client's ``timeoutMS`` in seconds, or ``None`` when it has none (or is no PyMongo
    client)."""
    client = _driver_client(database)
    if isinstance(client, AsyncMongoClient | MongoClient):
        timeout = client.options.timeout
        return timeout if timeout else None
    return None


def call_deadline(seconds: float | None) -> contextlib.AbstractContextManager[Any]:
    """One deadline for every command of a public call (nested in a caller's shorter one);
    nothing when the client has no ``timeoutMS``."""
    return pymongo.timeout(seconds) if seconds else contextlib.nullcontext()


def _loop_bound(client: object) -> bool:
    return isinstance(client, AsyncMongoClient) or type(client).__module__.startswith("motor.")


def _client_loop(client: object) -> asyncio.AbstractEventLoop | None:
    """The loop ``client`` belongs to, ``None`` before one used it: the one place that reads
    PyMongo's ``_loop`` and Motor's ``_io_loop`` (neither has a public accessor that does not
    bind the client), so adapters ask the store instead."""
    if not _loop_bound(client):
        return None
    name = "_loop" if type(client).__module__.startswith("pymongo.") else "_io_loop"
    loop: object = getattr(client, name, None)
    return loop if isinstance(loop, asyncio.AbstractEventLoop) else None


class MongoSessionRepository(Closable, SessionRepository):
    """Sessions and their logs in MongoDB; see the module docs for the layout.

    Args:
        database: a PyMongo ``AsyncDatabase`` (at run time a Motor or mongomock-motor database
            works too). It is borrowed: `aclose` never closes its client.
        sessions_collection: the collection of session documents.
        commits_collection: the collection of commit documents (one per committed append).
        indexed_metadata_keys: the metadata keys, besides the well-known ones of
            [`Session.metadata`][asyncsession.events.Session.metadata], that
            [`find_by_metadata`][asyncsession.repository.mongo.MongoSessionRepository.find_by_metadata]
            looks sessions up by (string values only). A session saved before a key was declared
            is found by it once it is saved again.
        encryption: encrypt each event's content and each session's metadata with the data key
            of the session's owner (`asyncsession.encryption`; the key vault is on this
            deployment). The indexed metadata values stay readable. Give every store of a
            process the same setting (or the same `UserKeys`).
        offload_threshold: events whose content takes more bytes than this as JSON go whole to
            the GridFS bucket ``bodies_bucket``, the log keeping a preview
            (`SessionRepository.read_body`); ``None``: never. Needs a PyMongo database (with
            Motor, bodies stay in their commit).
        preview_chars: how many characters of each text a preview keeps.
        bodies_bucket: the GridFS bucket of offloaded bodies.
        erasures_collection: the collection of the erasures ledger
            [`erase_user`][asyncsession.repository.mongo.MongoSessionRepository.erase_user]
            records in (the one the ``erase-user`` command uses by default).

    Call [`ensure_indexes`][asyncsession.repository.mongo.MongoSessionRepository.ensure_indexes]
    once (it is idempotent) before serving traffic. The unique indexes carry the log's
    guarantees, so a store that was not told creates them before its first append.
    """

    _keep_using = "the store"

    def __init__(
        self,
        database: AsyncDatabase[Any],
        *,
        sessions_collection: str = SESSIONS,
        commits_collection: str = COMMITS,
        indexed_metadata_keys: Iterable[str] = (),
        encryption: EncryptionOptions | UserKeys | None = None,
        offload_threshold: int | None = DEFAULT_OFFLOAD_THRESHOLD,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        bodies_bucket: str = BODIES,
        erasures_collection: str = ERASURES,
    ) -> None:
        require_database(database, "database", "MongoSessionRepository")
        self._database = database
        self._client: AsyncMongoClient[Any] | None = None
        self._indexed: asyncio.Task[None] | None = None
        self._timeout = client_timeout(database)
        offloading = Offloading.of(offload_threshold, preview_chars)
        self._store = Store(
            sessions=database.get_collection(sessions_collection, write_concern=_WRITE_CONCERN),
            commits=database.get_collection(commits_collection, write_concern=_WRITE_CONCERN),
            indexed_keys=_indexed_keys(indexed_metadata_keys),
            keys=keys_of(encryption, database.client),
            offloading=offloading,
            bucket=Bucket(database, bodies_bucket)
            if offloading and isinstance(database, AsyncDatabase)
            else None,
        )
        self._ledger = Ledger(database.get_collection(erasures_collection))
        identify(database)

    @classmethod
    def from_uri(
        cls,
        uri: str,
        db_name: str,
        *,
        sessions_collection: str = SESSIONS,
        commits_collection: str = COMMITS,
        indexed_metadata_keys: Iterable[str] = (),
        encryption: EncryptionOptions | UserKeys | None = None,
        offload_threshold: int | None = DEFAULT_OFFLOAD_THRESHOLD,
        preview_chars: int = DEFAULT_PREVIEW_CHARS,
        bodies_bucket: str = BODIES,
        erasures_collection: str = ERASURES,
        **client_options: Any,
    ) -> Self:
        """A repository with a client of its own, which
        [`aclose`][asyncsession.repository.mongo.MongoSessionRepository.aclose] closes.

        ``client_options`` go to ``AsyncMongoClient``; ``tz_aware`` defaults to ``True``. The
        client's timeouts suit a web request: ``serverSelectionTimeoutMS=5000``,
        ``connectTimeoutMS=5000``, ``socketTimeoutMS=10000`` and ``timeoutMS=5000`` unless
        ``client_options`` or the URI set them. ``timeoutMS`` bounds each public call of the
        store end to end, all its commands together, so an unreachable or a frozen server
        raises `StorageUnavailable` within about five seconds instead of PyMongo's thirty or
        never. The other keywords are as for the constructor.
        """
        options: dict[str, Any] = {"tz_aware": True, **with_web_timeouts(uri, client_options)}
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, **options)
        repository = cls(
            client[db_name],
            sessions_collection=sessions_collection,
            commits_collection=commits_collection,
            indexed_metadata_keys=indexed_metadata_keys,
            encryption=encryption,
            offload_threshold=offload_threshold,
            preview_chars=preview_chars,
            bodies_bucket=bodies_bucket,
            erasures_collection=erasures_collection,
        )
        repository._client = client
        return repository

    async def _call(self, work: Callable[[*_A], Awaitable[_T]], *args: *_A) -> _T:
        """Run one public call, ``work(*args)``, under one deadline (the client's
        ``timeoutMS``)."""
        self._check_open()
        with call_deadline(self._timeout):
            return await work(*args)

    async def _write(self, work: Callable[[*_A], Coroutine[Any, Any, _T]], *args: *_A) -> _T:
        """A public call that writes: under one deadline, and shielded from cancellation."""
        self._check_open()
        with call_deadline(self._timeout):
            return await shielded(work(*args))

    # --- lifecycle -------------------------------------------------------------------------------

    async def ensure_indexes(self, *, sharded: bool = False) -> None:
        """Create the indexes the store needs; safe to call any number of times.

        On a sharded cluster (the commits collection sharded on ``session``), pass
        ``sharded=True``: event ids are then unique per session only, since a unique index
        there must start with the shard key.
        """
        self._check_open()
        store = self._store
        with storage_errors("create indexes"):
            await create_indexes(store.sessions, store.commits, sharded=sharded)
            await create_fork_indexes(store)
        self._sharded = sharded
        try:
            hello = await self._database.command("hello")
        except NotImplementedError:  # mongomock-motor, a test double
            store.double = True
            return
        except PyMongoError:
            return
        size = hello.get("maxBsonObjectSize")
        if isinstance(size, int) and size > 0:
            store.max_document_size = size

    @property
    def keys(self) -> UserKeys | None:
        """The user keys the store encrypts with; ``None`` without encryption."""
        return self._store.keys

    _sharded: bool | None = None
    """How `ensure_indexes` last ran (``None``: not yet, in this object)."""

    async def _indexes(self) -> None:
        """Create the indexes once before the first append."""
        if self._indexed is None:
            self._indexed = asyncio.ensure_future(self.ensure_indexes())
        try:
            await asyncio.shield(self._indexed)
        except Exception:
            self._indexed = None  # the next append tries again
            raise

    @property
    def loop_bound(self) -> bool:
        """``True`` for a PyMongo or Motor client: it belongs to the first event loop that
        uses it."""
        return _loop_bound(self._database.client)

    @property
    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop the database's client belongs to; ``None`` until a loop used it."""
        return _client_loop(self._database.client)

    async def aclose(self) -> None:
        """Stop using the store; closes the client only if
        [`from_uri`][asyncsession.repository.mongo.MongoSessionRepository.from_uri] made it."""
        await super().aclose()

    async def _release(self) -> None:
        if self._client is not None:
            await self._client.close()

    # --- sessions --------------------------------------------------------------------------------

    async def save(self, session: Session) -> Session:
        """Create the session, or update its owner, expiry and metadata; returns it as stored."""
        check_session(session)
        return await self._write(save_session, self._store, session)

    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists; ``True`` if this call inserted it."""
        check_session(session)
        return await self._write(insert_session, self._store, session)

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        return await self._call(find_by_id, self._store, session_id)

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user, oldest first (by ``created_at``, then id)."""
        return await self._call(find_sessions, self._store, None, user_id, None)

    async def find_by_metadata(
        self, name: str, value: str, *, limit: int = DEFAULT_LIMIT
    ) -> list[Session]:
        """The sessions whose metadata holds ``value`` under the indexed key ``name``, oldest
        first, at most ``limit``: one ``find`` on an index (the principal's is ``user_id``'s)."""
        self._check_open()
        check_lookup(name, value, limit, self._store.indexed_keys)
        return await self._call(find_sessions, self._store, name, value, limit)

    async def delete(self, session_id: str) -> None:
        """Remove the session and its commits; an unknown id is not an error. A delete that
        dies halfway is finished by the next delete of the id or by any sweep."""
        await self._write(delete_session, self._store, session_id)

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``, with its commits.

        Each session is re-checked and claimed atomically, so a TTL extended meanwhile wins.
        Each is shielded on its own: a cancelled sweep stops after the session it is on.
        """
        return await self._call(delete_expired, self._store, before)

    # --- the log ---------------------------------------------------------------------------------

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Append a batch atomically, in order, as one commit: one insert.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: an event id belongs to another session; nothing is written.
            EventTooLarge: the commit would be over the server's document size limit; nothing
                is written.
            UsageError: an event belongs to another session than ``session_id``.
        """
        self._check_open()
        batch = check_batch(session_id, events)
        if not batch:
            version = await self.get_event_version(session_id)
            if version == 0 and await self.find_by_id(session_id) is None:
                raise SessionNotFound(session_id)
            return expected_version in (None, version)
        if self._sharded is None:  # nobody ran ensure_indexes in this object yet
            await self._indexes()
        return await self._write(append, self._store, session_id, batch, expected_version, lease)

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The session's matching events (see ``SessionRepository.find_events``)."""
        return await self._call(find_events, self._store, session_id, filter)

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest lease: one command
        when the newest commits hold the window."""
        return await self._call(snapshot_of, self._store, session_id, filter)

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of every session of the user, by timestamp, with a plain window."""
        return await self._call(user_events, self._store, user_id, filter)

    async def get_event_version(self, session_id: str) -> int:
        """The session's version (its newest commit's number); 0 for an unknown session."""

        async def read() -> int:
            suffix = await first_read(self._store, session_id, 1)
            return 0 if suffix is None else suffix.version

        return await self._call(read)

    async def read_body(self, session_id: str, event_id: str) -> SessionEvent | None:
        """The event as it was appended, its whole body read from GridFS when it was offloaded
        (see ``SessionRepository.read_body``): one aggregate, and two reads of the file when
        offloaded."""

        async def read() -> SessionEvent | None:
            found = await read_body(self._store, session_id, event_id)
            return (
                found if found is not None else await fork_body(self._store, session_id, event_id)
            )

        return await self._call(read)

    # --- forks -----------------------------------------------------------------------------------

    async def fork(
        self,
        session_id: str,
        child: Session,
        *,
        at: int | str | None = None,
        before: str | None = None,
    ) -> Session:
        """Create ``child`` as a fork of the session (see ``SessionRepository.fork``): a read of
        the parent and the point, then one ``update`` command, at any parent length."""
        check_point(at, before)
        check_session(child)
        if self._sharded is None:  # nobody ran ensure_indexes in this object yet
            await self._indexes()
        return await self._write(fork, self._store, session_id, child, at, before)

    async def locate(
        self, session_id: str, *, at: int | str | None = None, before: str | None = None
    ) -> tuple[LogPoint, int] | None:
        """The point ``at`` or ``before`` names, and the session's version: one read."""
        check_point(at, before)
        return await self._call(locate, self._store, session_id, at, before)

    async def find_forks(self, session_id: str) -> list[Session]:
        """The sessions forked from this one, oldest first: one find."""
        return await self._call(find_forks, self._store, session_id)

    # --- erasure ---------------------------------------------------------------------------------

    async def erase_user(
        self, user_id: str, *, memories: MemoryStore | None = None
    ) -> ErasureReport:
        """Erase ``user_id``: their data key first (with encryption on), then their sessions
        with their events, offloaded bodies and leases, and, given ``memories`` (a memory store
        of any scope), their memory files.

        The erasure is recorded in the ledger (``erasures_collection``) before anything is
        deleted: from the moment the key is deleted nothing of the user's can be decrypted,
        backups included; an erasure interrupted anywhere is finished by the next call, by
        [`finish_erasures`][asyncsession.repository.mongo.MongoSessionRepository.finish_erasures]
        or by ``asyncsession erase-user --pending``. Runs to its end even if cancelled.
        """
        self._check_open()
        return await self._eraser(memories).erase_user(user_id)

    async def finish_erasures(self, *, memories: MemoryStore | None = None) -> list[ErasureReport]:
        """Finish every erasure the ledger holds (the sweep), oldest first."""
        self._check_open()
        return await self._eraser(memories).finish_pending()

    def _eraser(self, memories: MemoryStore | None) -> UserEraser:
        return UserEraser(self, self._ledger, self._store.keys, memories)

    # --- leases ----------------------------------------------------------------------------------

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Take or renew the lease on commit ``version`` (0: the session): one conditional
        update."""
        check_version(version)

        async def take() -> bool:
            own = lease_version(self._store, session_id, version)
            if await acquire_lease(self._store, session_id, own, lease):
                return True
            if await on_prefix(self._store, session_id, own):
                return await acquire_lease(self._store, session_id, 0, lease)
            return False

        return await self._write(take)

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it: one conditional update."""

        async def give_back() -> None:
            own = lease_version(self._store, session_id, version)
            if not await release_lease(self._store, session_id, own, holder) and await on_prefix(
                self._store, session_id, own
            ):
                await release_lease(self._store, session_id, 0, holder)

        await self._write(give_back)
