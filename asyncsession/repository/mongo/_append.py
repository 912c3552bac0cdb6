"""Appends: one insert of one commit document, and what a refused insert meant (a replay, an
id of another session, a lost race). docs/internals/mongodb.md, "Appends", says why each
guarantee holds."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator

import bson
from pymongo.errors import DocumentTooLarge, DuplicateKeyError

from ..._pymongo_errors import storage_errors
from ...events import SessionEvent
from ...exceptions import EventIdConflict, EventTooLarge, SessionNotFound, StorageError
from .._protocol import Lease
from ._content import encode, too_large
from ._forks import prefix_ids
from ._layout import (
    COMMIT,
    EVENT_ID,
    EVENTS,
    ID,
    INCARNATION,
    SESSION,
    Doc,
    Store,
    commit_doc,
    lease_doc,
)
from ._read import first_read

__all__ = ["append"]

_ATTEMPTS = 100
"""How many commit numbers an append without a version tries before it gives up."""


async def _incarnation(store: Store, session_id: str, at_least: int = 0) -> tuple[int, int]:
    """The session's incarnation and the newest commit number this process knows, read when
    it knows none, or an older one than ``at_least``.

    Raises:
        SessionNotFound: the session does not exist.
    """
    known = store.newest.get(session_id)
    if known is None or known.commit < at_least:
        if await first_read(store, session_id, 1) is None:
            raise SessionNotFound(session_id)
        known = store.newest.get(session_id)
        assert known is not None
    return known.incarnation, known.commit


async def append(
    store: Store,
    session_id: str,
    events: list[SessionEvent],
    expected_version: int | None,
    lease: Lease | None,
) -> bool:
    """Append ``events`` (never empty, no id twice) as one commit; see
    ``SessionRepository.append_events``. Bodies are encrypted for the session's owner and large
    ones uploaded first (`_content`); files of events not committed are deleted after."""
    owner = store.owners.get(session_id)
    if owner is None and store.keys is not None:
        owner = await _owner(store, session_id)
    batch = await encode(store, owner, events)
    if batch.wholes:
        if owner is None and store.newest.get(session_id) is None:
            owner = await _owner(store, session_id)
        await batch.upload(store, session_id, owner)
    dropped: set[str] = set()
    async with _in_turn(store, session_id):
        try:
            done = await _append(
                store, session_id, events, batch.docs, expected_version, lease, dropped
            )
        except EventTooLarge:  # refused before it was sent
            await batch.discard(store, set())
            raise
    # Another error leaves the files: the insert may have landed unacknowledged, and a file
    # nobody refers to goes with its session.
    if batch.files:
        await batch.discard(store, set() if not done else {e.id for e in events} - dropped)
    return done


async def _owner(store: Store, session_id: str) -> str:
    """The session's owner, read (it is noted for the appends that follow).

    Raises:
        SessionNotFound: the session does not exist.
    """
    with storage_errors(f"append to session {session_id!r}"):
        if await first_read(store, session_id, 1) is None:
            raise SessionNotFound(session_id)
    owner = store.owners.get(session_id)
    assert owner is not None
    return owner


@contextlib.asynccontextmanager
async def _in_turn(store: Store, session_id: str) -> AsyncGenerator[None]:
    """Hold the session's append lock of this process."""
    lock, users = store.appending.get(session_id, (None, 0))
    if lock is None:
        lock = asyncio.Lock()
    store.appending[session_id] = (lock, users + 1)
    try:
        async with lock:
            yield
    finally:
        lock, users = store.appending[session_id]
        if users == 1:
            del store.appending[session_id]
        else:
            store.appending[session_id] = (lock, users - 1)


