"""Count the database commands and round trips a piece of code sends, with command monitoring.

Register a :class:`CommandCounter` on a client (``event_listeners=[counter]``), then measure::

    with counter.measure() as seen:
        await repository.append_event(event)
    print(seen.commands, seen.round_trips, seen.by_name)

*Commands* are every command but connection housekeeping (handshakes, heartbeats, session
cleanup) and cursor continuations; *round trips* add the cursor continuations (``getMore``,
``killCursors``), i.e. every request that waited for the server. With ``count_bytes`` on, the
counter also adds up the BSON size of every command sent and every reply received (the payload
of the wire messages, without their 16-to-21-byte headers); encoding them costs client CPU, so
scenarios that time CPU leave it off.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import bson
from pymongo import monitoring

__all__ = ["CommandCounter", "Measured"]

HOUSEKEEPING = frozenset(
    {"hello", "isMaster", "ismaster", "ping", "endSessions", "saslStart", "saslContinue"}
)
CURSOR = frozenset({"getMore", "killCursors"})


@dataclass(slots=True)
class Measured:
    """What one measured block sent."""

    by_name: Counter[str] = field(default_factory=Counter)
    """Commands by name (cursor continuations included, housekeeping left out)."""
    bytes_sent: int = 0
    """BSON bytes of the commands sent (when the counter counts bytes)."""
    bytes_received: int = 0
    """BSON bytes of the replies received (when the counter counts bytes)."""

    @property
    def commands(self) -> int:
        """Commands, without cursor continuations."""
        return sum(n for name, n in self.by_name.items() if name not in CURSOR)

    @property
    def round_trips(self) -> int:
        """Every request that waited for a reply."""
        return sum(self.by_name.values())


class CommandCounter(monitoring.CommandListener):
    """A command listener that feeds whatever :meth:`measure` blocks are open."""

    def __init__(self, *, count_bytes: bool = False) -> None:
        self._lock = threading.Lock()
        self._open: list[Measured] = []
        self.count_bytes = count_bytes
        """Whether to add up the BSON size of commands and replies (costs client CPU)."""

    @contextmanager
    def measure(self) -> Iterator[Measured]:
        """Count the commands started while the block runs."""
        seen = Measured()
        with self._lock:
            self._open.append(seen)
        try:
            yield seen
        finally:
            with self._lock:
                self._open.remove(seen)

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in HOUSEKEEPING:
            return
        size = len(bson.encode(event.command)) if self.count_bytes and self._open else 0
        with self._lock:
            for seen in self._open:
                seen.by_name[event.command_name] += 1
                seen.bytes_sent += size

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if not self.count_bytes or event.command_name in HOUSEKEEPING or not self._open:
            return
        size = len(bson.encode(event.reply))
        with self._lock:
            for seen in self._open:
                seen.bytes_received += size

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass
