"""Command tallies: what :class:`benchmarks._commands.CommandCounter` saw, added up per row.

The counter itself (a ``pymongo.monitoring.CommandListener`` registered on the client each
system uses) lives in ``_commands.py`` and is shared with the other benchmark scripts. It leaves
out connection housekeeping (handshakes, heartbeats, ``endSessions``); *commands* also leave
out the cursor continuations that *round trips* count.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field

from ._commands import CURSOR, HOUSEKEEPING, CommandCounter, Measured

__all__ = [
    "CURSOR",
    "HOUSEKEEPING",
    "CommandCounter",
    "CommandTally",
    "excluded",
    "measure",
    "tally",
]


@dataclass(frozen=True, slots=True)
class CommandTally:
    """Commands by name over one or more measured blocks."""

    by_name: dict[str, int] = field(default_factory=dict)
    """Started commands by name, housekeeping left out, cursor continuations included."""
    bytes_sent: int = 0
    """BSON bytes of the commands (0 unless the counter counted bytes)."""
    bytes_received: int = 0
    """BSON bytes of the replies (0 unless the counter counted bytes)."""

    @property
    def round_trips(self) -> int:
        """Every counted request, cursor continuations included."""
        return sum(self.by_name.values())

    @property
    def commands(self) -> int:
        """Counted requests without ``getMore`` / ``killCursors``."""
        return sum(n for name, n in self.by_name.items() if name not in CURSOR)

    def __add__(self, other: CommandTally) -> CommandTally:
        names = set(self.by_name) | set(other.by_name)
        total = {name: self.by_name.get(name, 0) + other.by_name.get(name, 0) for name in names}
        return CommandTally(
            dict(sorted(total.items())),
            self.bytes_sent + other.bytes_sent,
            self.bytes_received + other.bytes_received,
        )


@contextlib.contextmanager
def measure(counter: CommandCounter | None) -> Iterator[Measured | None]:
    """``counter.measure()``, or nothing to measure without a database."""
    if counter is None:
        yield None
        return
    with counter.measure() as seen:
        yield seen


def tally(seen: Measured | None) -> CommandTally | None:
    """The tally of one measured block."""
    if seen is None:
        return None
    return CommandTally(dict(sorted(seen.by_name.items())), seen.bytes_sent, seen.bytes_received)


def excluded() -> list[str]:
    """The housekeeping commands that are never counted, for the report."""
    return sorted(HOUSEKEEPING)
