"""The stored layout: every collection and field name, documents <-> models, and the indexes.

No other module spells a stored name. Documents read in mongosh as they are: full field names,
plain subdocuments, ids as given. Keys of user data (metadata, payloads, a message's ``extra``)
are kept as they are, but for the few BSON cannot hold or MongoDB would take for a path or an
operator (empty, ``$…``, ``~…``, or holding ``.`` or NUL): those are stored as ``~`` and the
key with ``%``, ``.``, ``$`` and NUL percent-escaped.
"""

from __future__ import annotations

import asyncio
import secrets
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, Generic, NamedTuple, TypeVar, cast

from gridfs import AsyncGridFSBucket
from gridfs.errors import NoFile
from pymongo import ASCENDING, WriteConcern
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from ..._offload import Offloading
from ...encryption import UserKeys
from ...events import ForkPoint, Session, SessionEvent
from ...exceptions import UsageError

__all__ = [
    "commits_query",
    "Lineage",
    "Segment",
    "events_of",
    "lineage_of",
    "owns",
    "ATTRIBUTES",
    "BASE",
    "BODIES",
    "BODY",
    "Bucket",
    "COMMIT",
    "COMMITS",
    "CREATED_AT",
    "EVENTS",
    "ERASURES",
    "EVENT_ID",
    "EXPIRES_AT",
    "FILE",
    "FORKS",
    "HOLDER",
    "ID",
    "INCARNATION",
    "Known",
    "LARGE",
    "LAST",
    "LEASE",
    "LINEAGE",
    "MESSAGE",
    "METADATA",
    "OLDEST_FIRST",
    "PARENT",
    "RETAINED",
    "THROUGH",
    "PAYLOAD",
    "SESSION",
    "SEALED",
    "SESSIONS",
    "SIZE",
    "TEXT",
    "TIMESTAMP",
    "TYPE",
    "USER_ID",
    "Doc",
    "Newest",
    "Recent",
    "Store",
    "as_utc",
    "commit_doc",
    "create_indexes",
    "event_from_doc",
    "event_to_doc",
    "field_names",
    "file_id",
    "lease_doc",
    "new_incarnation",
    "session_fields",
    "session_from_doc",
]

Doc = dict[str, Any]
V = TypeVar("V")

SESSIONS: Final = "sessions"
"""The default collection of session documents."""
COMMITS: Final = "session_commits"
"""The default collection of commit documents: one per committed append."""
ERASURES: Final = "erasures"
"""The default collection of the erasures ledger (`_erasure.Ledger`)."""
BODIES: Final = "session_bodies"
"""The default GridFS bucket of offloaded bodies (collections ``session_bodies.files`` and
``session_bodies.chunks``): one file per offloaded event, its id ``<session id>\x00<event
id>\x00<random>`` (a session id holds no NUL), so a session's files, and the chunks of an
upload that died before its files document, are one range of ids."""

# The session document.
ID: Final = "_id"
"""The session id (in a session document); MongoDB's own id (in a commit document)."""
USER_ID: Final = "user_id"
CREATED_AT: Final = "created_at"
EXPIRES_AT: Final = "expires_at"
METADATA: Final = "metadata"
ATTRIBUTES: Final = "attributes"
"""The session's indexed metadata, one ``name\\x00value`` string each (see `_metadata_index`)."""
INCARNATION: Final = "incarnation"
"""A random number made when the session document was inserted. Every commit carries its
session's:
a commit an append wrote while the session was being deleted is never read as a commit of a
new session with the same id."""
LEASE: Final = "lease"
"""``{holder, expires_at}``: on a commit, or on the session document (version 0)."""
HOLDER: Final = "holder"
PARENT: Final = "parent"
"""On a fork: ``{session, commit, through}``, the session and the point it was forked at (the
end of ``commit``, or its event ``through``). See `_forks` for the fields below."""
THROUGH: Final = "through"
BASE: Final = "base"
"""On a fork: the commit its own commits continue after (the parent's point's commit)."""
LINEAGE: Final = "lineage"
"""On a fork: whose commits its prefix is, oldest first, each ``{session, incarnation, last,
through}``."""
LAST: Final = "last"
FORKS: Final = "forks"
"""How many forks were taken of the session."""
RETAINED: Final = "retained"
"""``true`` on a deleted session whose commits forks still read."""

