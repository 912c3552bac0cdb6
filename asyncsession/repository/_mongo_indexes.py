"""The indexes of a MongoDB store, and what the server says about its limits."""

from __future__ import annotations

import logging
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import PyMongoError

from .._pymongo_errors import storage_errors
from ._mongo_store import TAIL_INDEX, Store

__all__ = ["create_indexes"]

_log = logging.getLogger("asyncsession.mongo")


async def create_indexes(store: Store, database: AsyncDatabase[Any]) -> None:
    """Create the store's indexes (idempotent) and read the server's document size limit.

    The unique, sparse index on ``sessions.tail._id`` lets ids the library minted be committed
    unregistered (see ``asyncsession._minted``). Where it cannot be created (a sharded
    ``sessions`` collection, whose unique indexes must start with the shard key), every id is
    registered instead: slower, never wrong.
    """
    with storage_errors("create indexes"):
        await store.sessions.create_index([("user_id", 1)])
        await store.sessions.create_index([("expires_at", 1)])
        await store.events.create_index([("session_id", 1), ("seq", 1)])
        await store.events.create_index([("session_id", 1), ("archived", 1), ("seq", 1)])
        await store.event_ids.create_index([("session_id", 1)])
    try:
        await store.sessions.create_index(
            [("tail._id", 1)], name=TAIL_INDEX, unique=True, sparse=True
        )
    except PyMongoError as exc:
        _log.info("no unique index on sessions.tail._id (%s): every event id is registered", exc)
        store.tail_index = False
    else:
        store.tail_index = None  # known once the server answers hello
    try:
        hello = await database.command("hello")
    except NotImplementedError:  # mongomock: no hello, and the index is not enforced on arrays
        store.tail_index = False
        return
    except PyMongoError:  # keep 16 MiB, and look the index up at the first write
        return
    if store.tail_index is None:
        store.tail_index = True
    size = hello.get("maxBsonObjectSize")
    if isinstance(size, int) and size > 0:
        store.max_document_size = size
