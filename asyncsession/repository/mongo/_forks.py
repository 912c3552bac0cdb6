"""Forks on MongoDB: making one in two commands, finding a point, deletes that keep what forks
read (docs/internals/mongodb.md, "Forks and rewinds"). A fork's lineage, which every read
uses, is in `_layout`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Final, cast

from pymongo import ASCENDING, DESCENDING, UpdateOne

from ..._pymongo_errors import storage_errors
from ...events import ForkPoint, Session, SessionEvent
from ...exceptions import SessionExists, SessionNotFound, UsageError
from ...rewinds import LogPoint
from .._metadata_index import index_entries
from .._protocol import check_owner
from ._content import open_session, seal_session
from ._layout import (
    BASE,
    COMMIT,
    CREATED_AT,
    EVENT_ID,
    EVENTS,
    EXPIRES_AT,
    FILE,
    FORKS,
    ID,
    INCARNATION,
    LARGE,
    LAST,
    LINEAGE,
    PARENT,
    RETAINED,
    SESSION,
    THROUGH,
    TYPE,
    Doc,
    Lineage,
    Segment,
    Store,
    commits_query,
    events_of,
    lineage_of,
    new_incarnation,
    owns,
    session_fields,
    session_from_doc,
)
from ._read import read_body, union

__all__ = [
    "DOOMED",
    "create_fork_indexes",
    "find_forks",
    "fork",
    "fork_body",
    "lease_version",
    "locate",
    "on_prefix",
    "prefix_ids",
    "release",
    "retain",
]

DOOMED: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The expiry a delete marks a session with before it removes anything."""
_BOUNDARIES: Final = ("COMPACTION", "REWIND")


# --- lineages -------------------------------------------------------------------------------------


def _segments_doc(segments: tuple[Segment, ...]) -> list[Doc]:
    return [
        {SESSION: s.session, INCARNATION: s.incarnation, LAST: s.last, THROUGH: s.through}
        for s in segments
    ]


async def create_fork_indexes(store: Store) -> None:
    """The indexes forks need: the forks of a session, and who reads a session's commits."""
    await store.sessions.create_index([(f"{PARENT}.{SESSION}", ASCENDING)], sparse=True)
    await store.sessions.create_index([(f"{LINEAGE}.{SESSION}", ASCENDING)], sparse=True)


# --- reading a session and a point ----------------------------------------------------------------


def _alive(doc: Doc | None) -> Doc | None:
    return None if doc is None or doc.get(RETAINED) else doc


def _newest_pipeline(session_id: str) -> list[Doc]:
    return [{"$match": {SESSION: session_id}}, {"$sort": {COMMIT: DESCENDING}}, {"$limit": 1}]


async def _version(store: Store, lineage: Lineage, docs: list[Doc]) -> int:
    """The session's version, from the newest own commit among ``docs`` (one more find when an
    older incarnation's commit was in the way)."""
    newest = sorted(
        (d for d in docs if COMMIT in d and d[SESSION] == lineage.session),
        key=lambda d: cast(int, d[COMMIT]),
    )[-1:]
    if newest and not owns(lineage, newest[0]):
        newest = await store.commits.find(
            {SESSION: lineage.session, INCARNATION: lineage.incarnation},
            {COMMIT: 1, SESSION: 1, INCARNATION: 1},
            sort=[(COMMIT, DESCENDING)],
            limit=1,
        ).to_list(None)
    return max([lineage.base, *(cast(int, d[COMMIT]) for d in newest if owns(lineage, d))])


def _point_after(lineage: Lineage, commit: Doc, event_id: str, *, before: bool) -> LogPoint:
    """The point just after ``event_id`` of the commit ``commit`` (just before it, with
    ``before``), canonical: no event at the end of a commit.

    Raises:
        UsageError: the point is inside the commit of a boundary.
    """
    events = events_of(lineage, commit)
    ids = [e[EVENT_ID] for e in events]
    index = ids.index(event_id) - (1 if before else 0)
    number: int = commit[COMMIT]
    if index < 0:
        return LogPoint(version=number - 1)
    if index == len(ids) - 1:
        return LogPoint(version=number)
    if events[-1][TYPE] in _BOUNDARIES:
        raise UsageError(
            f"the point after event {ids[index]!r} is inside the commit of a boundary: a log "
            "is never there"
        )
    return LogPoint(version=number, event_id=ids[index])


