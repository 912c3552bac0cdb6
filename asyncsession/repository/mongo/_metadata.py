"""Sessions of a MongoDB store found by indexed metadata.

The metadata is stored as JSON text, which no index can look into, so a session document also
holds ``indexed``: one ``key\\x00value`` string per indexed key with a string value, written
with the metadata by every save and insert. The index ``{indexed, created_at, _id}`` answers a
lookup, oldest first and bounded, in one ``find``; ``{user_id, created_at, _id}`` answers one by
the principal, which is the ``user_id``.
A document written before ``indexed`` existed decodes as before and is found by its principal;
by other keys once it is saved again.
"""

from __future__ import annotations

from typing import Final

from ..._pymongo_errors import storage_errors
from ...events import Session, SessionAttributes
from .._metadata_index import index_entries, index_entry
from ._codec import SESSION_PROJECTION, Doc, session_from_doc
from ._layout import CREATED_AT, ID, INDEXED, USER_ID
from ._store import Store

__all__ = ["INDEXED_INDEX", "OWNER_INDEX", "find_by_metadata", "with_index_entries"]

INDEXED_INDEX: Final = [(INDEXED, 1), (CREATED_AT, 1), (ID, 1)]
"""The index that answers a lookup by metadata, in creation order."""
OWNER_INDEX: Final = [(USER_ID, 1), (CREATED_AT, 1), (ID, 1)]
"""The index that answers a lookup by the principal (the ``user_id``), in creation order."""
_OLDEST_FIRST: Final = [(CREATED_AT, 1), (ID, 1)]


def with_index_entries(fields: Doc, session: Session, keys: frozenset[str]) -> Doc:
    """``fields`` (a session document, or the fields a save sets) with the session's index
    entries."""
    return {**fields, INDEXED: index_entries(session, keys)}


async def find_by_metadata(store: Store, name: str, value: str, limit: int) -> list[Session]:
    """At most ``limit`` sessions whose metadata holds ``value`` under ``name``, oldest first:
    one ``find`` on an index (``user_id`` for the principal)."""
    if name == SessionAttributes.PRINCIPAL_NAME:
        query: Doc = {USER_ID: value}
    else:
        query = {INDEXED: index_entry(name, value)}
    with storage_errors(f"find sessions by metadata {name!r}"):
        cursor = store.sessions.find(query, SESSION_PROJECTION, sort=_OLDEST_FIRST, limit=limit)
        docs = await cursor.to_list(None)
    return [session_from_doc(doc) for doc in docs]
