"""Forks: making one in two commands, finding a point, and deletes that keep what forks read.

**A fork** is a session document that names its parent and the point (``parent``), where its
own commits start (``base``) and whose commits its prefix is (``lineage``, flattened: a fork of
a fork names its grandparent's commits directly). No commit is copied. Making one is a read of
the parent and the point (one aggregate), then one ``update`` command with two statements, in
order: insert the fork's document, then count the fork on the parent's document *if the parent
is still alive* (not marked for deletion, same incarnation). If the second matched, any delete
of the parent that follows finds the fork (below); if not, the parent was deleted meanwhile: the
fork's document is removed again and the fork fails with `SessionNotFound`.

**Deletes.** A delete marks the session doomed first (``_sessions``). Then, if live forks read
its commits (their lineage names it), it is *retained*: its document stays, marked
``retained``, with no owner, metadata or indexed attributes (so no read finds it, and its id
stays taken), and only the commits its forks read stay (those after the furthest point a fork
reads go). When the last such fork is deleted, a retained session goes too. A retained session
whose forks all went while it was being retained is removed by the next sweep.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Final

from pymongo import ASCENDING, DESCENDING, UpdateOne

from ..._pymongo_errors import storage_errors
from ...events import ForkPoint, Session
from ...exceptions import SessionExists, SessionNotFound, UsageError
from ...rewinds import LogPoint
from .._metadata_index import index_entries
from ._layout import (
    ATTRIBUTES,
    BASE,
    COMMIT,
    CREATED_AT,
    EVENT_ID,
    EVENTS,
    EXPIRES_AT,
    FORKS,
    ID,
    INCARNATION,
    LAST,
    LINEAGE,
    METADATA,
    OLDEST_FIRST,
    PARENT,
    RETAINED,
    SESSION,
    THROUGH,
    TYPE,
    USER_ID,
    Doc,
    Store,
    new_incarnation,
    session_fields,
    session_from_doc,
)
from ._lineage import Lineage
from ._prefix import commits_query, events_of, lineage_of, owns, segments_doc
from ._read import first_read

__all__ = [
    "DOOMED",
    "collect",
    "create_fork_indexes",
    "find_forks",
    "fork",
    "locate",
    "retain",
]

DOOMED: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The expiry a delete marks a session with before it removes anything."""
_BOUNDARIES: Final = ("COMPACTION", "REWIND")


async def create_fork_indexes(store: Store) -> None:
    """The indexes forks need: the forks of a session, and who reads a session's commits."""
    await store.sessions.create_index([(f"{PARENT}.{SESSION}", ASCENDING)], sparse=True)
    await store.sessions.create_index([(f"{LINEAGE}.{SESSION}", ASCENDING)], sparse=True)


# --- reading a session and a point -------------------------------------------------------------


async def _gather(store: Store, session_id: str, pipelines: list[list[Doc]]) -> list[Doc]:
    """The session document and the commits each pipeline selects: one aggregate where the
    server runs ``$unionWith``, else one read each."""
    if not store.double:
        stages: list[Doc] = [{"$match": {ID: session_id}}]
        stages += [{"$unionWith": {"coll": store.commits.name, "pipeline": p}} for p in pipelines]
        try:
            cursor: Any = await store.sessions.aggregate(stages)
            return list(await cursor.to_list(None))
        except (NotImplementedError, TypeError):  # mongomock-motor (no $unionWith, or Motor)
            store.double = True
    session = await store.sessions.find_one({ID: session_id})
    if session is None:
        return []
    docs = [session]
    for pipeline in pipelines:
        cursor = store.commits.aggregate(pipeline)
        if not hasattr(cursor, "to_list"):
            cursor = await cursor
        docs += await cursor.to_list(None)
    return docs


def _alive(doc: Doc | None) -> Doc | None:
    return None if doc is None or doc.get(RETAINED) else doc


def _point_after(
    lineage: Lineage, commit: Doc, event_id: str, *, before: bool
) -> LogPoint:
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


