"""Turn leases on the session document: ``turn_leases.<key>: {holder, expires_at}``.

A lease is taken with one conditional ``update_one`` (free, expired, or already ours) and given
back with another (still ours). Keys are `lease_key` digests of the request id, so any id is a
safe field name. A lease a crashed holder left behind stays in the document until a retry of
that request takes it over (or the session is deleted); it is a few dozen bytes.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ..._pymongo_errors import storage_errors
from ...exceptions import SessionNotFound
from .._leases import lease_key
from ._layout import EXPIRES_AT, HOLDER, ID, TURN_LEASES
from ._store import Store

__all__ = ["acquire_lease", "release_lease"]


async def acquire_lease(
    store: Store, session_id: str, request_id: str, holder: str, ttl: timedelta
) -> bool:
    """Take or renew the lease; ``False`` while another holder's lease runs."""
    field = f"{TURN_LEASES}.{lease_key(request_id)}"
    now = datetime.now(UTC)
    with storage_errors(f"lease request {request_id!r} of session {session_id!r}"):
        result = await store.sessions.update_one(
            {
                ID: session_id,
                "$or": [
                    {field: {"$exists": False}},
                    {f"{field}.{EXPIRES_AT}": {"$lte": now}},
                    {f"{field}.{HOLDER}": holder},
                ],
            },
            {"$set": {field: {HOLDER: holder, EXPIRES_AT: now + ttl}}},
        )
        if result.matched_count:
            return True
        exists = await store.sessions.find_one({ID: session_id}, {ID: 1})
    if exists is None:
        raise SessionNotFound(session_id)
    return False


async def release_lease(store: Store, session_id: str, request_id: str, holder: str) -> None:
    """Drop the lease if ``holder`` still holds it."""
    field = f"{TURN_LEASES}.{lease_key(request_id)}"
    with storage_errors(f"release request {request_id!r} of session {session_id!r}"):
        await store.sessions.update_one(
            {ID: session_id, f"{field}.{HOLDER}": holder}, {"$unset": {field: ""}}
        )
