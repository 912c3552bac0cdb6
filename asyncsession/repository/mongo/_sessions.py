"""Session documents: saves, lookups, leases, and deletes that finish (docs/internals/mongodb.md,
"Deletes and the sweep")."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from ..._pymongo_errors import storage_errors
from ..._shield import shielded
from ...events import PRINCIPAL_NAME, Session
from ...exceptions import SessionExists, SessionNotFound
from .._metadata_index import index_entries, index_entry
from .._protocol import Lease
from ._content import open_session, seal_session
from ._forks import DOOMED, retain
from ._layout import (
    ATTRIBUTES,
    COMMIT,
    CREATED_AT,
    EXPIRES_AT,
    HOLDER,
    ID,
    INCARNATION,
    LEASE,
    LINEAGE,
    OLDEST_FIRST,
    RETAINED,
    SESSION,
    USER_ID,
    Doc,
    Store,
    lease_doc,
    new_incarnation,
    session_fields,
    session_from_doc,
)

__all__ = [
    "acquire_lease",
    "delete_expired",
    "delete_session",
    "find_by_id",
    "find_sessions",
    "insert_session",
    "release_lease",
    "save_session",
]

_LIVE: Final = {RETAINED: {"$ne": True}}
"""What every lookup of sessions asks: not a deleted session kept for its forks."""


async def _fields(store: Store, session: Session) -> Doc:
    fields = session_fields(session, index_entries(session, store.indexed_keys))
    await seal_session(store, session.user_id, fields)
    return fields


async def save_session(store: Store, session: Session) -> Session:
    """Create the session, or update its owner, expiry and metadata: one upsert."""
    fields = await _fields(store, session)
    with storage_errors(f"save session {session.id!r}"):
        for attempt in range(2):
            try:
                doc = await store.sessions.find_one_and_update(
                    {ID: session.id, **_LIVE},
                    {
                        "$set": fields,
                        "$setOnInsert": {
                            CREATED_AT: session.created_at,
                            INCARNATION: new_incarnation(),
                        },
                    },
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            except DuplicateKeyError:  # two upserts of a new id raced: the other inserted
                if await store.sessions.find_one({ID: session.id, RETAINED: True}, {ID: 1}):
                    raise SessionExists(session.id) from None
                if attempt:
                    raise
                continue
            assert doc is not None  # an upsert returns the document it wrote
            store.newest.note(session.id, doc[INCARNATION], 0)
            await open_session(store, doc)
            return session_from_doc(doc)
    raise AssertionError("unreachable")  # pragma: no cover


async def insert_session(store: Store, session: Session) -> bool:
    """Insert the session unless its id exists: one insert."""
    incarnation = new_incarnation()
    doc = {ID: session.id, CREATED_AT: session.created_at, INCARNATION: incarnation}
    fields = await _fields(store, session)
    with storage_errors(f"create session {session.id!r}"):
        try:
            await store.sessions.insert_one({**doc, **fields})
        except DuplicateKeyError:
            return False
    store.newest.note(session.id, incarnation, 0)
    store.owners.put(session.id, session.user_id)
    return True


async def find_by_id(store: Store, session_id: str) -> Session | None:
    """The session, or ``None``."""
    with storage_errors(f"read session {session_id!r}"):
        doc = await store.sessions.find_one({ID: session_id, **_LIVE})
    if doc is None:
        return None
    await open_session(store, doc)
    return session_from_doc(doc)


async def find_sessions(
    store: Store, name: str | None, value: str, limit: int | None
) -> list[Session]:
    """The sessions of a user (``name`` ``None`` or the principal) or with an indexed metadata
    value, oldest first: one find on an index."""
    if name is None or name == PRINCIPAL_NAME:
        query: Doc = {USER_ID: value, **_LIVE}
    else:
        query = {ATTRIBUTES: index_entry(name, value), **_LIVE}
    with storage_errors(f"find sessions by {name or USER_ID} {value!r}"):
        cursor = store.sessions.find(query, sort=OLDEST_FIRST, limit=limit or 0)
        docs = await cursor.to_list(None)
    for doc in docs:
        await open_session(store, doc)
    return [session_from_doc(doc) for doc in docs]


async def _remove(store: Store, session_id: str, claim: Doc) -> bool:
    """Mark the session doomed if ``claim`` still matches it, then remove its commits and its
    document (or retain it for its forks); whether it was there to remove."""
    doc = await store.sessions.find_one_and_update(
        {ID: session_id, **claim}, {"$set": {EXPIRES_AT: DOOMED}}, {INCARNATION: 1, LINEAGE: 1}
    )
    if doc is None and claim:
        return False  # its expiry was extended since the sweep found it
    store.newest.forget(session_id)
    store.owners.forget(session_id)
    if doc is not None and await retain(store, doc):
        return True
    await store.commits.delete_many({SESSION: session_id})
    if store.bucket is not None:
        await store.bucket.delete_session(session_id)
    if doc is None:
        return False
    await store.sessions.delete_one({ID: session_id, INCARNATION: doc.get(INCARNATION)})
    return True


async def delete_session(store: Store, session_id: str) -> None:
    """Remove the session and its commits; an unknown id is not an error (what an earlier
    delete left is removed too)."""
    with storage_errors(f"delete session {session_id!r}"):
        await _remove(store, session_id, {})


async def delete_expired(store: Store, before: datetime) -> int:
    """Remove every session that expired strictly before ``before``; how many were removed."""
    removed = 0
    with storage_errors("delete expired sessions"):
        claim = {EXPIRES_AT: {"$lt": before}, **_LIVE}
        docs = await store.sessions.find(claim, {ID: 1}).to_list(None)
    for doc in docs:
        with storage_errors(f"delete expired session {doc[ID]!r}"):
            removed += await shielded(_remove(store, doc[ID], claim))
    return removed


def _free_for(holder: str, now: datetime) -> Doc:
    """What a lease must be for ``holder`` to take it: none, expired, or its own."""
    return {
        "$or": [
            {LEASE: None},
            {f"{LEASE}.{EXPIRES_AT}": {"$lte": now}},
            {f"{LEASE}.{HOLDER}": holder},
        ]
    }


def _target(session_id: str, version: int) -> tuple[Doc, bool]:
    """The filter of the document a lease on ``version`` lives on, and whether it is the
    session document."""
    if version == 0:
        return {ID: session_id}, True
    return {SESSION: session_id, COMMIT: version}, False


async def acquire_lease(store: Store, session_id: str, version: int, lease: Lease) -> bool:
    """Take or renew the lease on commit ``version`` (0: the session): one conditional update;
    a refusal reads whether the session exists."""
    query, on_session = _target(session_id, version)
    collection = store.sessions if on_session else store.commits
    now = datetime.now(UTC)
    with storage_errors(f"lease session {session_id!r}"):
        result = await collection.update_one(
            {**query, **_free_for(lease.holder, now)},
            {"$set": {LEASE: lease_doc(lease.holder, lease.expires_at)}},
        )
        if result.matched_count:
            return True
        if await store.sessions.find_one({ID: session_id}, {ID: 1}) is None:
            raise SessionNotFound(session_id)
    return False


async def release_lease(store: Store, session_id: str, version: int, holder: str) -> bool:
    """End the lease on commit ``version`` if ``holder`` holds it: one conditional update;
    whether it did."""
    query, on_session = _target(session_id, version)
    collection = store.sessions if on_session else store.commits
    with storage_errors(f"release a lease of session {session_id!r}"):
        result = await collection.update_one(
            {**query, f"{LEASE}.{HOLDER}": holder}, {"$unset": {LEASE: ""}}
        )
    return result.matched_count > 0