async def _by_event(
    store: Store, session_id: str, event_id: str, before: bool, newest: bool
) -> tuple[Doc, Lineage, LogPoint, int] | None:
    """The session document, its lineage, the point at (or ``before``) ``event_id``, and, with
    ``newest``, the session's version (else -1): one aggregate."""
    pipelines: list[list[Doc]] = [[{"$match": {f"{EVENTS}.{EVENT_ID}": event_id}}]]
    if newest:
        pipelines.append(
            [{"$match": {SESSION: session_id}}, {"$sort": {COMMIT: DESCENDING}}, {"$limit": 1}]
        )
    with storage_errors(f"read session {session_id!r}"):
        docs = await _gather(store, session_id, pipelines)
    doc = _alive(next((d for d in docs if COMMIT not in d), None))
    if doc is None:
        return None
    lineage = lineage_of(doc)
    commits = [d for d in docs if COMMIT in d and owns(lineage, d)]
    holder = next(
        (d for d in commits if any(e[EVENT_ID] == event_id for e in events_of(lineage, d))),
        None,
    )
    if holder is None:
        raise UsageError(f"session {session_id!r} has no event {event_id!r}")
    point = _point_after(lineage, holder, event_id, before=before)
    version = -1
    if newest:
        version = max([lineage.base, *(d[COMMIT] for d in commits if d[SESSION] == session_id)])
        newest_read = [d for d in docs if COMMIT in d and d[SESSION] == session_id]
        if newest_read and not all(owns(lineage, d) for d in newest_read):
            suffix = await first_read(store, session_id, 1)  # an old incarnation's in the way
            version = -1 if suffix is None else suffix.version
    store.lineages.note(lineage)
    return doc, lineage, point, version


async def locate(
    store: Store, session_id: str, at: int | str | None, before: str | None
) -> tuple[LogPoint, int] | None:
    """The point ``at`` or ``before`` names, and the session's version: one read."""
    event_id = before if before is not None else at
    if isinstance(event_id, str):
        found = await _by_event(store, session_id, event_id, before is not None, newest=True)
        if found is None or found[3] < 0:
            return None
        return found[2], found[3]
    suffix = await first_read(store, session_id, 1)
    if suffix is None:
        return None
    version = suffix.version
    if at is None:
        return LogPoint(version=version), version
    assert isinstance(at, int)
    if at > version:
        raise UsageError(f"session {session_id!r} is at version {version}, not {at}")
    return LogPoint(version=at), version


async def _parent(
    store: Store, session_id: str, at: int | str | None, before: str | None
) -> tuple[Doc, Lineage, LogPoint]:
    """The parent's document, lineage and the point: one read.

    Raises:
        SessionNotFound: no such parent.
        UsageError: the point is not in its log.
    """
    event_id = before if before is not None else at
    if isinstance(event_id, str):
        found = await _by_event(store, session_id, event_id, before is not None, newest=False)
        if found is None:
            raise SessionNotFound(session_id)
        return found[0], found[1], found[2]
    if at is None:
        suffix = await first_read(store, session_id, 1)
        if suffix is None:
            raise SessionNotFound(session_id)
        return suffix.doc, suffix.lineage, LogPoint(version=suffix.version)
    assert isinstance(at, int)
    cached = store.lineages.get(session_id) or Lineage(session_id, -1)
    pipeline: list[Doc] = [{"$match": commits_query(cached, max(at, 1))}, {"$limit": 1}]
    with storage_errors(f"read session {session_id!r}"):
        docs = await _gather(store, session_id, [pipeline])
    doc = _alive(next((d for d in docs if COMMIT not in d), None))
    if doc is None:
        raise SessionNotFound(session_id)
    lineage = lineage_of(doc)
    if at > lineage.base and not any(COMMIT in d and owns(lineage, d) for d in docs):
        suffix = await first_read(store, session_id, 1)  # none at or past it, or not its own
        if suffix is None:
            raise SessionNotFound(session_id)
        if at > suffix.version:
            raise UsageError(f"session {session_id!r} is at version {suffix.version}, not {at}")
    store.lineages.note(lineage)
    return doc, lineage, LogPoint(version=at)


# --- making a fork ------------------------------------------------------------------------------


