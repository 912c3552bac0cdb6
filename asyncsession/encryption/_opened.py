"""`Opened`: values this process encrypted or decrypted lately, so it need not decrypt them again.

An encrypted value never changes (a commit is never rewritten), and the same ciphertext always
holds the same value, so a value once opened can be handed out again by its ciphertext. Each is
kept as BSON (decoded afresh for every reader, who may change what it gets) for at most the
data key cache's lifetime, and at most ``capacity`` bytes of them in all, the least recently
used going first. `UserKeys` drops them all when a data key is deleted in this process.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from typing import Any, Final

import bson

from ._bson import decode
from ._engines import CODEC_OPTIONS

__all__ = ["MISSING", "Opened"]

MISSING: Final = object()
"""What `Opened.get` returns for a value it does not hold."""


class Opened:
    """Ciphertext -> its value as BSON, for a bounded time and a bounded number of bytes."""

    __slots__ = ("_bytes", "_capacity", "_entries", "_ttl")

    def __init__(self, capacity: int, ttl_seconds: float) -> None:
        self._capacity = capacity
        self._ttl = ttl_seconds
        self._entries: OrderedDict[bytes, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0

    def get(self, ciphertext: bytes) -> Any:
        """The value of ``ciphertext``, or `MISSING`."""
        entry = self._entries.get(ciphertext)
        if entry is None:
            return MISSING
        expires, plain = entry
        if expires <= time.monotonic():
            self._drop(ciphertext)
            return MISSING
        self._entries.move_to_end(ciphertext)
        return decode(plain, CODEC_OPTIONS)["v"]

    def put(self, ciphertext: bytes, value: Any) -> None:
        """Keep ``value``, the plaintext of ``ciphertext`` (when it fits)."""
        if self._capacity <= 0:
            return
        plain = bson.encode({"v": value}, codec_options=CODEC_OPTIONS)
        if len(plain) > self._capacity // 4:
            return  # a large body would push out a whole window of small ones
        self._drop(ciphertext)
        self._entries[ciphertext] = (time.monotonic() + self._ttl, plain)
        self._bytes += len(plain)
        while self._bytes > self._capacity:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    def clear(self) -> None:
        """Forget every value."""
        self._entries.clear()
        self._bytes = 0

    def _drop(self, ciphertext: bytes) -> None:
        entry = self._entries.pop(ciphertext, None)
        if entry is not None:
            self._bytes -= len(entry[1])
