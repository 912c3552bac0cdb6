"""What one process remembers between writes about tails: their lengths, a half-done roll-forward.

They are hints kept in LRU maps bounded in bytes (see ``_cache``). A wrong or forgotten
hint costs a command, never a wrong commit: every commit is still guarded on the server.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any, Final

from ._cache import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, ByteLRU, hint_bytes

__all__ = ["K_MAX", "K_MIN", "TailHints", "Trim"]

K_MIN: Final = 32
"""A roll-forward leaves at least this many of the newest events in the session document."""
K_MAX: Final = 96
"""The append that takes the tail to this many entries rolls the oldest ones forward."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Trim:
    """A roll-forward half done: its events are in the events collection, and the next commit
    of this process cuts them from the tail (so the roll-forward costs one command, the copy).

    Only valid while the session document is exactly as the roll-forward left it; the commit
    that carries it is guarded by all of that, and commits without it when the guard fails.
    """

    guard: dict[str, Any]
    """What the session document held: ``rolled``, ``cv``, ``inc`` and ``tn``."""
    ids: tuple[str, ...]
    """The ids of the oldest tail entries that are copied, oldest first."""
    changes: dict[str, Any]
    """The counter changes of cutting them (see ``_rollforward.moved``)."""


class TailHints:
    """What this process last saw of each session document: its tail's length, and whether a
    compaction's changes are pending.

    Only a hint, for choosing the commit command: an append that leaves the tail short of
    `K_MAX` with nothing pending needs no post-image, so it commits with ``update_one``
    guarded by exactly that, which costs the server less than ``find_one_and_update``. A stale
    hint makes that guard fail and the append fall back; it never makes a commit wrong.
    """

    def __init__(self, max_bytes: int = hint_bytes(DEFAULT_CACHE_BYTES)) -> None:
        # One budget for all three: half for tail lengths, most of the rest for the cuts left
        # to a next commit (each holds the ids it cuts), a little for the roll-forwards owed.
        self._seen: ByteLRU[str, tuple[int, bool]] = ByteLRU(max_bytes // 2)
        self._trims: ByteLRU[str, Trim] = ByteLRU(max_bytes * 3 // 8)
        self._owed: ByteLRU[str, bool] = ByteLRU(max_bytes - max_bytes // 2 - max_bytes * 3 // 8)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._seen.bytes + self._trims.bytes + self._owed.bytes

    def defer_trim(self, session_id: str, trim: Trim) -> None:
        """Leave the cut of a roll-forward's copied events to this process's next commit."""
        size = sys.getsizeof(session_id) + sum(map(sys.getsizeof, trim.ids)) + ENTRY_OVERHEAD
        self._trims.put(session_id, trim, size)

    def owe_roll(self, session_id: str) -> None:
        """Leave a roll-forward due now to this process's next commit (this one paid a
        command more already)."""
        self._owed.put(session_id, True, sys.getsizeof(session_id) + ENTRY_OVERHEAD)

    def take_owed(self, session_id: str) -> bool:
        """Whether a roll-forward was left to this commit (forgetting it)."""
        return self._owed.pop(session_id) is not None

    def take_trim(self, session_id: str) -> Trim | None:
        """The cut the next commit should carry (forgetting it), or ``None``."""
        return self._trims.pop(session_id)

    def note(self, session_id: str, tail: int, pending: bool) -> None:
        """Record a session document as read or written."""
        self._seen.put(session_id, (tail, pending), sys.getsizeof(session_id) + ENTRY_OVERHEAD)

    def forget(self, session_id: str) -> None:
        """Drop what was seen (the tail was rolled forward or rewritten), a cut left to do
        included."""
        self._seen.pop(session_id)
        self._trims.pop(session_id)

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
