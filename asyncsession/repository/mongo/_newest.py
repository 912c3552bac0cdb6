"""What this process knows of each session's newest commit: a small bounded map.

**What it saves.** A window read needs the newest commits of a session. When the process knows
roughly which number the newest has, the read is a range on the ``(session, commit)`` index
(``commit > known - k``, no upper bound, so commits written meanwhile by anyone are read too);
otherwise it is a find sorted by ``commit`` descending. MongoDB serves both from the index; the
test server (and any server that sorts in memory) sorts the whole session for the second.
Measured on the test server with ``python -m benchmarks.store_window`` (a window of 20 in a
session of 10,000 400-byte messages, two a commit): 254 ms sorted against 3 ms as a range
(1.6 ms and 2.8 ms at 100 messages), so a range read keeps a long session's turn as fast as a
short one's. The map also holds each session's incarnation, so
that an append following a read of this process needs no read of its own, and how many events
its recent commits held, so that a window's first range is about as many commits as it needs.

**What it costs.** One entry per session this process touched recently, about 200 bytes; at
most ``capacity`` of them (the least recently used go first). An entry is a hint, never a
truth: a read checks it against what the server returns, and a stale one costs one more read.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final, NamedTuple

__all__ = ["DEFAULT_CAPACITY", "Known", "Newest"]

DEFAULT_CAPACITY: Final = 10_000
"""How many sessions the map remembers."""


class Known(NamedTuple):
    """What the process last saw of a session."""

    incarnation: int
    """The session document's incarnation."""
    commit: int
    """The newest commit number seen (0: none)."""
    density: float
    """Events per commit in the commits last read (1.0 when unknown)."""


class Newest:
    """Session id -> `Known`, the least recently used going first."""

    __slots__ = ("_capacity", "_entries")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, Known] = OrderedDict()

    def get(self, session_id: str) -> Known | None:
        """What was last seen of ``session_id``, or ``None``."""
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
        return entry

    def note(
        self, session_id: str, incarnation: int, commit: int, density: float | None = None
    ) -> None:
        """Remember that ``session_id`` (as ``incarnation``) has at least ``commit`` commits,
        and, when given, how many events its recent commits held."""
        entry = self._entries.get(session_id)
        if entry is not None and entry.incarnation == incarnation:
            commit = max(commit, entry.commit)
            density = entry.density if density is None else density
        self._entries[session_id] = Known(incarnation, commit, density or 1.0)
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is known of ``session_id`` (it was deleted)."""
        self._entries.pop(session_id, None)
