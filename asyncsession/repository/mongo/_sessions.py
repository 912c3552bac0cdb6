"""Writing session documents of a MongoDB store: upsert and insert-if-absent."""

from __future__ import annotations

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from ..._pymongo_errors import storage_errors
from ...events import Session
from ...exceptions import SessionNotFound
from ._codec import (
    SESSION_PROJECTION,
    Doc,
    new_log_fields,
    new_session_doc,
    session_from_doc,
    session_to_doc,
)
from ._layout import CREATED_AT, ID
from ._metadata import with_index_entries
from ._store import Store

__all__ = ["insert_session", "save_session"]


async def save_session(store: Store, session: Session) -> Session:
    """Upsert the session: its owner, expiry and metadata; a new one gets an empty log."""
    fields = with_index_entries(session_to_doc(session), session, store.indexed_keys)
    created = fields.pop(CREATED_AT)
    update = {"$set": fields, "$setOnInsert": {CREATED_AT: created, **new_log_fields()}}
    sessions = store.sessions
    doc: Doc | None = None
    with storage_errors(f"save session {session.id!r}"):
        for _ in range(3):
            try:
                doc = await sessions.find_one_and_update(
                    {ID: session.id},
                    update,
                    projection=SESSION_PROJECTION,
                    upsert=True,
                    return_document=ReturnDocument.AFTER,
                )
            except DuplicateKeyError:  # a racing upsert inserted it: update it now
                continue
            if doc is None:  # some servers return nothing for a racing upsert
                doc = await sessions.find_one({ID: session.id}, SESSION_PROJECTION)
            if doc is not None:
                break
    if doc is None:
        raise SessionNotFound(session.id)  # deleted as it was saved
    return session_from_doc(doc)


async def insert_session(store: Store, session: Session) -> bool:
    """Insert the session with an empty log unless its id exists; ``True`` if inserted."""
    doc = with_index_entries(new_session_doc(session), session, store.indexed_keys)
    with storage_errors(f"insert session {session.id!r}"):
        try:
            await store.sessions.insert_one(doc)
        except DuplicateKeyError:
            return False
    return True