# The commit document.
SESSION: Final = "session"
COMMIT: Final = "commit"
"""The commit's number, 1, 2, 3, … dense per session: the version it made."""
EVENTS: Final = "events"
"""The commit's events, in order: ``{id, type, timestamp, body}``."""
EVENT_ID: Final = "id"
TYPE: Final = "type"
TIMESTAMP: Final = "timestamp"
MESSAGE: Final = "message"
"""A message event's message, its fields as the message model has them, but ``kind``: the
event's ``type`` says which message it is."""
KIND: Final = "kind"  # layout: the message model's discriminator, never stored
PAYLOAD: Final = "payload"
BODY: Final = "body"
"""What the event says: ``message`` or ``payload``, and ``metadata``; one subdocument, or, with
encryption on, that subdocument as one encrypted value (a BSON binary of subtype 6). An
offloaded event's body is its preview."""
LARGE: Final = "large"
"""On an offloaded event, beside its body: ``{file, size, sealed}``, where its whole body is."""
FILE: Final = "file"
"""The GridFS file id of an offloaded body."""
SIZE: Final = "size"
"""The bytes an offloaded event's content takes as JSON."""
SEALED: Final = "sealed"
"""Whether an offloaded body's file holds one encrypted value (else the body as BSON)."""
TEXT: Final = f"{EVENTS}.{BODY}.{MESSAGE}.text"  # layout: text is the message model's field
"""The path of a message's text, which keyword searches prefilter on."""


# --- offloaded bodies: files in a GridFS bucket -------------------------------------------------

_SEPARATOR: Final = "\x00"
_MAJORITY: Final = WriteConcern("majority", j=True)


def file_id(session_id: str, event_id: str) -> str:
    """A new file id for ``event_id``'s body in ``session_id`` (see `BODIES`)."""
    return f"{session_id}{_SEPARATOR}{event_id}{_SEPARATOR}{secrets.token_hex(8)}"


def _files_of(session_id: str) -> dict[str, str]:
    """The ids of ``session_id``'s files (NUL sorts first, and ``\\x01`` right after it)."""
    return {"$gte": session_id + _SEPARATOR, "$lt": session_id + "\x01"}


class Bucket:
    """The GridFS bucket of offloaded bodies; a session's files, whole or in part, are one range
    of file ids (see `BODIES`), deleted chunks first."""

    __slots__ = ("_bucket", "_chunks", "_files")

    def __init__(self, database: AsyncDatabase[Any], name: str) -> None:
        self._bucket = AsyncGridFSBucket(database, name, write_concern=_MAJORITY)
        self._files = database.get_collection(f"{name}.files", write_concern=_MAJORITY)
        self._chunks = database.get_collection(f"{name}.chunks", write_concern=_MAJORITY)

    async def upload(self, file: str, data: bytes, metadata: Mapping[str, Any]) -> None:
        """Store ``data`` as the file ``file``."""
        filename = file.split(_SEPARATOR)[1]
        await self._bucket.upload_from_stream_with_id(file, filename, data, metadata=metadata)

    async def download(self, file: str) -> bytes | None:
        """The whole file, or ``None`` when it is gone."""
        try:
            stream = await self._bucket.open_download_stream(file)
        except NoFile:
            return None
        return await stream.read()

    async def delete(self, files: list[str]) -> None:
        """Delete these files (the chunks first: a file whose chunks are gone is gone)."""
        if files:
            await self._chunks.delete_many({"files_id": {"$in": files}})  # layout: GridFS's
            await self._files.delete_many({"_id": {"$in": files}})  # layout: GridFS's

    async def delete_session(self, session_id: str) -> None:
        """Delete every file of ``session_id``, whole or in part."""
        await self._chunks.delete_many({"files_id": _files_of(session_id)})  # layout: GridFS's
        await self._files.delete_many({"_id": _files_of(session_id)})  # layout: GridFS's


# --- what a process remembers of its sessions ---------------------------------------------------


class Recent(Generic[V]):
    """Session id -> what this process last saw of it, at most ``capacity`` sessions (the least
    recently used go first; an entry is about 200 bytes). An entry is a hint, never a truth:
    what it was used for is checked against what the server returns."""

    __slots__ = ("_capacity", "_entries")

    def __init__(self, capacity: int = 10_000) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, V] = OrderedDict()

    def get(self, session_id: str) -> V | None:
        """What was last seen of ``session_id``, or ``None``."""
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
        return entry

    def put(self, session_id: str, entry: V) -> None:
        """Remember ``entry`` for ``session_id``."""
        self._entries[session_id] = entry
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is known of ``session_id`` (it was deleted)."""
        self._entries.pop(session_id, None)


class Known(NamedTuple):
    """What the process last saw of a session's log."""

    incarnation: int
    """The session document's incarnation."""
    commit: int
    """The newest commit number seen (0: none)."""
    density: float
    """Events per commit in the commits last read (1.0 when unknown)."""


