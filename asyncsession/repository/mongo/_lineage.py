"""Whose commits a session's log is made of, and what this process remembers of it.

A session's log is its own commits, numbered after its ``base``, and, for a fork, the commits
of the sessions its prefix reads: *segments*, oldest first, each a session's commits from the
one after the previous segment's last up to its own ``last`` (of that last commit, only the
events up to ``through`` when it is set). Commit numbers continue from one segment to the next,
so a range of the log's numbers is a range in each segment: a read of a fork is one query with
one branch per segment it reaches.

A lineage never changes once the session is created (a session deleted and created again has
another incarnation), so this process keeps the lineages it read in a small bounded map, and a
fork's reads need no more commands than a plain session's.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_CAPACITY", "Lineage", "Lineages", "Segment"]

DEFAULT_CAPACITY: Final = 10_000
"""How many sessions' lineages the map remembers."""


@dataclass(frozen=True, slots=True)
class Segment:
    """Commits ``first`` to ``last`` of ``session`` (of incarnation ``incarnation``), the last
    one up to its event ``through`` when set."""

    session: str
    incarnation: int
    first: int
    last: int
    through: str | None


@dataclass(frozen=True, slots=True)
class Lineage:
    """A session's log: its segments, then its own commits (numbered after ``base``)."""

    session: str
    incarnation: int
    base: int = 0
    segments: tuple[Segment, ...] = ()

    def clipped(self, commit: int, through: str | None) -> tuple[Segment, ...]:
        """The segments of a fork of this log at the point (``commit``, ``through``): those
        of its prefix up to the point, and the part of its own commits before it."""
        kept: list[Segment] = []
        for segment in self.segments:
            if segment.first > commit:
                break
            if segment.last < commit:
                kept.append(segment)
            elif segment.last == commit and through is None:
                kept.append(segment)  # the whole segment, with its own cut
            else:
                last = commit
                kept.append(
                    Segment(segment.session, segment.incarnation, segment.first, last, through)
                )
        if commit > self.base:
            kept.append(Segment(self.session, self.incarnation, self.base + 1, commit, through))
        return tuple(kept)

    def segment_of(self, session: str, incarnation: object, commit: int) -> Segment | None:
        """The segment that reads commit ``commit`` of ``session`` (``None``: none does)."""
        for segment in self.segments:
            if (
                segment.session == session
                and segment.incarnation == incarnation
                and segment.first <= commit <= segment.last
            ):
                return segment
        return None


class Lineages:
    """Session id -> `Lineage`, the least recently used going first."""

    __slots__ = ("_capacity", "_entries")

    def __init__(self, capacity: int = DEFAULT_CAPACITY) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[str, Lineage] = OrderedDict()

    def get(self, session_id: str) -> Lineage | None:
        """What was last read of ``session_id``'s lineage, or ``None``."""
        entry = self._entries.get(session_id)
        if entry is not None:
            self._entries.move_to_end(session_id)
        return entry

    def note(self, lineage: Lineage) -> None:
        """Remember ``lineage``."""
        self._entries[lineage.session] = lineage
        self._entries.move_to_end(lineage.session)
        while len(self._entries) > self._capacity:
            self._entries.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what is known of ``session_id`` (it was deleted)."""
        self._entries.pop(session_id, None)
