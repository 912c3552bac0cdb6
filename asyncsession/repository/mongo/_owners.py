"""Whose each session is, as this process last saw it: the key an append encrypts with.

An encrypted append needs the owner of its session (their data key encrypts it), and an append
reads nothing when the process knows the session already. Every read of a session document
notes its owner here (a save, a snapshot, a lookup), so the append that follows a turn's read
sends no command to learn it. At most ``capacity`` sessions are remembered (the least recently
used go first); a session this process has not seen is read once.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Final

__all__ = ["Owners"]

_CAPACITY: Final = 10_000


class Owners:
    """Session id -> the user id of its owner, the least recently used going first."""

    __slots__ = ("_capacity", "_entries")

    def __init__(self, capacity: int = _CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, str] = OrderedDict()

    def get(self, session_id: str) -> str | None:
        """The owner last seen of ``session_id``, or ``None``."""
        owner = self._entries.get(session_id)
        if owner is not None:
            self._entries.move_to_end(session_id)
        return owner

    def note(self, session_id: str, user_id: str) -> None:
        """Remember that ``user_id`` owns ``session_id``."""
        self._entries[session_id] = user_id
        self._entries.move_to_end(session_id)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop ``session_id`` (it was deleted)."""
        self._entries.pop(session_id, None)