class Newest(Recent[Known]):
    """Each session's newest commit, incarnation and recent events per commit, as this process
    last saw them: a window's first read is a range of about the commits it needs, and an append
    after a read needs no read of its own (docs/internals/mongodb.md, "Why the map")."""

    __slots__ = ()

    def note(
        self, session_id: str, incarnation: int, commit: int, density: float | None = None
    ) -> None:
        """Remember that ``session_id`` (as ``incarnation``) has at least ``commit`` commits,
        and, when given, how many events its recent commits held."""
        entry = self.get(session_id)
        if entry is not None and entry.incarnation == incarnation:
            commit = max(commit, entry.commit)
            density = entry.density if density is None else density
        self.put(session_id, Known(incarnation, commit, density or 1.0))


@dataclass(slots=True, kw_only=True)
class Store:
    """The collections a store works on, and what this process knows of its sessions."""

    sessions: AsyncCollection[Doc]
    commits: AsyncCollection[Doc]
    indexed_keys: frozenset[str]
    newest: Newest = field(default_factory=Newest)
    appending: dict[str, tuple[asyncio.Lock, int]] = field(
        default_factory=dict[str, tuple[asyncio.Lock, int]]
    )
    """Session id -> the lock its appends in this process take turns with, and how many hold
    or wait for it (an entry goes when none does)."""
    double: bool = False
    """Whether the database is mongomock-motor, a test double that runs no ``$unionWith`` (two
    reads instead), enforces no unique index over array elements (an append looks its ids up
    first) and no document size limit (an append measures its commit first)."""
    max_document_size: int = 16 * 1024 * 1024
    keys: UserKeys | None = None
    """The data keys content is encrypted with; ``None``: content in clear."""
    owners: Recent[str] = field(default_factory=Recent[str])
    """Session id -> its owner, whose key encrypts what is appended to it: every read of a
    session document notes it, so the append after a turn's read sends no command to learn
    it."""
    offloading: Offloading | None = None
    """When an event's body goes to ``bucket``; ``None``: never."""
    bucket: Bucket | None = None
    """The GridFS bucket of offloaded bodies (``None`` on a database that is not PyMongo's)."""
    lineages: Recent[Lineage] = field(default_factory=lambda: Recent[Lineage]())
    """Session id -> whose commits its log is made of."""


# --- lineages: whose commits a log is made of (see `_forks`) ---------------------------------


@dataclass(frozen=True, slots=True)
class Segment:
    """Commits ``first`` to ``last`` of ``session`` (of incarnation ``incarnation``), the last
    one up to its event ``through`` when set."""

    session: str
    incarnation: int
    first: int
    last: int
    through: str | None


@dataclass(frozen=True, slots=True)
class Lineage:
    """A session's log: its segments, then its own commits (numbered after ``base``)."""

    session: str
    incarnation: int
    base: int = 0
    segments: tuple[Segment, ...] = ()

    def clipped(self, commit: int, through: str | None) -> tuple[Segment, ...]:
        """The segments of a fork of this log at the point (``commit``, ``through``)."""
        kept: list[Segment] = []
        for segment in self.segments:
            if segment.first > commit:
                break
            if segment.last < commit or (segment.last == commit and through is None):
                kept.append(segment)
            else:
                kept.append(
                    Segment(segment.session, segment.incarnation, segment.first, commit, through)
                )
        if commit > self.base:
            kept.append(Segment(self.session, self.incarnation, self.base + 1, commit, through))
        return tuple(kept)

    def segment_of(self, session: str, incarnation: object, commit: int) -> Segment | None:
        """The segment that reads commit ``commit`` of ``session`` (``None``: none does)."""
        for segment in self.segments:
            if (
                segment.session == session
                and segment.incarnation == incarnation
                and segment.first <= commit <= segment.last
            ):
                return segment
        return None


def lineage_of(doc: Mapping[str, Any]) -> Lineage:
    """The lineage a session document holds (a plain session's has no segments)."""
    first = 1
    segments: list[Segment] = []
    for entry in cast(list[Doc], doc.get(LINEAGE) or []):
        segments.append(
            Segment(entry[SESSION], entry[INCARNATION], first, entry[LAST], entry.get(THROUGH))
        )
        first = entry[LAST] + 1
    return Lineage(doc[ID], doc[INCARNATION], int(doc.get(BASE) or 0), tuple(segments))


