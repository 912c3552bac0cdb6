"""Deleting sessions from a MongoDB store so that a delete that died is finished later.

A session is three kinds of documents: its session document, its events below the tail and its
event-id registrations. No single command removes them together, so the writes are ordered
for recovery:

1. the session document is marked: its ``expires_at`` moves to the epoch (for a sweep, this
   is also the atomic re-check of its expiry, so a TTL extended before it wins);
2. its events, then its id registrations, are deleted;
3. the session document goes last.

A delete or a sweep that dies after step 1 leaves a session that has expired long ago, which
the next `delete_expired_sessions` (any ``before``) removes whole; deleting the id again
finishes it too, and also removes events and registrations left by a session document that
went first (as deletes before this order did). Readers of a session being deleted may see it
with fewer events; they never see its events outlive it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

from ..._pymongo_errors import storage_errors
from ..._shield import shielded
from ._layout import EXPIRES_AT, ID, SESSION_ID
from ._store import Store

__all__ = ["GONE", "delete_expired", "delete_session"]

GONE: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""The expiry a session being deleted is given: before any sweep's ``before``."""


async def _finish(store: Store, session_id: str) -> None:
    """Steps 2 and 3: the children, then the session document."""
    await store.events.delete_many({SESSION_ID: session_id})
    await store.event_ids.delete_many({SESSION_ID: session_id})
    await store.sessions.delete_one({ID: session_id})


async def delete_session(store: Store, session_id: str) -> None:
    """Remove the session, its events and its event ids (an unknown id is not an error, and
    still removes what a dead delete left)."""
    with storage_errors(f"delete session {session_id!r}"):
        await store.sessions.update_one({ID: session_id}, {"$set": {EXPIRES_AT: GONE}})
        await _finish(store, session_id)


async def _sweep_one(store: Store, session_id: str, before: datetime) -> bool:
    """Remove the session if it still expired before ``before``; ``True`` if this call did."""
    with storage_errors(f"delete expired session {session_id!r}"):
        claimed = await store.sessions.update_one(
            {ID: session_id, EXPIRES_AT: {"$lt": before}}, {"$set": {EXPIRES_AT: GONE}}
        )
        if claimed.matched_count == 0:
            return False  # extended, or removed by someone else
        await _finish(store, session_id)
    return True


async def delete_expired(store: Store, before: datetime) -> int:
    """Remove every session that expired strictly before ``before``; returns how many.

    Each session is shielded on its own: a cancelled sweep finishes the session it is on, then
    stops (the rest stay for the next sweep).
    """
    with storage_errors("find expired sessions"):
        candidates = await store.sessions.find({EXPIRES_AT: {"$lt": before}}, {ID: 1}).to_list(None)
    removed = 0
    for candidate in candidates:
        removed += await shielded(_sweep_one(store, candidate[ID], before))
    return removed
