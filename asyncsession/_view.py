"""A session's log held as a list, and what its boundaries say of it.

Spring AI 2.1 derives ``archived`` and the active view from the log: a compaction appends its
summaries and one ``COMPACTION`` event, a *boundary*, whose record names the active view from
then on. A rewind appends a ``REWIND`` boundary instead, whose record names a point of the log:
the view from then on is the one the log had at that point. `ReadLog` is that derivation, in
one place for every store: the in-memory store holds its whole log this way, and the MongoDB
store the commits it read (and reads more when the derivation says `Incomplete`).

**The derivation.** Let B be the newest boundary. Walking the active view from its end back:
every event after B but boundaries; then, if B is a compaction, the events its record names, in
view order, and nothing older; if B is a rewind to a point p, the active view the log had at p,
walked the same way from p back (so a rewind to a point after an older boundary composes with
it). A message at or before B that this walk never reaches reads ``archived=True``; every other
event reads ``archived=False``. With no boundary, every event is in the view.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from .events import EventType, SessionEvent
from .exceptions import UsageError
from .rewinds import RewindRecord

__all__ = ["BOUNDARY_TYPES", "Incomplete", "ReadLog", "is_boundary", "view_of"]

BOUNDARY_TYPES = (EventType.COMPACTION, EventType.REWIND)
"""The event types that define the active view from where they stand."""


def is_boundary(event: SessionEvent) -> bool:
    """Whether ``event`` is a compaction's or a rewind's boundary."""
    return event.type in BOUNDARY_TYPES


def view_of(boundary: SessionEvent) -> tuple[str, ...]:
    """The ids of the active view a ``COMPACTION`` event names (its record's ``view``; stores
    refuse a boundary without one)."""
    payload = boundary.payload or {}
    view: object = payload.get("view")
    if not isinstance(view, list):
        return ()
    return tuple(i for i in cast(list[object], view) if isinstance(i, str))


class Incomplete(Exception):
    """The derivation needs more of the log than the events held: the commits down to
    ``version`` (``None``: the next older ones), or the events ``ids`` (a compaction's view,
    older than what was read). A store that holds the newest part of a log reads them and
    derives again."""

    def __init__(self, version: int | None = None, ids: tuple[str, ...] = ()) -> None:
        super().__init__(version, ids)
        self.version = version
        self.ids = ids


@dataclass(frozen=True, slots=True)
class _Chain:
    """What the boundaries say of the events up to the newest one."""

    boundary: int
    """The index of the newest boundary; -1 when none."""
    ranges: tuple[tuple[int, int], ...]
    """The index ranges ``(low, high]`` below it that are in the view, newest first (what
    rewinds restored)."""
    named: frozenset[str]
    """The ids a compaction at the end of the walk names."""


@dataclass(frozen=True, slots=True)
class ReadLog:
    """A session's log (or its newest part) held as a list: the derivation of ``archived`` and
    of the active view, in one place (see the module docs)."""

    events: Sequence[SessionEvent]
    """The events held: from ``start`` on, a contiguous run of the log in log order; before
    ``start``, events of a compaction's view fetched on their own (read only by the view)."""
    positions: Mapping[str, int]
    """Each held event id's index in ``events``."""
    boundaries: Sequence[int]
    """The indices of the boundary events of the run, ascending."""
    last_of: Callable[[int], int | None] | None = None
    """Commit number -> the index of its last held event (``None`` if not held); lets a rewind
    to the end of a commit find its place. A log held as a plain list has no commits."""
    start: int = 0
    """The index of the first event of the contiguous run."""
    complete: bool = True
    """Whether the run begins at the log's first event."""
    _chain: list[_Chain] = field(default_factory=list[_Chain], init=False, compare=False)

    @classmethod
    def of(cls, events: Sequence[SessionEvent]) -> ReadLog:
        """The whole log ``events``, in order (rewinds in it name their points by event)."""
        boundaries = [i for i, e in enumerate(events) if is_boundary(e)]
        return cls(events, {e.id: i for i, e in enumerate(events)}, boundaries)

    # --- what the boundaries say ----------------------------------------------------------------

    def _target(self, rewind: int) -> int | None:
        """The index of the last event before the point the rewind at ``rewind`` names (-1: the
        start of the log); ``None`` when the run does not hold it."""
        record = RewindRecord.from_event(self.events[rewind])
        to = record.to
        if to.version == 0:
            return -1
        if to.event_id is not None:
            index = self.positions.get(to.event_id)
        elif self.last_of is not None:
            index = self.last_of(to.version)
        else:
            raise UsageError(
                f"rewind {self.events[rewind].id!r} names the end of commit {to.version}: a log "
                "held as a plain list has no commits (name the point by its event)"
            )
        if index is None or not self.start <= index < rewind:
            return None
        return index

    def _before(self, index: int) -> int:
        """The index of the newest boundary at or before ``index`` (``start - 1``: none)."""
        k = bisect_right(self.boundaries, index) - 1
        return self.boundaries[k] if k >= 0 else self.start - 1

    def chain(self) -> _Chain:
        """What the boundaries say of the events held up to the newest one (computed once)."""
        if self._chain:
            return self._chain[0]
        boundary = self.boundaries[-1] if self.boundaries else -1
        ranges: list[tuple[int, int]] = []
        named: frozenset[str] = frozenset()
        at = boundary
        while at >= self.start:
            event = self.events[at]
            if event.type == EventType.COMPACTION:
                named = frozenset(view_of(event))
                break
            target = self._target(at)
            if target is None or target < self.start:
                break  # restored from before what is held: nothing held up to here is
            at = self._before(target)
            ranges.append((at, target))
        found = _Chain(boundary, tuple(ranges), named)
        self._chain.append(found)
        return found

    def derived(self, index: int) -> SessionEvent:
        """The event at ``index`` with ``archived`` as the boundaries say."""
        event = self.events[index]
        archived = False
        if event.is_message:
            chain = self.chain()
            archived = (
                index <= chain.boundary
                and event.id not in chain.named
                and not any(low < index <= high for low, high in chain.ranges)
            )
        if event.archived == archived:
            return event
        return event.model_copy(update={"archived": archived})

    def _in_view(self, index: int) -> SessionEvent:
        event = self.events[index]
        return event if not event.archived else event.model_copy(update={"archived": False})

    # --- the reads --------------------------------------------------------------------------------

    def newest_first(self, *, active_view: bool) -> Iterator[SessionEvent]:
        """The log from its newest event back (``archived`` derived), or the active view from
        its end back.

        Raises:
            Incomplete: the walk reaches before the events held (only once every event held
                was yielded).
        """
        if not active_view:
            for index in range(len(self.events) - 1, self.start - 1, -1):
                yield self.derived(index)
            if not self.complete:
                raise Incomplete()
            return
        high = len(self.events) - 1
        while True:
            boundary = self._before(high)
            for index in range(high, boundary, -1):
                yield self._in_view(index)
            if boundary < self.start:
                if not self.complete:
                    raise Incomplete()
                return
            event = self.events[boundary]
            if event.type == EventType.COMPACTION:
                yield from self._named(view_of(event), boundary)
                return
            target = self._target(boundary)
            if target is None:
                if not self.complete:
                    raise Incomplete(RewindRecord.from_event(event).to.version)
                return
            if target < self.start:
                return  # rewound to the start of the log
            high = target

    def _named(self, view: Sequence[str], boundary: int) -> Iterator[SessionEvent]:
        """The events of a compaction's view, from its end back."""
        if not self.complete:
            missing = tuple(i for i in view if i not in self.positions)
            if missing:
                raise Incomplete(ids=missing)
        for event_id in reversed(view):
            index = self.positions.get(event_id)
            if index is not None and index < boundary:
                yield self._in_view(index)