async def _read_point(
    store: Store, session_id: str, at: int | str | None, before: str | None
) -> tuple[Doc, Lineage, LogPoint, int] | None:
    """The session document, its lineage, the point ``at`` or ``before`` names and the
    session's version: one aggregate; ``None`` for an unknown session.

    Raises:
        UsageError: the point is not in the log.
    """
    event_id = before if before is not None else at
    pipelines = [_newest_pipeline(session_id)]
    if isinstance(event_id, str):
        pipelines.insert(0, [{"$match": {f"{EVENTS}.{EVENT_ID}": event_id}}])
    with storage_errors(f"read session {session_id!r}"):
        docs = await union(store, session_id, *pipelines)
        doc = _alive(next((d for d in docs if COMMIT not in d), None))
        if doc is None:
            return None
        lineage = lineage_of(doc)
        version = await _version(store, lineage, docs)
    store.lineages.put(lineage.session, lineage)
    if isinstance(event_id, str):
        holder = next(
            (
                d
                for d in docs
                if COMMIT in d
                and owns(lineage, d)
                and any(e[EVENT_ID] == event_id for e in events_of(lineage, d))
            ),
            None,
        )
        if holder is None:
            raise UsageError(f"session {session_id!r} has no event {event_id!r}")
        return (
            doc,
            lineage,
            _point_after(lineage, holder, event_id, before=before is not None),
            version,
        )
    if at is None:
        return doc, lineage, LogPoint(version=version), version
    assert isinstance(at, int)
    if at > version:
        raise UsageError(f"session {session_id!r} is at version {version}, not {at}")
    return doc, lineage, LogPoint(version=at), version


async def locate(
    store: Store, session_id: str, at: int | str | None, before: str | None
) -> tuple[LogPoint, int] | None:
    """The point ``at`` or ``before`` names, and the session's version: one read."""
    found = await _read_point(store, session_id, at, before)
    return None if found is None else (found[2], found[3])


# --- making a fork --------------------------------------------------------------------------------


async def fork(
    store: Store, session_id: str, child: Session, at: int | str | None, before: str | None
) -> Session:
    """Create ``child`` as a fork of the session at the point ``at`` or ``before`` names:
    two commands (see the module docs)."""
    found = await _read_point(store, session_id, at, before)
    if found is None:
        raise SessionNotFound(session_id)
    doc, lineage, point, _ = found
    await open_session(store, doc)
    check_owner(session_from_doc(doc), child)
    origin = ForkPoint(session_id=session_id, version=point.version, event_id=point.event_id)
    segments = lineage.clipped(point.version, point.event_id)
    incarnation = new_incarnation()
    fields = session_fields(child, index_entries(child, store.indexed_keys))
    await seal_session(store, child.user_id, fields)
    fields |= {
        CREATED_AT: child.created_at,
        INCARNATION: incarnation,
        PARENT: {SESSION: session_id, COMMIT: point.version, THROUGH: point.event_id},
        BASE: point.version,
        LINEAGE: _segments_doc(segments),
    }
    alive = {
        ID: session_id,
        INCARNATION: lineage.incarnation,
        EXPIRES_AT: {"$ne": DOOMED},
        RETAINED: {"$ne": True},
    }
    with storage_errors(f"fork session {session_id!r}"):
        created, parent_alive = await _insert_fork(store, child.id, fields, alive)
        if created and not parent_alive:  # the parent was deleted meanwhile: undo
            await store.sessions.delete_one({ID: child.id, INCARNATION: incarnation})
            await release(store, fields)
            raise SessionNotFound(session_id)
        if not created:
            return await _repeated(store, child, origin)
    store.lineages.put(child.id, Lineage(child.id, incarnation, point.version, segments))
    store.newest.note(child.id, incarnation, point.version)
    store.owners.put(child.id, child.user_id)
    return child.model_copy(update={"forked_from": origin})


