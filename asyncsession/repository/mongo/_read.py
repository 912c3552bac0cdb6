"""Reads: the snapshot in one command, windows walked back by ranges, a user's events.

A read starts with one aggregate: the session's newest commits, a range ``commit > known - k``
when this process knows roughly the newest number (`_layout.Newest`), else the ``k`` highest
numbers by a sorted find, with ``$unionWith`` of the session's document. It returns the
session, the version (the newest commit read), the newest commit's lease and the events of the
commits read. A ``last_n`` window that those events do not fill reads the next older range
(four times larger each time); a window of the active view stops at the newest boundary, and
fetches by id the events its view names that lie before the commits read. Reads that need
every event (no window) read every commit at once; a keyword search first narrows them on the
server to the commits whose text may match, and the boundaries.

``archived`` and the view order are derived by `asyncsession._view.ReadLog`, the reference
for a log held as a list: the commits read, oldest first, are that list (or its newest part).
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final, cast, overload

from pymongo import DESCENDING
from pymongo.asynchronous.collection import AsyncCollection

from ..._pymongo_errors import storage_errors
from ..._view import ReadLog, view_of
from ...events import EventType, Session, SessionEvent
from ...filters import EventFilter
from .._protocol import Lease, SessionSnapshot
from ._content import open_commits, open_session
from ._layout import (
    COMMIT,
    EVENT_ID,
    EVENTS,
    EXPIRES_AT,
    HOLDER,
    ID,
    INCARNATION,
    LEASE,
    OLDEST_FIRST,
    SESSION,
    TEXT,
    TYPE,
    USER_ID,
    Doc,
    Store,
    as_utc,
    event_from_doc,
    session_from_doc,
)

__all__ = [
    "IN_CHUNK",
    "Commit",
    "Suffix",
    "first_read",
    "lease_from_doc",
    "select",
    "snapshot_of",
    "user_events",
]

IN_CHUNK: Final = 256
"""How many sessions one read of a user's events asks for."""
_COMPACTION: Final = EventType.COMPACTION.name
_BOUNDARY: Final = {f"{EVENTS}.{TYPE}": _COMPACTION}
_LEAST_SPAN: Final = 8
"""Commits a window's first range reads at least (when it wants that many events): a session's
recent commits may hold fewer events than the ones the estimate was made from."""
_WHOLE_VIEW: Final = 64
"""Events a window-less read of the active view reads first (then it walks back)."""


@dataclass(slots=True)
class Commit:
    """A commit as read: its number, its events (as stored), its lease."""

    number: int
    events: list[Doc]
    lease: Lease | None


class _Decoded(Sequence[SessionEvent]):
    """Stored events decoded when first read: a window decodes the events it looks at."""

    __slots__ = ("_docs", "_events", "_session_id")

    def __init__(self, docs: list[Doc], session_id: str) -> None:
        self._docs = docs
        self._session_id = session_id
        self._events: list[SessionEvent | None] = [None] * len(docs)

    def __len__(self) -> int:
        return len(self._docs)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        event = self._events[index]
        if event is None:
            event = self._events[index] = event_from_doc(self._docs[index], self._session_id)
        return event


@dataclass(slots=True)
class Suffix:
    """A session and its newest commits read so far: every commit from ``low`` on."""

    session: Session
    doc: Doc
    """The session document."""
    incarnation: int
    commits: list[Commit]
    """Oldest first."""
    low: int
    """Every commit numbered ``low`` or more is in ``commits``; 1: the whole log."""
    version: int
    """The newest commit's number (0: none)."""


def lease_from_doc(doc: Doc | None) -> Lease | None:
    """The lease a document holds, or ``None``."""
    lease: object = None if doc is None else doc.get(LEASE)
    if not isinstance(lease, dict):
        return None
    fields = cast(Doc, lease)
    return Lease(holder=str(fields[HOLDER]), expires_at=as_utc(fields[EXPIRES_AT]))


def _commit(doc: Doc) -> Commit:
    return Commit(number=doc[COMMIT], events=doc[EVENTS], lease=lease_from_doc(doc))


def _events(docs: list[Doc], session_id: str) -> list[SessionEvent]:
    """The events of commit documents, decoded, in log order."""
    return [event_from_doc(e, session_id) for d in docs for e in d[EVENTS]]


