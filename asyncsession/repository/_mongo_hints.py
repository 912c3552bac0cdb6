"""What one process remembers between writes: ids it registered ahead, and tail lengths.

Both are hints kept in LRU maps bounded in bytes (see ``_mongo_cache``). A wrong or forgotten
hint costs a command, never a wrong commit: every commit is still guarded on the server.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Final

from ._mongo_cache import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, ByteLRU, hint_bytes

__all__ = ["K_MAX", "K_MIN", "Reservations", "TailHints"]

K_MIN: Final = 32
"""A roll-forward leaves at least this many of the newest events in the session document."""
K_MAX: Final = 96
"""The append that takes the tail to this many entries rolls the oldest ones forward."""


class Reservations:
    """Event ids this process registered ahead of their append (``start_turn``'s reply ids)."""

    def __init__(self, max_bytes: int = hint_bytes(DEFAULT_CACHE_BYTES)) -> None:
        self._tokens: ByteLRU[tuple[str, str], str] = ByteLRU(max_bytes)

    def add(self, session_id: str, event_ids: Sequence[str], token: str) -> None:
        """Remember that ``event_ids`` are registered for ``session_id`` under ``token``."""
        for event_id in event_ids:
            size = sys.getsizeof(session_id) + sys.getsizeof(event_id) + ENTRY_OVERHEAD
            self._tokens.put((session_id, event_id), token, size)

    def holds(self, session_id: str, event_ids: Sequence[str]) -> bool:
        """Whether any of ``event_ids`` is registered ahead for ``session_id``."""
        return any((session_id, event_id) in self._tokens for event_id in event_ids)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._tokens.bytes

    def take(self, session_id: str, event_ids: Sequence[str]) -> str | None:
        """The token all of ``event_ids`` are registered under (forgetting them), or ``None``."""
        tokens = {self._tokens.get((session_id, event_id)) for event_id in event_ids}
        if len(tokens) != 1 or None in tokens:
            return None
        for event_id in event_ids:
            self._tokens.pop((session_id, event_id))
        return tokens.pop()


class TailHints:
    """What this process last saw of each session document: its tail's length, and whether a
    compaction's changes are pending.

    Only a hint, for choosing the commit command: an append that leaves the tail short of
    `K_MAX` with nothing pending needs no post-image, so it commits with ``update_one``
    guarded by exactly that, which costs the server less than ``find_one_and_update``. A stale
    hint makes that guard fail and the append fall back; it never makes a commit wrong.
    """

    def __init__(self, max_bytes: int = hint_bytes(DEFAULT_CACHE_BYTES)) -> None:
        self._seen: ByteLRU[str, tuple[int, bool]] = ByteLRU(max_bytes)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._seen.bytes

    def note(self, session_id: str, tail: int, pending: bool) -> None:
        """Record a session document as read or written."""
        self._seen.put(session_id, (tail, pending), sys.getsizeof(session_id) + ENTRY_OVERHEAD)

    def forget(self, session_id: str) -> None:
        """Drop what was seen (the tail was rolled forward or rewritten)."""
        self._seen.pop(session_id)

    def room(self, session_id: str, added: int) -> bool:
        """Whether ``added`` more entries are expected to leave the tail short of `K_MAX`
        with nothing pending."""
        seen = self._seen.get(session_id)
        return seen is not None and not seen[1] and seen[0] + added < K_MAX

    def crosses(self, session_id: str, added: int) -> bool:
        """Whether ``added`` more entries are expected to take the tail to `K_MAX` (so the
        commit will roll forward, and a whole post-image saves reading the tail again)."""
        seen = self._seen.get(session_id)
        return seen is not None and seen[0] + added >= K_MAX

    def grew(self, session_id: str, added: int) -> None:
        """Record that this process appended ``added`` entries (guarded by `room`)."""
        seen = self._seen.get(session_id)
        if seen is not None:
            self.note(session_id, seen[0] + added, seen[1])
