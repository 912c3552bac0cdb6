"""Ids registered ahead: the MongoDB store's answer to `draw_event_id`.

An append of an id the caller chose first registers it (see `_mongo_ids`), which costs a round
trip. For the ids it hands out itself, the store does that ahead: when a session's pool is
empty, the id it hands out is a fresh UUID, and the append that uses it registers the next few
ids in the same ``insert_many`` as its own (the ``reserve_ids`` of `Committer.append`). Those
ids are then in the process's `Reservations`, so their appends are a single commit each.

The pool grows from 2 ids (a turn: question and reply) to `POOL_MAX` as a session keeps
appending in this process, so a short session leaves at most a few registrations unused; they
are the session's, and deleting it removes them. Nothing here is needed for correctness: an
id whose reservation the process forgot is registered again by its append, which then adopts
the registration (see `IdRegistry.reserve`).
"""

from __future__ import annotations

import sys
import uuid
from typing import Final

from ._mongo_cache import ENTRY_OVERHEAD, ByteLRU

__all__ = ["POOL_MAX", "IdPool"]

POOL_MAX: Final = 16
"""The most ids one refill registers ahead for a session."""
_FIRST: Final = 2


class IdPool:
    """Per session: ids registered ahead and ready to hand out, and the ids whose append
    should register the next refill."""

    def __init__(self, max_bytes: int) -> None:
        self._ready: ByteLRU[str, tuple[str, ...]] = ByteLRU(max_bytes)
        self._refill: ByteLRU[str, tuple[str, int]] = ByteLRU(max_bytes)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._ready.bytes + self._refill.bytes

    def draw(self, session_id: str) -> str:
        """A ready id, or a fresh one whose append refills the pool."""
        ready = self._ready.pop(session_id) or ()
        if ready:
            first, *rest = ready
            if rest:
                self._put_ready(session_id, tuple(rest))
            return first
        event_id = str(uuid.uuid4())
        last = self._refill.pop(session_id)
        size = _FIRST if last is None else min(POOL_MAX, last[1] * 2)
        self._refill.put(
            session_id, (event_id, size), sys.getsizeof(session_id) + 2 * ENTRY_OVERHEAD
        )
        return event_id

    def refill_for(self, session_id: str, event_ids: list[str]) -> list[str]:
        """The ids to register ahead with an append of ``event_ids`` (none unless one of them
        was drawn from an empty pool)."""
        pending = self._refill.get(session_id)
        if pending is None or pending[0] not in event_ids:
            return []
        return [str(uuid.uuid4()) for _ in range(pending[1])]

    def refilled(self, session_id: str, event_ids: list[str]) -> None:
        """Note that ``event_ids`` are registered for ``session_id`` and ready to hand out."""
        pending = self._refill.get(session_id)
        if pending is not None:  # done: keep only the size, which the next refill doubles
            self._refill.put(
                session_id, ("", pending[1]), sys.getsizeof(session_id) + 2 * ENTRY_OVERHEAD
            )
        held = self._ready.pop(session_id) or ()
        self._put_ready(session_id, (*held, *event_ids))

    def _put_ready(self, session_id: str, ids: tuple[str, ...]) -> None:
        size = sys.getsizeof(session_id) + sum(sys.getsizeof(i) for i in ids) + ENTRY_OVERHEAD
        self._ready.put(session_id, ids, size)