async def _union(store: Store, session_id: str, pipeline: list[Doc]) -> list[Doc]:
    """The commits ``pipeline`` selects and the session document: one aggregate where the
    server runs ``$unionWith``, else two reads.

    The commits come first and the session document is unioned onto them: a server that does
    not serve a ``$unionWith`` subpipeline from an index (the test server scans the collection
    it names) then scans the sessions, not the far larger commits."""
    if not store.double:
        stages: list[Doc] = [
            *pipeline,
            {
                "$unionWith": {
                    "coll": store.sessions.name,
                    "pipeline": [{"$match": {ID: session_id}}],
                }
            },
        ]
        try:
            return await _aggregate(store.commits, stages)
        except NotImplementedError:  # mongomock-motor
            store.double = True
    session = await store.sessions.find_one({ID: session_id})
    if session is None:
        return []
    return [session, *await _aggregate(store.commits, pipeline)]


async def _aggregate(collection: AsyncCollection[Doc], pipeline: list[Doc]) -> list[Doc]:
    """The documents an aggregate returns (PyMongo's ``aggregate`` is a coroutine, Motor's
    returns its cursor)."""
    cursor: Any = collection.aggregate(pipeline)
    if inspect.isawaitable(cursor):
        cursor = await cursor
    docs: list[Doc] = await cursor.to_list(None)
    return docs