async def _insert_fork(store: Store, child_id: str, fields: Doc, alive: Doc) -> tuple[bool, bool]:
    """Insert the fork's document unless its id exists, then count the fork on its parent if
    the parent is alive: one command (two on mongomock-motor, which runs no bulk update).
    Whether the fork was inserted, and whether the parent was alive."""
    insert = {"$setOnInsert": fields}
    if store.double:
        inserted = await store.sessions.update_one({ID: child_id}, insert, upsert=True)
        counted = await store.sessions.update_one(alive, {"$inc": {FORKS: 1}})
        return inserted.upserted_id is not None, counted.matched_count == 1
    result = await store.sessions.bulk_write(
        [UpdateOne({ID: child_id}, insert, upsert=True), UpdateOne(alive, {"$inc": {FORKS: 1}})],
        ordered=True,
    )
    created = 0 in (result.upserted_ids or {})
    return created, result.matched_count == (1 if created else 2)


async def _repeated(store: Store, child: Session, origin: ForkPoint) -> Session:
    """The fork a repeated call finds (the first call's reply was lost).

    Raises:
        SessionExists: ``child.id`` is another session, or a fork of another point.
    """
    existing = _alive(await store.sessions.find_one({ID: child.id}))
    if existing is None:
        raise SessionExists(child.id)
    await open_session(store, existing)
    stored = session_from_doc(existing)
    if stored.forked_from != origin:
        raise SessionExists(child.id)
    return stored


async def find_forks(store: Store, session_id: str) -> list[Session]:
    """The sessions forked from this one, oldest first: one find on an index."""
    with storage_errors(f"find the forks of session {session_id!r}"):
        docs = await store.sessions.find(
            {f"{PARENT}.{SESSION}": session_id, RETAINED: {"$ne": True}},
            sort=[(CREATED_AT, ASCENDING), (ID, ASCENDING)],
        ).to_list(None)
    for doc in docs:
        await open_session(store, doc)
    return [session_from_doc(d) for d in docs]


# --- what the rest of the store asks of a fork ----------------------------------------------------


async def _lineage(store: Store, session_id: str) -> Lineage | None:
    """The session's lineage, read when this process does not know it (one find)."""
    known = store.lineages.get(session_id)
    if known is not None:
        return known
    doc = _alive(
        await store.sessions.find_one({ID: session_id}, {INCARNATION: 1, BASE: 1, LINEAGE: 1})
    )
    if doc is None:
        return None
    lineage = lineage_of(doc)
    store.lineages.put(lineage.session, lineage)
    return lineage


def lease_version(store: Store, session_id: str, version: int) -> int:
    """Where the lease on commit ``version`` lives as far as this process knows: 0 (the
    session document) for a commit of a fork's prefix, else ``version``."""
    lineage = store.lineages.get(session_id)
    return 0 if lineage is not None and version <= lineage.base else version


async def on_prefix(store: Store, session_id: str, version: int) -> bool:
    """Whether commit ``version`` is one of a fork's prefix (whose lease lives on the session
    document): after a lease command on the commit found none, which is when a process that
    did not know the session's lineage asks (one find)."""
    if version == 0 or store.lineages.get(session_id) is not None:
        return False
    lineage = await _lineage(store, session_id)
    return lineage is not None and version <= lineage.base


def prefix_ids(store: Store, session_id: str, docs: Sequence[Doc], ids: set[str]) -> set[str]:
    """The ids among ``ids`` that the commits ``docs`` hold as part of the session's prefix
    (an append of them to the fork is a replay); none when this process does not know the
    session's lineage (an append reads it first)."""
    lineage = store.lineages.get(session_id)
    if lineage is None or not lineage.segments:
        return set()
    return {
        e[EVENT_ID]
        for d in docs
        if d[SESSION] != session_id and owns(lineage, d)
        for e in events_of(lineage, d)
        if e[EVENT_ID] in ids
    }