def owns(lineage: Lineage, doc: Mapping[str, Any]) -> bool:
    """Whether the commit ``doc`` is one of the log's (of the right incarnation and number)."""
    number: int = doc[COMMIT]
    if doc[SESSION] == lineage.session:
        return doc.get(INCARNATION) == lineage.incarnation and number > lineage.base
    return lineage.segment_of(doc[SESSION], doc.get(INCARNATION), number) is not None


def events_of(lineage: Lineage, doc: Mapping[str, Any]) -> list[Doc]:
    """The events of the commit ``doc`` that the log holds: all of them, but for the last
    commit of a segment cut at an event."""
    events = cast(list[Doc], doc[EVENTS])
    if doc[SESSION] == lineage.session:
        return events
    segment = lineage.segment_of(doc[SESSION], doc.get(INCARNATION), doc[COMMIT])
    if segment is None or segment.through is None or doc[COMMIT] != segment.last:
        return events
    for index, event in enumerate(events):
        if event[EVENT_ID] == segment.through:
            return events[: index + 1]
    return events


def commits_query(lineage: Lineage, low: int = 1, high: int | None = None) -> Doc:
    """The commits numbered ``low`` to ``high`` (no bound: ``None``) of the session's log: its
    own (of any incarnation: a reader checks with `owns`), and its segments' (of theirs)."""
    branches: list[Doc] = []
    own_low = max(low, lineage.base + 1)
    if high is None or own_low <= high:
        numbers: Doc = {"$gt": own_low - 1} if own_low > 1 else {}
        if high is not None:
            numbers["$lte"] = high
        branch: Doc = {SESSION: lineage.session}
        if numbers:
            branch[COMMIT] = numbers
        branches.append(branch)
    for segment in lineage.segments:
        first = max(low, segment.first)
        last = segment.last if high is None else min(high, segment.last)
        if first <= last:
            branches.append(
                {
                    SESSION: segment.session,
                    INCARNATION: segment.incarnation,
                    COMMIT: {"$gte": first, "$lte": last},
                }
            )
    if not branches:
        return {SESSION: lineage.session, COMMIT: {"$lt": 0}}  # nothing
    return branches[0] if len(branches) == 1 else {"$or": branches}


_MESSAGE_DEFAULTS: Final[tuple[tuple[str, object], ...]] = (
    ("extra", {}),
    ("tool_calls", []),
    ("role", "system"),
)
"""Message fields left out of a body when they hold their default."""
_ESCAPED: Final = "~"
_ESCAPES: Final = {"%": "%25", ".": "%2E", "$": "%24", "\x00": "%00"}


def new_incarnation() -> int:
    """A random incarnation (31 bits: a plain int in mongosh)."""
    return secrets.randbits(31)


def field_names() -> frozenset[str]:
    """Every stored key and collection name this module defines."""
    return frozenset(
        value
        for name, value in globals().items()
        if name.isupper()
        and isinstance(value, str)
        and not name.startswith("_")
        and "." not in value
    )


