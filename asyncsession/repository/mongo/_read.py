"""Reads: the snapshot in one command, windows walked back by ranges, a user's events
(docs/internals/mongodb.md, "Reads"). ``archived`` and the view order are derived by
`asyncsession._view.ReadLog` over the commits read, oldest first; it says when it needs more."""

from __future__ import annotations

import inspect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from operator import attrgetter
from typing import Any, Final, cast, overload

import bson
from bson.binary import Binary
from pymongo import DESCENDING

from ..._pymongo_compat import aggregate
from ..._pymongo_errors import storage_errors
from ..._view import BOUNDARY_TYPES, Incomplete, ReadLog
from ...events import EventType, Session, SessionEvent
from ...exceptions import StorageError
from ...filters import EventFilter
from ...rewinds import RewindRecord
from .._protocol import Lease, SessionSnapshot
from ._content import open_commits, open_session
from ._layout import (
    BASE,
    BODY,
    COMMIT,
    EVENT_ID,
    EVENTS,
    EXPIRES_AT,
    FILE,
    HOLDER,
    ID,
    INCARNATION,
    LARGE,
    LEASE,
    LINEAGE,
    OLDEST_FIRST,
    RETAINED,
    SEALED,
    SESSION,
    TEXT,
    TYPE,
    USER_ID,
    Doc,
    Lineage,
    Store,
    as_utc,
    commits_query,
    event_from_doc,
    events_of,
    lineage_of,
    owns,
    session_from_doc,
)