async def first_read(
    store: Store,
    session_id: str,
    span: int | None,
    prefilter: Doc | None = None,
    search: EventFilter | None = None,
) -> Suffix | None:
    """The session with its newest ``span`` commits or so (every commit when ``None``; with
    ``prefilter``, every commit it matches and every boundary); ``None`` if the session does
    not exist. With encryption on, ``search`` is a text search whose candidates alone are kept
    (see `_content.open_commits`)."""
    known = store.newest.get(session_id)
    query: Doc = {SESSION: session_id}
    if prefilter is not None:
        query["$or"] = [prefilter, _BOUNDARY]
    sort = span is not None and known is None
    if span is not None and known is not None:
        query[COMMIT] = {"$gt": known.commit - span}
    pipeline: list[Doc] = [{"$match": query}]
    if sort:
        pipeline += [{"$sort": {COMMIT: DESCENDING}}, {"$limit": span}]
    with storage_errors(f"read session {session_id!r}"):
        docs = await _union(store, session_id, pipeline)
        session_doc = next((d for d in docs if COMMIT not in d), None)
        if session_doc is None:
            store.newest.forget(session_id)
            return None
        incarnation: int = session_doc[INCARNATION]
        others = [d for d in docs if COMMIT in d]
        mine = [d for d in others if d.get(INCARNATION) == incarnation]
        if not mine and known is not None and known.commit > 0 and span is not None and not sort:
            store.newest.forget(session_id)  # another incarnation: the numbers meant nothing
            return await first_read(store, session_id, span, prefilter, search)
        if sort and not mine and len(others) == span:  # only commits of a deleted incarnation
            mine = await store.commits.find(
                {SESSION: session_id, INCARNATION: incarnation},
                sort=[(COMMIT, DESCENDING)],
                limit=span,
            ).to_list(None)
            others = mine
    mine.sort(key=lambda d: d[COMMIT])
    version = mine[-1][COMMIT] if mine else 0
    if span is None or (known is not None and not sort):
        low = 1 if span is None or known is None else max(1, known.commit - span + 1)
    else:
        low = 1 if len(others) < span else min(d[COMMIT] for d in others)
    await open_session(store, session_doc)
    await open_commits(store, mine, session_doc[USER_ID], search, f"session {session_id!r}")
    commits = [_commit(d) for d in mine]
    density = None
    if commits and prefilter is None:  # the median of the newest few: a bulk append is rare
        counts = sorted(len(c.events) for c in commits[-8:])
        density = float(counts[len(counts) // 2])
    store.newest.note(session_id, incarnation, version, density)
    return Suffix(
        session=session_from_doc(session_doc),
        doc=session_doc,
        incarnation=incarnation,
        commits=commits,
        low=low,
        version=version,
    )


def span_for(store: Store, session_id: str, filter: EventFilter) -> int | None:
    """How many commits the first read of ``filter`` asks for (``None``: all of them)."""
    if filter.last_n is None and not filter.active_view:
        return None
    known = store.newest.get(session_id)
    density = 1.0 if known is None else known.density
    wanted = _WHOLE_VIEW if filter.last_n is None else filter.last_n + 1
    return max(math.ceil(wanted / density) + 1, min(wanted, _LEAST_SPAN))


async def _older(store: Store, suffix: Suffix, count: int) -> None:
    """Read the ``count`` commits before the oldest read (all of them when fewer are left)."""
    low = max(1, suffix.low - count)
    query = {
        SESSION: suffix.session.id,
        INCARNATION: suffix.incarnation,
        COMMIT: {"$gte": low, "$lt": suffix.low},
    }
    with storage_errors(f"read session {suffix.session.id!r}"):
        docs = await store.commits.find(query).to_list(None)
    await open_commits(store, docs, suffix.session.user_id)
    older = sorted((_commit(d) for d in docs), key=lambda c: c.number)
    suffix.commits[:0] = older
    suffix.low = low


async def _by_id(store: Store, suffix: Suffix, ids: Sequence[str]) -> list[SessionEvent]:
    """The events with these ids among the commits before the oldest read, in log order."""
    wanted = set(ids)
    query = {
        SESSION: suffix.session.id,
        INCARNATION: suffix.incarnation,
        f"{EVENTS}.{EVENT_ID}": {"$in": list(wanted)},
    }
    with storage_errors(f"read session {suffix.session.id!r}"):
        docs = await store.commits.find(query, sort=[(COMMIT, 1)]).to_list(None)
    await open_commits(store, docs, suffix.session.user_id)
    return [e for e in _events(docs, suffix.session.id) if e.id in wanted]


def _matched(log: ReadLog, filter: EventFilter, exhausted: list[bool]) -> Iterator[SessionEvent]:
    """What ``filter`` matches in ``log``, newest first; notes in ``exhausted`` when it ran out
    (the window wants older events than were read)."""
    for event in log.newest_first(active_view=filter.active_view):
        if filter.matches(event):
            yield event
    exhausted.append(True)


async def select(store: Store, suffix: Suffix, filter: EventFilter) -> list[SessionEvent]:
    """The events of ``suffix``'s session that ``filter`` selects, reading older commits
    while the window needs them."""
    step = max(8, len(suffix.commits))
    while True:
        stored = [e for c in suffix.commits for e in c.events]
        events: Sequence[SessionEvent] = _Decoded(stored, suffix.session.id)
        boundary = next(
            (i for i in range(len(stored) - 1, -1, -1) if stored[i][TYPE] == _COMPACTION), -1
        )
        view = () if boundary < 0 else view_of(events[boundary])
        positions = {e[EVENT_ID]: i for i, e in enumerate(stored)}
        if filter.active_view and boundary >= 0:
            missing = [i for i in view if i not in positions]
            if missing and suffix.low > 1:
                found = await _by_id(store, suffix, missing)
                events = [*found, *events]
                boundary += len(found)
                positions = {e.id: i for i, e in enumerate(events)}
        log = ReadLog(events, boundary, view, positions)
        exhausted: list[bool] = []
        window = filter.window_of_newest_first(_matched(log, filter, exhausted))
        if not exhausted or suffix.low <= 1 or (filter.active_view and boundary >= 0):
            return window
        if filter.last_n is None:  # the whole view back to its boundary: the rest at once
            step = suffix.low
        await _older(store, suffix, step)
        step *= 4


async def snapshot_of(store: Store, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
    """The session, its version, the events ``filter`` selects and the newest lease."""
    suffix = await first_read(store, session_id, span_for(store, session_id, filter))
    if suffix is None:
        return None
    events = await select(store, suffix, filter)
    lease = suffix.commits[-1].lease if suffix.commits else lease_from_doc(suffix.doc)
    return SessionSnapshot(
        session=suffix.session, version=suffix.version, events=tuple(events), lease=lease
    )


async def find_events(store: Store, session_id: str, filter: EventFilter) -> list[SessionEvent]:
    """The events of one session that ``filter`` selects; empty for an unknown session."""
    if store.keys is not None and filter.has_text_criteria:  # the server cannot read the text
        suffix = await first_read(store, session_id, None, _SEARCHED, filter)
        return [] if suffix is None else await select(store, suffix, filter)
    prefilter = _prefilter(filter)
    if prefilter is not None:
        suffix = await first_read(store, session_id, None, prefilter)
    else:
        suffix = await first_read(store, session_id, span_for(store, session_id, filter))
    return [] if suffix is None else await select(store, suffix, filter)


_SEARCHED: Final = {
    f"{EVENTS}.{TYPE}": {
        "$in": [EventType.USER.name, EventType.ASSISTANT.name, EventType.SYSTEM.name]
    }
}
"""The commits a text search of encrypted content reads: those holding messages with text."""


def _prefilter(filter: EventFilter) -> Doc | None:
    """What narrows a window-less keyword search to the commits that may match: never misses
    one (the match itself is made in memory)."""
    if filter.last_n is not None or filter.active_view:
        return None
    if filter.keyword is not None:
        return {TEXT: {"$regex": keyword_regex(filter.keyword)}}
    if filter.keywords is not None and filter.match_mode is not None:
        terms = [{TEXT: {"$regex": keyword_regex(k)}} for k in filter.keywords]
        return {"$or": terms} if filter.match_mode.value == "any" else {"$and": terms}
    return None


async def user_events(store: Store, user_id: str, filter: EventFilter) -> list[SessionEvent]:
    """The events of every session of the user that ``filter`` selects, by timestamp (ties in
    the order the sessions were created, then log order), with a plain window."""
    unwindowed = filter.without_window()
    searched = store.keys is not None and unwindowed.has_text_criteria
    prefilter = _SEARCHED if searched else _prefilter(unwindowed)
    logs: list[tuple[str, list[Doc]]] = []
    with storage_errors(f"read the events of user {user_id!r}"):
        sessions = await store.sessions.find(
            {USER_ID: user_id}, {INCARNATION: 1}, sort=OLDEST_FIRST
        ).to_list(None)
        for start in range(0, len(sessions), IN_CHUNK):
            chunk = sessions[start : start + IN_CHUNK]
            query: Doc = {SESSION: {"$in": [s[ID] for s in chunk]}}
            if prefilter is not None:
                query["$or"] = [prefilter, _BOUNDARY]
            docs = await store.commits.find(query).to_list(None)
            by_session: dict[Any, list[Doc]] = {}
            for doc in docs:
                by_session.setdefault((doc[SESSION], doc.get(INCARNATION)), []).append(doc)
            for session in chunk:
                mine = sorted(
                    by_session.get((session[ID], session[INCARNATION]), []), key=lambda d: d[COMMIT]
                )
                logs.append((session[ID], mine))
    every = [doc for _, mine in logs for doc in mine]
    where = f"the sessions of user {user_id!r}"
    await open_commits(store, every, user_id, unwindowed if searched else None, where)
    matched: list[SessionEvent] = []
    for session_id, mine in logs:
        matched += unwindowed.read_backwards(ReadLog.of(_events(mine, session_id)))
    matched.sort(key=lambda e: e.timestamp)  # stable: ties keep session order, then log order
    return filter.apply_window(matched)


# --- the keyword prefilter ---------------------------------------------------------------------


def _literal(text: str) -> str:
    r"""A regex that matches ``text`` literally: every ASCII non-alphanumeric as ``\xHH`` (the
    same in PCRE and Python's ``re``, and no NUL in the pattern)."""
    return "".join(f"\\x{ord(c):02x}" if c.isascii() and not c.isalnum() else c for c in text)


# Characters whose lower case is a single character they are neither the upper nor the title
# case of (found by scanning every code point; Python 3.11's Unicode tables).
_ODD_UPPER: Final = {
    "\u03b8": "\u03f4",
    "\u00df": "\u1e9e",
    "\u03c9": "\u2126",
    "k": "\u212a",
    "\u00e5": "\u212b",
}
_DOTTED_I: Final = "\u0130"
"""The one character whose lower case is two characters: ``i`` and U+0307."""


def _char(char: str) -> str:
    """A regex for any character whose lower case contains ``char`` (itself lower case)."""
    variants = {char}
    for other in (char.upper(), char.title()):
        if len(other) == 1 and (other.lower() == char or (char == "\u03c2" and other == "\u03a3")):
            variants.add(other)  # final sigma: Python lowers a word-final capital sigma to it
    if char in _ODD_UPPER:
        variants.add(_ODD_UPPER[char])
    if char in ("i", "\u0307"):
        variants.add(_DOTTED_I)
    if len(variants) == 1:
        return _literal(char)
    return "[" + "".join(_literal(v) for v in sorted(variants)) + "]"


def keyword_regex(keyword: str) -> str:
    """A regex that matches a text wherever the text, lower-cased, contains ``keyword`` (lower
    case). No ``i`` option, so the server's notion of case cannot differ from Python's."""
    parts: list[str] = []
    index = 0
    while index < len(keyword):
        if keyword.startswith("i\u0307", index):
            parts.append(f"(?:{_literal(_DOTTED_I)}|{_char('i')}{_char(chr(0x307))})")
            index += 2
            continue
        parts.append(_char(keyword[index]))
        index += 1
    return "".join(parts)