async def fork_body(store: Store, session_id: str, event_id: str) -> SessionEvent | None:
    """``read_body`` of a fork's prefix event: read from the parent's commit, as the fork's."""
    lineage = await _lineage(store, session_id)
    if lineage is None or not lineage.segments:
        return None
    query = {"$and": [commits_query(lineage, 1, lineage.base), {f"{EVENTS}.{EVENT_ID}": event_id}]}
    with storage_errors(f"read session {session_id!r}"):
        doc = await store.commits.find_one(
            query, {SESSION: 1, COMMIT: 1, INCARNATION: 1, EVENTS: 1}
        )
    if doc is None or not any(e[EVENT_ID] == event_id for e in events_of(lineage, doc)):
        return None
    event = await read_body(store, doc[SESSION], event_id)
    return None if event is None else event.model_copy(update={"session_id": session_id})


# --- deletes that keep what forks read ------------------------------------------------------------


async def _readers(store: Store, session_id: str, incarnation: object) -> list[Doc]:
    """The live sessions whose prefix reads the commits of this session (and incarnation)."""
    return await store.sessions.find(
        {
            LINEAGE: {"$elemMatch": {SESSION: session_id, INCARNATION: incarnation}},
            EXPIRES_AT: {"$ne": DOOMED},
        },
        {LINEAGE: 1},
    ).to_list(None)


def _needed(readers: list[Doc], session_id: str, incarnation: object) -> int:
    """The newest commit of the session that one of ``readers`` reads."""
    return max(
        cast(int, entry[LAST])
        for reader in readers
        for entry in reader[LINEAGE]
        if entry[SESSION] == session_id and entry[INCARNATION] == incarnation
    )


async def _drop_commits(store: Store, session_id: str, after: int) -> None:
    """Remove the session's commits after ``after`` (all of them at 0) and their files."""
    query: Doc = {SESSION: session_id}
    if after > 0:
        query[COMMIT] = {"$gt": after}
    if store.bucket is not None and after > 0:
        docs = await store.commits.find(query, {f"{EVENTS}.{LARGE}.{FILE}": 1}).to_list(None)
        files = [cast(str, e[LARGE][FILE]) for d in docs for e in d.get(EVENTS, []) if LARGE in e]
        await store.bucket.delete(files)
    await store.commits.delete_many(query)
    if store.bucket is not None and after == 0:
        await store.bucket.delete_session(session_id)


async def retain(store: Store, doc: Doc) -> bool:
    """Keep the doomed session ``doc`` (its id and incarnation) for the forks that read its
    commits, if any do: whether it is kept. Drops what no fork reads."""
    session_id, incarnation = doc[ID], doc[INCARNATION]
    store.lineages.forget(session_id)
    readers = await _readers(store, session_id, incarnation)
    if not readers:
        await release(store, doc)
        return False
    await store.sessions.update_one(
        {ID: session_id, INCARNATION: incarnation}, {"$set": {RETAINED: True}}
    )
    await _collect(store, session_id, incarnation)  # its last fork may have gone meanwhile
    await release(store, doc)
    return True


async def release(store: Store, doc: Mapping[str, Any]) -> None:
    """The session ``doc`` no longer reads its prefix: remove what of the retained sessions of
    its lineage nobody reads any more."""
    for entry in cast(list[Doc], doc.get(LINEAGE) or []):
        await _collect(store, entry[SESSION], entry[INCARNATION])


async def _collect(store: Store, session_id: str, incarnation: object) -> None:
    """Remove the retained session (of this incarnation) if no fork reads it any more, else
    the commits no fork reads."""
    query = {ID: session_id, INCARNATION: incarnation, RETAINED: True}
    found = await store.sessions.find_one(query, {ID: 1, LINEAGE: 1})
    if found is None:
        return
    readers = await _readers(store, session_id, incarnation)
    if readers:
        await _drop_commits(store, session_id, _needed(readers, session_id, incarnation))
        return
    await _drop_commits(store, session_id, 0)
    await store.sessions.delete_one(query)
    await release(store, found)