async def fork(
    store: Store, session_id: str, child: Session, at: int | str | None, before: str | None
) -> Session:
    """Create ``child`` as a fork of the session at the point ``at`` or ``before`` names:
    two commands (see the module docs)."""
    doc, lineage, point = await _parent(store, session_id, at, before)
    origin = ForkPoint(session_id=session_id, version=point.version, event_id=point.event_id)
    segments = lineage.clipped(point.version, point.event_id)
    incarnation = new_incarnation()
    fields = {
        **session_fields(child, index_entries(child, store.indexed_keys)),
        CREATED_AT: child.created_at,
        INCARNATION: incarnation,
        PARENT: {SESSION: session_id, COMMIT: point.version, THROUGH: point.event_id},
        BASE: point.version,
        LINEAGE: segments_doc(segments),
    }
    alive = {
        ID: session_id,
        INCARNATION: lineage.incarnation,
        EXPIRES_AT: {"$ne": DOOMED},
        RETAINED: {"$ne": True},
    }
    with storage_errors(f"fork session {session_id!r}"):
        result = await store.sessions.bulk_write(
            [
                UpdateOne({ID: child.id}, {"$setOnInsert": fields}, upsert=True),
                UpdateOne(alive, {"$inc": {FORKS: 1}}),
            ],
            ordered=True,
        )
        created = 0 in result.upserted_ids
        parent_alive = result.matched_count == (1 if created else 2)
        if created and not parent_alive:
            await store.sessions.delete_one({ID: child.id, INCARNATION: incarnation})
            raise SessionNotFound(session_id)
        if not created:
            return await _repeated(store, child, origin, lineage, parent_alive)
    made = Lineage(child.id, incarnation, point.version, segments)
    store.lineages.note(made)
    store.newest.note(child.id, incarnation, point.version)
    return child.model_copy(update={"forked_from": origin})


async def _repeated(
    store: Store, child: Session, origin: ForkPoint, parent: Lineage, parent_alive: bool
) -> Session:
    """The fork a repeated call finds (the first call's reply was lost), or why there is none.

    Raises:
        SessionExists: ``child.id`` is another session, or another fork.
        SessionNotFound: the parent was deleted and nothing is kept for the fork.
    """
    existing = await store.sessions.find_one({ID: child.id})
    stored = None if _alive(existing) is None else session_from_doc(existing or {})
    if stored is None or stored.forked_from != origin or stored.user_id != child.user_id:
        raise SessionExists(child.id)
    if not parent_alive and origin.version > 0:
        kept = await store.sessions.find_one(
            {ID: origin.session_id, INCARNATION: parent.incarnation}, {ID: 1}
        )
        if kept is None:  # a fork that failed and was not cleaned up: nothing to read
            await store.sessions.delete_one({ID: child.id})
            raise SessionNotFound(origin.session_id)
    return stored


async def find_forks(store: Store, session_id: str) -> list[Session]:
    """The sessions forked from this one, oldest first: one find on an index."""
    with storage_errors(f"find the forks of session {session_id!r}"):
        docs = await store.sessions.find(
            {f"{PARENT}.{SESSION}": session_id, RETAINED: {"$ne": True}}, sort=OLDEST_FIRST
        ).to_list(None)
    return [session_from_doc(d) for d in docs]


# --- deletes that keep what forks read -----------------------------------------------------------


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
        entry[LAST]
        for reader in readers
        for entry in reader[LINEAGE]
        if entry[SESSION] == session_id and entry[INCARNATION] == incarnation
    )


async def retain(store: Store, doc: Doc) -> bool:
    """Keep the doomed session ``doc`` (its id and incarnation) for the forks that read its
    commits, if any do: whether it is kept. Drops what no fork reads."""
    session_id, incarnation = doc[ID], doc[INCARNATION]
    readers = await _readers(store, session_id, incarnation)
    if not readers:
        return False
    needed = _needed(readers, session_id, incarnation)
    await store.sessions.update_one(
        {ID: session_id, INCARNATION: incarnation},
        {"$set": {RETAINED: True}, "$unset": {USER_ID: "", ATTRIBUTES: "", METADATA: ""}},
    )
    await store.commits.delete_many(
        {
            SESSION: session_id,
            "$or": [{INCARNATION: {"$ne": incarnation}}, {COMMIT: {"$gt": needed}}],
        }
    )
    await release(store, doc)
    return True


async def release(store: Store, doc: Doc) -> None:
    """The session ``doc`` no longer reads its prefix: remove the retained sessions of its
    lineage that nobody reads any more."""
    for entry in doc.get(LINEAGE) or []:
        await collect(store, entry[SESSION], entry[INCARNATION])


async def collect(store: Store, session_id: str, incarnation: object) -> None:
    """Remove the retained session (of this incarnation) if no fork reads it any more, else
    drop the commits no fork reads."""
    query = {ID: session_id, INCARNATION: incarnation, RETAINED: True}
    if await store.sessions.find_one(query, {ID: 1}) is None:
        return
    readers = await _readers(store, session_id, incarnation)
    if readers:
        needed = _needed(readers, session_id, incarnation)
        await store.commits.delete_many({SESSION: session_id, COMMIT: {"$gt": needed}})
        return
    await store.commits.delete_many({SESSION: session_id})
    await store.sessions.delete_one(query)
