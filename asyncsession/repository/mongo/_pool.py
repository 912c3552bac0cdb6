"""Ids registered ahead: the MongoDB store's answer to `draw_event_id`.

An append of an id the caller chose first registers it (see `_ids`), which costs a round
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
from typing import Final

from ._cache import ENTRY_OVERHEAD, ByteLRU
from ._drawn import new_drawn_id

__all__ = ["POOL_MAX", "IdPool"]

POOL_MAX: Final = 16
"""The most ids one refill registers ahead for a session."""
_FIRST: Final = 2
_DRAWN_MAX: Final = 64
"""The most ids drawn from an empty pool (and not yet appended) a session's record keeps."""


class IdPool:
    """Per session: ids registered ahead and ready to hand out, and the ids whose append
    should register the next refill."""

    def __init__(self, max_bytes: int) -> None:
        self._ready: ByteLRU[str, tuple[str, ...]] = ByteLRU(max_bytes)
        # per session: the ids drawn from its empty pool and not yet appended, and the size
        # of the refill their append registers
        self._refill: ByteLRU[str, tuple[tuple[str, ...], int]] = ByteLRU(max_bytes)

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
        event_id = new_drawn_id()
        last = self._refill.pop(session_id)
        size = _FIRST if last is None else min(POOL_MAX, last[1] * 2)
        drawn = (*(() if last is None else last[0][-_DRAWN_MAX + 1 :]), event_id)
        self._put_refill(session_id, drawn, size)
        return event_id

    def _put_refill(self, session_id: str, drawn: tuple[str, ...], size: int) -> None:
        cost = sys.getsizeof(session_id) + sum(map(sys.getsizeof, drawn)) + 2 * ENTRY_OVERHEAD
        self._refill.put(session_id, (drawn, size), cost)

    def refill_for(self, session_id: str, event_ids: list[str]) -> list[str]:
        """The ids to register ahead with an append of ``event_ids`` (none unless one of them
        was drawn from an empty pool)."""
        pending = self._refill.get(session_id)
        if pending is None or not set(pending[0]).intersection(event_ids):
            return []
        return [new_drawn_id() for _ in range(pending[1])]

    def spare(self, session_id: str) -> bool:
        """Whether the next id drawn for ``session_id`` needs no refill: ids are ready, or the
        session's appends never drew (so they register ids of the caller's anyway)."""
        return session_id in self._ready or session_id not in self._refill

    def minted(self, session_id: str, event_ids: list[str], refill: list[str]) -> list[str]:
        """The ids among ``event_ids`` and ``refill`` that this pool made up and that nobody
        but this append can have used: the refill, and the id drawn from an empty pool."""
        if not refill:
            return []
        pending = self._refill.get(session_id)
        drawn = [] if pending is None else [i for i in pending[0] if i in event_ids]
        return [*refill, *drawn]

    def refilled(self, session_id: str, event_ids: list[str]) -> None:
        """Note that ``event_ids`` are registered for ``session_id`` and ready to hand out."""
        pending = self._refill.get(session_id)
        if pending is not None:  # done: keep only the size, which the next refill doubles
            self._put_refill(session_id, (), pending[1])
        held = self._ready.pop(session_id) or ()
        self._put_ready(session_id, (*held, *event_ids))

    def _put_ready(self, session_id: str, ids: tuple[str, ...]) -> None:
        size = sys.getsizeof(session_id) + sum(sys.getsizeof(i) for i in ids) + ENTRY_OVERHEAD
        self._ready.put(session_id, ids, size)
