"""What differs between PyMongo's async API and Motor, for the code that accepts either.

PyMongo's ``AsyncCollection.aggregate`` is a coroutine that returns a cursor; Motor's (and
mongomock-motor's) returns the cursor directly. Every MongoDB backend of the package (the
session store, the memory store, the compaction queue) runs its aggregations through
`aggregate`.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from pymongo.asynchronous.collection import AsyncCollection

__all__ = ["aggregate"]


async def aggregate(
    collection: AsyncCollection[Any], pipeline: Sequence[Mapping[str, Any]]
) -> list[Any]:
    """Run an aggregation and return every result document."""
    result = collection.aggregate(list(pipeline))
    cursor = await result if inspect.isawaitable(result) else result
    found: list[Any] = await cursor.to_list(None)
    return found
