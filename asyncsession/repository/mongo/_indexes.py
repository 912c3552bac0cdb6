"""The indexes of a MongoDB store, and what the server says about its limits.

The events collection has one index besides ``_id``: ``{session_id, archived, seq}``. It answers
the active view (``archived: false`` and a range of positions), a range of every event (one
query per value of ``archived``, see `by_position`), and whatever names only the session (a
delete, a user's sessions). Earlier versions also created ``{session_id, seq}``, which the store
no longer uses: drop it once every process runs this version (see "Indexes" in
``docs/mongodb.md``). The sessions collection has ``{user_id}``, ``{expires_at}``, and for lookups
by metadata in creation order (see ``_metadata``) ``{user_id, created_at, _id}`` and
``{indexed, created_at, _id}``.
"""

from __future__ import annotations

from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from ..._pymongo_errors import storage_errors
from ._layout import ARCHIVED, EXPIRES_AT, SEQ, SESSION_ID, USER_ID
from ._metadata import INDEXED_INDEX, OWNER_INDEX
from ._store import Store

__all__ = ["create_indexes"]


async def create_indexes(store: Store, database: AsyncDatabase[Any]) -> None:
    """Create the store's indexes (idempotent) and read the server's document size limit."""
    with storage_errors("create indexes"):
        await store.sessions.create_index([(USER_ID, 1)])
        await store.sessions.create_index([(EXPIRES_AT, 1)])
        await store.sessions.create_index(OWNER_INDEX)
        await store.sessions.create_index(INDEXED_INDEX)
        await store.events.create_index([(SESSION_ID, 1), (ARCHIVED, 1), (SEQ, 1)])
        await store.event_ids.create_index([(SESSION_ID, 1)])
    try:
        hello = await database.command("hello")
    except (PyMongoError, NotImplementedError):  # mongomock has no hello: keep 16 MiB
        return
    size = hello.get("maxBsonObjectSize")
    if isinstance(size, int) and size > 0:
        store.max_document_size = size