__all__ = [
    "read_body",
    "union",
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
_BOUNDARY: Final = {f"{EVENTS}.{TYPE}": {"$in": [EventType.COMPACTION.name, EventType.REWIND.name]}}
_BOUNDARY_NAMES: Final = frozenset(t.name for t in BOUNDARY_TYPES)
_LEAST_SPAN: Final = 8
"""Commits a window's first range reads at least (when it wants that many events): a session's
recent commits may hold fewer events than the ones the estimate was made from."""
_WHOLE_VIEW: Final = 64
"""Events a window-less read of the active view reads first (then it walks back)."""


@dataclass(slots=True)
class Commit:
    """A commit of a session's log as read: its number, its events, its lease, and whether it
    is the session's own (not its prefix's)."""

    number: int
    events: list[Doc]
    """Its events as stored (of a prefix's last commit, those up to the fork's point)."""
    lease: Lease | None
    own: bool = True


class _Decoded(Sequence[SessionEvent]):
    """Events fetched on their own, then stored events decoded when first read: a window
    decodes the events it looks at."""

    __slots__ = ("_docs", "_events", "_first", "_session_id")

    def __init__(self, first: list[SessionEvent], docs: list[Doc], session_id: str) -> None:
        self._first = first
        self._docs = docs
        self._session_id = session_id
        self._events: list[SessionEvent | None] = [None] * len(docs)

    def __len__(self) -> int:
        return len(self._first) + len(self._docs)

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if index < 0:
            index += len(self)
        if index < len(self._first):
            return self._first[index]
        at = index - len(self._first)
        event = self._events[at]
        if event is None:
            event = self._events[at] = event_from_doc(self._docs[at], self._session_id)
        return event


@dataclass(slots=True)
class Suffix:
    """A session and its newest commits read so far: every commit from ``low`` on."""

    session: Session
    doc: Doc
    """The session document."""
    lineage: Lineage
    commits: list[Commit]
    """Oldest first."""
    low: int
    """Every commit numbered ``low`` or more is in ``commits``; 1: the whole log."""
    version: int
    """The newest commit's number (0: none)."""

    @property
    def incarnation(self) -> int:
        """The session document's incarnation."""
        return self.lineage.incarnation

    @property
    def lease(self) -> Lease | None:
        """The lease on the newest commit read (on the session when that is not its own)."""
        if self.commits and self.commits[-1].own:
            return self.commits[-1].lease
        return lease_from_doc(self.doc)


def lease_from_doc(doc: Doc | None) -> Lease | None:
    """The lease a document holds, or ``None``."""
    lease: object = None if doc is None else doc.get(LEASE)
    if not isinstance(lease, dict):
        return None
    fields = cast(Doc, lease)
    return Lease(holder=str(fields[HOLDER]), expires_at=as_utc(fields[EXPIRES_AT]))


def _commits(docs: list[Doc], lineage: Lineage) -> list[Commit]:
    """The commits of the log among ``docs``, oldest first."""
    commits: list[Commit] = []
    for doc in docs:
        if owns(lineage, doc):
            own = doc[SESSION] == lineage.session
            events = doc[EVENTS] if own else events_of(lineage, doc)
            lease = lease_from_doc(doc) if LEASE in doc else None
            commits.append(Commit(doc[COMMIT], events, lease, own))
    commits.sort(key=attrgetter("number"))
    return commits


async def union(store: Store, session_id: str, *pipelines: list[Doc]) -> list[Doc]:
    """The commits each pipeline selects, then the session document: one aggregate where the
    server runs ``$unionWith``, else one read each.

    The commits come first and the session document is unioned onto them: a server that does
    not serve a ``$unionWith`` subpipeline from an index (the test server scans the collection
    it names) then scans the sessions, not the far larger commits."""
    if not store.double:
        stages = [*pipelines[0]]
        for pipeline in pipelines[1:]:
            stages.append({"$unionWith": {"coll": store.commits.name, "pipeline": pipeline}})
        session = [{"$match": {ID: session_id}}]
        stages.append({"$unionWith": {"coll": store.sessions.name, "pipeline": session}})
        try:
            cursor: Any = store.commits.aggregate(stages)
            if inspect.isawaitable(cursor):  # PyMongo's is a coroutine, Motor's its cursor
                cursor = await cursor
            docs: list[Doc] = await cursor.to_list(None)
            return docs
        except NotImplementedError:  # mongomock-motor
            store.double = True
    found = await store.sessions.find_one({ID: session_id})
    if found is None:
        return []
    docs = [found]
    for pipeline in pipelines:
        docs += await aggregate(store.commits, pipeline)
    return docs


def _narrowed(query: Doc, prefilter: Doc | None) -> Doc:
    """``query`` narrowed to the commits ``prefilter`` matches and the boundaries."""
    if prefilter is None:
        return query
    narrowed = {"$or": [prefilter, _BOUNDARY]}
    return {"$and": [query, narrowed]} if "$or" in query else {**query, **narrowed}


async def first_read(
    store: Store,
    session_id: str,
    span: int | None,
    prefilter: Doc | None = None,
    as_of: int | None = None,
    search: EventFilter | None = None,
) -> Suffix | None:
    """The session with the newest ``span`` commits of its log or so, up to ``as_of`` (every
    commit when ``span`` is ``None``; with ``prefilter``, every commit it matches and every
    boundary); ``None`` if the session does not exist. With encryption on, ``search`` is a text
    search whose candidates alone are kept (see `_content.open_commits`)."""
    known = store.newest.get(session_id)
    cached = store.lineages.get(session_id)
    if known is not None and (cached is None or cached.incarnation != known.incarnation):
        known = None  # a range needs the lineage it ranges over
    assumed = cached or Lineage(session_id, -1)
    sort = span is not None and (known is None or (as_of is not None and known.commit < as_of))
    low = 1
    if span is not None and not sort:
        assert known is not None
        low = max(1, (known.commit if as_of is None else as_of) - span + 1)
    query = commits_query(assumed, low, as_of)
    pipeline: list[Doc] = [{"$match": query if prefilter is None else _narrowed(query, prefilter)}]
    if sort:
        pipeline += [{"$sort": {COMMIT: DESCENDING}}, {"$limit": span}]
    with storage_errors(f"read session {session_id!r}"):
        session_doc: Doc | None = None
        others: list[Doc] = []
        for doc in await union(store, session_id, pipeline):
            if COMMIT in doc:
                others.append(doc)
            else:
                session_doc = doc
        if session_doc is None or session_doc.get(RETAINED):
            store.newest.forget(session_id)
            store.lineages.forget(session_id)
            return None
        lineage = lineage_of(session_doc)
        if cached is not None and cached != lineage:  # created again since: read it afresh
            store.newest.forget(session_id)
            store.lineages.forget(session_id)
            return await first_read(store, session_id, span, prefilter, as_of, search)
        mine = list(filter(partial(owns, lineage), others))
        if not mine and known is not None and known.commit > lineage.base and not sort:
            store.newest.forget(session_id)  # another incarnation: the numbers meant nothing
            return await first_read(store, session_id, span, prefilter, as_of, search)
        if sort and not mine and len(others) == span:  # only commits of a deleted incarnation
            ours = {"$or": [{SESSION: {"$ne": session_id}}, {INCARNATION: lineage.incarnation}]}
            others = await store.commits.find(
                {"$and": [commits_query(lineage, 1, as_of), ours]},
                sort=[(COMMIT, DESCENDING)],
                limit=span or 0,
            ).to_list(None)
            mine = [d for d in others if owns(lineage, d)]
        if sort:
            assert span is not None
            low = 1 if len(others) < span else min(d[COMMIT] for d in others)
        if cached is None and lineage.segments:
            low, filled = await _fill(store, lineage, span, prefilter, as_of, mine, low)
            mine += filled
    await open_session(store, session_doc)
    await open_commits(store, mine, session_doc[USER_ID], search, f"session {session_id!r}")
    commits = _commits(mine, lineage)
    version = max(lineage.base if as_of is None else min(lineage.base, as_of), 0)
    if commits:
        version = max(version, commits[-1].number)
    density = None
    if prefilter is None:  # the median of the newest few own commits: a bulk append is rare
        counts: list[int] = []
        for commit in reversed(commits):
            if commit.own and len(counts) < 8:
                counts.append(len(commit.events))
        density = float(sorted(counts)[len(counts) // 2]) if counts else None
    store.lineages.put(session_id, lineage)
    store.newest.note(session_id, lineage.incarnation, version, density)
    return Suffix(
        session=session_from_doc(session_doc),
        doc=session_doc,
        lineage=lineage,
        commits=commits,
        low=low,
        version=version,
    )


async def _fill(
    store: Store,
    lineage: Lineage,
    span: int | None,
    prefilter: Doc | None,
    as_of: int | None,
    mine: list[Doc],
    low: int,
) -> tuple[int, list[Doc]]:
    """What a first read of a fork whose lineage this process did not know missed: the prefix
    commits its window reaches (all of them without a window). Returns the new ``low``."""
    top = lineage.base if as_of is None else min(lineage.base, as_of)
    if low > top + 1:
        return low, []  # its own commits filled the window
    wanted = top if span is None else span - len(mine)
    if wanted <= 0 or top < 1:
        return max(1, min(low, top + 1)), []
    first = max(1, top - wanted + 1)
    query = _narrowed(commits_query(lineage, first, top), prefilter)
    docs = await store.commits.find(query).to_list(None)
    return (1 if first == 1 or span is None else first), docs


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
    query = commits_query(suffix.lineage, low, suffix.low - 1)
    with storage_errors(f"read session {suffix.session.id!r}"):
        docs = await store.commits.find(query).to_list(None)
    await open_commits(store, docs, suffix.session.user_id)
    suffix.commits[:0] = _commits(docs, suffix.lineage)
    suffix.low = low


async def _by_id(store: Store, suffix: Suffix, ids: Sequence[str]) -> list[SessionEvent]:
    """The events with these ids among the commits before the oldest read, in log order."""
    wanted = set(ids)
    query = {
        "$and": [
            commits_query(suffix.lineage, 1, suffix.low - 1),
            {f"{EVENTS}.{EVENT_ID}": {"$in": list(wanted)}},
        ]
    }
    with storage_errors(f"read session {suffix.session.id!r}"):
        docs = await store.commits.find(query).to_list(None)
    await open_commits(store, docs, suffix.session.user_id)
    sid = suffix.session.id
    return [
        event_from_doc(e, sid)
        for c in _commits(docs, suffix.lineage)
        for e in c.events
        if e[EVENT_ID] in wanted
    ]


def _log(suffix: Suffix, detached: list[SessionEvent]) -> ReadLog:
    """What the derivation reads: ``detached`` events fetched by id, then the commits read."""
    stored: list[Doc] = []
    last: dict[int, int] = {}
    positions: dict[str, int] = {}
    boundaries: list[int] = []
    for index, event in enumerate(detached):
        positions[event.id] = index
    index = len(detached)
    for commit in suffix.commits:
        for doc in commit.events:
            stored.append(doc)
            positions[doc[EVENT_ID]] = index
            if doc[TYPE] in _BOUNDARY_NAMES:
                boundaries.append(index)
            index += 1
        last[commit.number] = index - 1
    events = _Decoded(detached, stored, suffix.session.id)
    return ReadLog(
        events,
        positions,
        boundaries,
        last.get,
        start=len(detached),
        complete=suffix.low <= 1,
    )


async def select(store: Store, suffix: Suffix, filter: EventFilter) -> list[SessionEvent]:
    """The events of ``suffix``'s session that ``filter`` selects, reading older commits
    while the derivation or the window needs them."""
    step = max(8, len(suffix.commits))
    detached: list[SessionEvent] = []
    while True:
        try:
            return filter.read_backwards(_log(suffix, detached))
        except Incomplete as need:
            if need.ids:
                found = await _by_id(store, suffix, need.ids)
                if len(found) == len(set(need.ids)):
                    detached = [*found, *detached]
                    continue
                step = suffix.low  # a view naming what the log lacks: read it all
            elif need.version is not None:
                step = max(step, suffix.low - need.version + 1)
            elif filter.last_n is None:  # the rest at once
                step = suffix.low
        await _older(store, suffix, step)
        step *= 4


async def _with_points(store: Store, suffix: Suffix) -> None:
    """Add to a read narrowed by a prefilter the commits its rewinds went back to, so that
    ``archived`` is derived right."""
    held = {c.number for c in suffix.commits}
    sid = suffix.session.id
    wanted = (
        {
            RewindRecord.from_event(event_from_doc(e, sid)).to.version
            for c in suffix.commits
            for e in c.events
            if e[TYPE] == EventType.REWIND.name
        }
        - held
        - {0}
    )
    if not wanted:
        return
    query = {"$and": [commits_query(suffix.lineage), {COMMIT: {"$in": sorted(wanted)}}]}
    with storage_errors(f"read session {suffix.session.id!r}"):
        docs = await store.commits.find(query).to_list(None)
    await open_commits(store, docs, suffix.session.user_id)
    merged = [*suffix.commits, *_commits(docs, suffix.lineage)]
    suffix.commits[:] = sorted(merged, key=lambda c: c.number)


async def snapshot_of(store: Store, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
    """The session, its version, the events ``filter`` selects and the newest lease."""
    span = span_for(store, session_id, filter)
    suffix = await first_read(store, session_id, span, as_of=filter.as_of)
    if suffix is None:
        return None
    events = await select(store, suffix, filter)
    return SessionSnapshot(
        session=suffix.session, version=suffix.version, events=tuple(events), lease=suffix.lease
    )


async def find_events(store: Store, session_id: str, filter: EventFilter) -> list[SessionEvent]:
    """The events of one session that ``filter`` selects; empty for an unknown session."""
    searched = store.keys is not None and filter.has_text_criteria  # the server cannot read it
    prefilter = _SEARCHED if searched else _prefilter(filter)
    if prefilter is not None:
        search = filter if searched else None
        suffix = await first_read(store, session_id, None, prefilter, filter.as_of, search)
        if suffix is not None:
            await _with_points(store, suffix)
    else:
        span = span_for(store, session_id, filter)
        suffix = await first_read(store, session_id, span, as_of=filter.as_of)
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
        return {"$or": terms} if filter.match_mode == "any" else {"$and": terms}
    return None


async def user_events(store: Store, user_id: str, filter: EventFilter) -> list[SessionEvent]:
    """The events of every session of the user that ``filter`` selects, by timestamp (ties in
    the order the sessions were created, then log order), with a plain window."""
    unwindowed = filter.without_window()
    searched = store.keys is not None and unwindowed.has_text_criteria
    prefilter = _SEARCHED if searched else _prefilter(unwindowed)
    suffixes: list[Suffix] = []
    with storage_errors(f"read the events of user {user_id!r}"):
        sessions = await store.sessions.find(
            {USER_ID: user_id, RETAINED: {"$ne": True}},
            {INCARNATION: 1, BASE: 1, LINEAGE: 1},
            sort=OLDEST_FIRST,
        ).to_list(None)
        for start in range(0, len(sessions), IN_CHUNK):
            chunk = sessions[start : start + IN_CHUNK]
            lineages = [lineage_of(s) for s in chunk]
            plain = [lineage.session for lineage in lineages if not lineage.segments]
            branches: list[Doc] = [{SESSION: {"$in": plain}}] if plain else []
            branches += [commits_query(lin) for lin in lineages if lin.segments]
            query = _narrowed(branches[0] if len(branches) == 1 else {"$or": branches}, prefilter)
            if filter.as_of is not None:
                query = {"$and": [query, {COMMIT: {"$lte": filter.as_of}}]}
            docs = await store.commits.find(query).to_list(None)
            by_session: dict[Any, list[Doc]] = {}
            for doc in docs:
                by_session.setdefault(doc[SESSION], []).append(doc)
            where = f"the sessions of user {user_id!r}"
            await open_commits(store, docs, user_id, unwindowed if searched else None, where)
            for doc, lineage in zip(chunk, lineages, strict=True):
                sources = {lineage.session, *(s.session for s in lineage.segments)}
                candidates = [d for source in sources for d in by_session.get(source, [])]
                suffixes.append(
                    Suffix(
                        session=Session(id=doc[ID], user_id=user_id),
                        doc=doc,
                        lineage=lineage,
                        commits=_commits(candidates, lineage),
                        low=1,
                        version=0,
                    )
                )
    matched: list[SessionEvent] = []
    for suffix in suffixes:
        if prefilter is not None:
            await _with_points(store, suffix)
        matched += await select(store, suffix, unwindowed)
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


async def read_body(store: Store, session_id: str, event_id: str) -> SessionEvent | None:
    """The event as appended, its whole body fetched when offloaded; ``None`` when the
    session has no such event. One aggregate (the event's commit and the session document),
    and the file's two reads when the body is offloaded."""
    match = {SESSION: session_id, f"{EVENTS}.{EVENT_ID}": event_id}
    with storage_errors(f"read session {session_id!r}"):
        docs = await union(store, session_id, [{"$match": match}])
    session_doc = next((d for d in docs if COMMIT not in d), None)
    if session_doc is None:
        return None
    await open_session(store, session_doc)
    user_id: str = session_doc[USER_ID]
    found = [
        e
        for d in docs
        if COMMIT in d and d.get(INCARNATION) == session_doc[INCARNATION]
        for e in d[EVENTS]
        if e[EVENT_ID] == event_id
    ]
    if not found:
        return None
    entry = found[0]
    large = cast(Doc | None, entry.get(LARGE))
    if large is not None:
        entry = {**entry, BODY: await _whole_body(store, session_id, user_id, large)}
    await open_commits(store, [{EVENTS: [entry]}], user_id)
    return event_from_doc(entry, session_id)


async def _whole_body(store: Store, session_id: str, user_id: str, large: Doc) -> Any:
    """An offloaded body, read from its file: the body document, or its encrypted value."""
    if store.bucket is None:
        raise StorageError(
            f"session {session_id!r} has an offloaded body, which needs a PyMongo database"
        )
    with storage_errors(f"read a large body of session {session_id!r}"):
        data = await store.bucket.download(large[FILE])
    if data is None:
        raise StorageError(f"the offloaded body {large[FILE]!r} of session {session_id!r} is gone")
    if large.get(SEALED):
        return Binary(data, 6)
    body: Doc = bson.decode(data)  # pyright: ignore[reportUnknownMemberType]
    return body
