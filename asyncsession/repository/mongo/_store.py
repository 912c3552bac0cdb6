"""The collections of a MongoDB store and what every part of it shares."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final, TypeAlias, TypeVar

from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import BulkWriteError

from ..._pymongo_compat import aggregate
from ..._pymongo_errors import storage_errors
from .._metadata_index import indexed_keys
from ._cache import DEFAULT_CACHE_BYTES, EventCache
from ._codec import DEFAULT_MAX_DOCUMENT_SIZE, Doc
from ._drawn import loaded_id, loaded_ids, stored_ids
from ._layout import ARCHIVED, ID, SEQ, SESSION_ID, VERSION

_T = TypeVar("_T")

__all__ = [
    "IN_CHUNK",
    "Collection",
    "Store",
    "aggregate",
    "by_position",
    "chunked",
    "find_by_ids",
    "find_by_position",
    "find_by_event_ids",
    "insert_new",
    "session_version",
]

IN_CHUNK: Final = 256
"""The most values an ``$in`` list gets: some servers test membership in a list linearly, so
long lists are sent in chunks (3,000 ids in one ``$in``: seconds; in chunks: milliseconds)."""

_DUPLICATE_KEY: Final = 11000

Collection: TypeAlias = AsyncCollection[Doc]
"""A PyMongo collection of plain documents. A Motor or mongomock-motor collection works too at
run time: the store only calls the methods the three have in common (and awaits
``aggregate`` only when it returns an awaitable)."""


@dataclass(slots=True, kw_only=True)
class Store:
    """The three collections, with the journaled majority write concern already applied."""

    sessions: Collection
    """One document per session: identity, version, counters and the newest events."""
    events: Collection
    """One document per event that left the session document; filtered by ``session_id``.
    Its ``_id`` is the event id in the form `stored_id` gives (a drawn id as a binary UUID)."""
    event_ids: Collection
    """The registry of event ids: ``_id`` is the event id (in the form `stored_id` gives), so
    ids are unique across sessions even on a sharded cluster (shard it by ``_id``)."""
    cache: EventCache = field(default_factory=EventCache)
    cache_bytes: int = DEFAULT_CACHE_BYTES
    indexed_keys: frozenset[str] = field(default_factory=lambda: indexed_keys(()))
    """The metadata keys whose string values a session document lists in ``indexed``."""
    """The budget the event cache was made with (the hints get a share, see `hint_bytes`)."""
    max_document_size: int = DEFAULT_MAX_DOCUMENT_SIZE


async def session_version(store: Store, session_id: str) -> int | None:
    """The session's version, read alone; ``None`` if the session does not exist."""
    with storage_errors(f"read session {session_id!r}"):
        doc = await store.sessions.find_one({ID: session_id}, {VERSION: 1})
    return None if doc is None else int(doc[VERSION])


def chunked(values: Sequence[_T], size: int = IN_CHUNK) -> Iterator[list[_T]]:
    """``values`` in consecutive chunks of at most ``size``."""
    for start in range(0, len(values), size):
        yield list(values[start : start + size])


async def find_by_ids(
    collection: Collection, ids: Sequence[object], query: Doc, projection: Doc | None = None
) -> list[Doc]:
    """The documents with these ``_id`` values that also match ``query``, chunk by chunk."""
    found: list[Doc] = []
    for chunk in chunked(ids):
        found += await collection.find({ID: {"$in": chunk}, **query}, projection).to_list(None)
    return found


async def find_by_event_ids(
    collection: Collection, ids: Sequence[str], query: Doc, projection: Doc | None = None
) -> list[Doc]:
    """`find_by_ids` in the events collection or the registry, whose ``_id`` is an event id:
    each id matched in its stored form (`stored_id`), each document's ``_id`` read back as the
    id it stands for."""
    found = await find_by_ids(collection, stored_ids(ids), query, projection)
    loaded_ids(found)
    return found


def by_position(session_id: str, seq: Doc, archived: bool | None = None) -> list[Doc]:
    """Index-shaped filters for a session's events at positions in ``seq`` (a range): one
    filter when ``archived`` is given, else one per value of ``archived``.

    The events collection's position index is ``{session_id, archived, seq}`` (see
    ``_indexes``), and some planners use an index only when every field before the range
    is an equality: on the test server a filter that leaves ``archived`` out, or gives it as
    ``$in``, ``$or`` or a range, scans the whole collection.
    """
    values = (False, True) if archived is None else (archived,)
    return [{SESSION_ID: session_id, ARCHIVED: value, SEQ: seq} for value in values]


async def find_by_position(
    collection: Collection,
    session_id: str,
    seq: Doc,
    projection: Doc | None = None,
    archived: bool | None = None,
) -> list[Doc]:
    """A session's events at positions in ``seq`` (only those whose ``archived`` is
    ``archived``, unless it is ``None``), in no particular order, each ``_id`` read back as the
    id it stands for: the queries of `by_position`, sent together."""
    queries = by_position(session_id, seq, archived)
    batches = await asyncio.gather(*(collection.find(q, projection).to_list(None) for q in queries))
    found = [doc for batch in batches for doc in batch]
    loaded_ids(found)
    return found


async def insert_new(collection: Collection, docs: Sequence[Doc]) -> list[str]:
    """Insert every document whose ``_id`` is free, in one ``insert_many``; returns the ids that
    were taken (read back from their stored form, see `loaded_id`). Any other write error is
    raised."""
    try:
        await collection.insert_many(list(docs), ordered=False)
    except BulkWriteError as exc:
        errors: list[Doc] = exc.details.get("writeErrors", [])
        if not errors or any(error.get("code") != _DUPLICATE_KEY for error in errors):
            raise
        return [loaded_id(docs[int(error["index"])][ID]) for error in errors]
    return []
