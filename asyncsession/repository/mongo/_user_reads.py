"""Reading one user's events across all their sessions, in bounded chunks.

A user may have thousands of sessions. The session documents are streamed from one cursor on
the ``user_id`` index, ``IN_CHUNK`` at a time, without the fields the read never uses (the
session's metadata, the write fences). Each chunk is read like a small user: one aggregation of
the events below the chunk's tails, whose ``$in`` names at most ``IN_CHUNK`` sessions, with the
window pushed down to the server when it is exact (the newest ``n``, or the first pages). Only
the window survives a chunk: a ``last_n`` read keeps the newest ``n`` events seen so far, a page
the first ``(page + 1) * page_size``, so memory follows the chunk and the window, not the user.
A read without a window returns everything, chunk by chunk.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from typing import Final

from ..._pymongo_errors import storage_errors
from ...events import SessionEvent
from ...filters import EventFilter
from ._codec import Doc
from ._layout import FENCES, INDEXED, METADATA, USER_ID
from ._read import LogReader
from ._state import LogState, decode_state
from ._store import IN_CHUNK, Store

__all__ = ["USER_SESSION_PROJECTION", "read_user_events"]

USER_SESSION_PROJECTION: Final[Doc] = {METADATA: 0, FENCES: 0, INDEXED: 0}
"""What a user-wide read leaves out of each session document."""


def _chunk_filter(filter: EventFilter) -> tuple[EventFilter, int | None]:
    """The filter each chunk is read with, and how many of the merged events to keep."""
    if filter.last_n is not None:
        return filter, filter.last_n
    if filter.page_size is not None:
        end = ((filter.page or 0) + 1) * filter.page_size
        return filter.without_window().merge(EventFilter(page=0, page_size=end)), end
    return filter, None


def _key(event: SessionEvent) -> tuple[object, str]:
    return (event.timestamp, event.session_id)


def _merge(
    kept: list[SessionEvent], chunk: list[SessionEvent], filter: EventFilter, keep: int | None
) -> list[SessionEvent]:
    """Merge a chunk's events (in order) into those kept; trim to the window's reach.

    A session lies in one chunk, so equal keys come from one list and keep their log order.
    """
    merged = list(heapq.merge(kept, chunk, key=_key))
    if keep is None:
        return merged
    return merged[-keep:] if filter.last_n is not None else merged[:keep]


async def read_user_events(
    store: Store, reader: LogReader, user_id: str, filter: EventFilter
) -> list[SessionEvent]:
    """Matching events of every session of the user, by timestamp (ties: session id, then log
    order), with a plain window."""
    chunk_filter, keep = _chunk_filter(filter)
    kept: list[SessionEvent] = []
    batch: list[LogState] = []

    async def flush(states: Sequence[LogState]) -> None:
        nonlocal kept
        kept = _merge(kept, await reader.read_for_user(states, chunk_filter), filter, keep)

    with storage_errors(f"read sessions of user {user_id!r}"):
        cursor = store.sessions.find(
            {USER_ID: user_id}, USER_SESSION_PROJECTION, batch_size=IN_CHUNK
        )
        async for doc in cursor:
            batch.append(decode_state(doc))
            if len(batch) == IN_CHUNK:
                await flush(batch)
                batch = []
    if batch:
        await flush(batch)
    return filter.apply_window(kept)