async def _append(
    store: Store,
    session_id: str,
    events: list[SessionEvent],
    docs: list[Doc],
    expected_version: int | None,
    lease: Lease | None,
    dropped: set[str],
) -> bool:
    """The append itself; the ids of the events found stored already (replays) go in
    ``dropped``."""
    with storage_errors(f"append to session {session_id!r}"):
        incarnation, newest = await _incarnation(store, session_id, expected_version or 0)
        if expected_version is not None and not 0 <= expected_version <= newest:
            # A version the session never had: never write (it would leave a gap), but a batch
            # of replays is still done.
            stored = await _stored(store, session_id, incarnation, events, -1)
            dropped.update(stored or ())
            return stored is not None and len(stored) == len(events)
        number = newest + 1 if expected_version is None else expected_version + 1
        leased = None if lease is None else lease_doc(lease.holder, lease.expires_at)
        for _ in range(_ATTEMPTS):
            doc = commit_doc(session_id, number, incarnation, docs, leased)
            if store.double and len(bson.encode(doc)) > store.max_document_size:
                raise too_large(store, session_id, docs)  # PyMongo refuses it on a server
            try:
                if store.double and await store.commits.find_one(
                    {f"{EVENTS}.{EVENT_ID}": {"$in": [d[EVENT_ID] for d in docs]}}, {ID: 1}
                ):
                    raise DuplicateKeyError("an event id is stored already")
                await store.commits.insert_one(doc)
            except DocumentTooLarge as exc:
                raise too_large(store, session_id, docs) from exc
            except DuplicateKeyError:
                pass
            else:
                store.newest.note(session_id, incarnation, number)
                return True
            stored = await _stored(store, session_id, incarnation, events, number)
            if stored is None:  # an orphan was in the way and is gone: try again
                incarnation, newest = await _incarnation(store, session_id)
                continue
            if stored:
                dropped.update(stored)
                docs = [d for d in docs if d[EVENT_ID] not in stored]
                events = [e for e in events if e.id not in stored]
                if not docs:
                    return True
                continue
            if expected_version is not None:
                return False
            store.newest.note(session_id, incarnation, number)  # taken: read what is newer
            incarnation, newest = await _incarnation(store, session_id, number + 1)
            number = newest + 1
    raise StorageError(
        f"could not append to session {session_id!r}: every one of {_ATTEMPTS} commit numbers "
        "was taken by another writer first"
    )


async def _stored(
    store: Store, session_id: str, incarnation: int, events: list[SessionEvent], number: int
) -> set[str] | None:
    """Why an insert was refused: the ids of the batch this session has (a replay, when not
    empty); an empty set when the commit number is taken (a version conflict); ``None`` when
    what was in the way is gone now (an orphan, removed; or this process's view of the session
    was stale, forgotten): try again. One find; more only when another session is involved.

    Raises:
        EventIdConflict: an id belongs to another session.
    """
    ids = {e.id for e in events}
    query = {
        "$or": [
            {SESSION: session_id, COMMIT: number},
            {f"{EVENTS}.{EVENT_ID}": {"$in": list(ids)}},
        ]
    }
    fields = {SESSION: 1, COMMIT: 1, INCARNATION: 1, f"{EVENTS}.{EVENT_ID}": 1}
    docs = await store.commits.find(query, fields).to_list(None)
    ours = [d for d in docs if (d[SESSION], d.get(INCARNATION)) == (session_id, incarnation)]
    prefix = prefix_ids(store, session_id, docs, ids)  # a fork's: replays
    others = [d for d in docs if d not in ours]
    if others and not await _alive(store, session_id, incarnation):
        store.newest.forget(session_id)  # deleted, or created again since this process saw it
        return None
    for doc in others:
        if not await _alive(store, doc[SESSION], doc.get(INCARNATION)):
            await store.commits.delete_one({ID: doc[ID], INCARNATION: doc.get(INCARNATION)})
            return None
        event_id = next((e[EVENT_ID] for e in doc[EVENTS] if e[EVENT_ID] in ids - prefix), None)
        if event_id is not None and doc[SESSION] != session_id:
            raise EventIdConflict(event_id, session_id, doc[SESSION])
    stored = {e[EVENT_ID] for d in ours for e in d[EVENTS] if e[EVENT_ID] in ids} | prefix
    if stored:
        return stored
    return set() if any(d[COMMIT] == number for d in ours) else None


async def _alive(store: Store, session_id: str, incarnation: object) -> bool:
    """Whether the session document of this incarnation exists (else its commits are orphans)."""
    found = await store.sessions.find_one({ID: session_id, INCARNATION: incarnation}, {ID: 1})
    return found is not None