def as_utc(value: datetime) -> datetime:
    """A BSON date as a UTC-aware datetime, whatever the client's ``tz_aware`` setting."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _out(value: Any) -> Any:
    """``value`` with its keys escaped (see the module's docstring), lists for tuples."""
    if isinstance(value, list | tuple):
        return [_out(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(value, dict):
        return value
    out: Doc = {}
    for key, item in cast(Doc, value).items():
        if not key or key[0] in "$~" or "." in key or "\x00" in key:
            key = _ESCAPED + "".join(_ESCAPES.get(c, c) for c in key)
        out[key] = _out(item)
    return out


def _in(value: Any) -> Any:
    """``value`` with its escaped keys restored."""
    if isinstance(value, list):
        return [_in(v) for v in value]  # pyright: ignore[reportUnknownVariableType]
    if not isinstance(value, dict):
        return value
    out: Doc = {}
    for key, item in cast(Doc, value).items():
        if key.startswith(_ESCAPED):
            key = key[1:]
            for char, escape in _ESCAPES.items():
                if char != "%":
                    key = key.replace(escape, char)
            key = key.replace("%25", "%")
        out[key] = _in(item)
    return out


def session_fields(session: Session, attributes: list[str]) -> Doc:
    """The fields of a session document that a `save` sets (all but ``created_at``, the
    incarnation and a lease)."""
    fields: Doc = {
        USER_ID: session.user_id,
        EXPIRES_AT: session.expires_at,
        METADATA: _out(session.metadata),
    }
    fields[ATTRIBUTES] = attributes
    return fields


def session_from_doc(doc: Mapping[str, Any]) -> Session:
    """The session a session document holds.

    Raises:
        UsageError: its metadata is encrypted and the store has no encryption setting.
    """
    expires, parent = doc.get(EXPIRES_AT), doc.get(PARENT)
    if not isinstance(doc.get(METADATA) or {}, dict):
        raise UsageError(
            f"session {doc[ID]!r} holds encrypted metadata: read it with a store given the "
            "encryption setting it was written with (encryption=)"
        )
    return Session(
        id=doc[ID],
        user_id=doc[USER_ID],
        created_at=as_utc(doc[CREATED_AT]),
        expires_at=None if expires is None else as_utc(expires),
        metadata=_in(doc.get(METADATA) or {}),
        forked_from=None
        if parent is None
        else ForkPoint(
            session_id=parent[SESSION], version=parent[COMMIT], event_id=parent.get(THROUGH)
        ),
    )


def event_to_doc(event: SessionEvent) -> Doc:
    """An event as its commit holds it; defaults (no metadata, a message's empty ``extra``) are
    left out."""
    body: Doc = {}
    if event.message is not None:
        message = event.message.model_dump(mode="json", exclude_none=True)
        del message[KIND]  # the event's type says it
        for key, default in _MESSAGE_DEFAULTS:
            if key in message and message[key] == default:
                del message[key]
        body[MESSAGE] = _out(message)
    else:
        body[PAYLOAD] = _out(event.payload)
    if event.metadata:
        body[METADATA] = _out(event.metadata)
    return {EVENT_ID: event.id, TYPE: event.type.name, TIMESTAMP: event.timestamp, BODY: body}


def event_from_doc(doc: Mapping[str, Any], session_id: str) -> SessionEvent:
    """The event a commit's entry holds (``archived`` is derived later, by the reader).

    Raises:
        UsageError: the body is encrypted and the store has no encryption setting.
    """
    if not isinstance(doc[BODY], dict):
        raise UsageError(
            f"session {session_id!r} holds encrypted content: read it with a store given the "
            "encryption setting it was written with (encryption=)"
        )
    body = _in(doc[BODY])
    message = body.get(MESSAGE)
    if isinstance(message, dict):
        body[MESSAGE] = {KIND: doc[TYPE].lower(), **message}
    return SessionEvent.model_validate(
        {
            "id": doc[EVENT_ID],
            "session_id": session_id,
            "timestamp": as_utc(doc[TIMESTAMP]),
            "type": doc[TYPE],
            **body,
        }
    )


def lease_doc(holder: str, expires_at: datetime) -> Doc:
    """A lease as stored."""
    return {HOLDER: holder, EXPIRES_AT: expires_at}


def commit_doc(
    session_id: str,
    number: int,
    incarnation: int,
    events: list[Doc],
    lease: Doc | None,
) -> Doc:
    """A commit document (never with zero events: an empty array indexes as null, and the
    unique index on the event ids admits one such document in the whole collection)."""
    doc: Doc = {SESSION: session_id, COMMIT: number, INCARNATION: incarnation, EVENTS: events}
    if lease is not None:
        doc[LEASE] = lease
    return doc


OWNER_INDEX: Final = [(USER_ID, ASCENDING), (CREATED_AT, ASCENDING), (ID, ASCENDING)]
ATTRIBUTES_INDEX: Final = [(ATTRIBUTES, ASCENDING), (CREATED_AT, ASCENDING), (ID, ASCENDING)]
OLDEST_FIRST: Final = [(CREATED_AT, ASCENDING), (ID, ASCENDING)]
"""Sessions oldest first, those created in the same millisecond by id."""


async def create_indexes(
    sessions: AsyncCollection[Doc], commits: AsyncCollection[Doc], *, sharded: bool
) -> None:
    """The indexes the store needs (idempotent). Event ids are unique across the collection,
    or per session when ``sharded`` (a unique index there must start with the shard key)."""
    await sessions.create_index(OWNER_INDEX)
    await sessions.create_index(ATTRIBUTES_INDEX)
    await sessions.create_index([(EXPIRES_AT, ASCENDING)])
    await commits.create_index([(SESSION, ASCENDING), (COMMIT, ASCENDING)], unique=True)
    ids = [(f"{EVENTS}.{EVENT_ID}", ASCENDING)]
    await commits.create_index([(SESSION, ASCENDING), *ids] if sharded else ids, unique=True)
