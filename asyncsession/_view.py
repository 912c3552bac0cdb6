"""A session's log held as a list, and what its newest boundary says of it.

Spring AI 2.1 derives ``archived`` and the active view from the log: a compaction appends its
summaries and one ``COMPACTION`` event, the *boundary*, whose record names the active view from
then on. `ReadLog` is that derivation, in one place for every store: the in-memory store holds
its whole log this way, and the MongoDB store the commits it read.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from .events import EventType, SessionEvent

__all__ = ["ReadLog", "newest_boundary", "view_of"]


def view_of(boundary: SessionEvent) -> tuple[str, ...]:
    """The ids of the active view a ``COMPACTION`` event names (its record's ``view``; stores
    refuse a boundary without one)."""
    payload = boundary.payload or {}
    view: object = payload.get("view")
    if not isinstance(view, list):
        return ()
    return tuple(i for i in cast(list[object], view) if isinstance(i, str))


def newest_boundary(log: Sequence[SessionEvent]) -> tuple[int, tuple[str, ...]]:
    """The index of the newest ``COMPACTION`` event of a log held as a list (-1: none) and the
    ids of the active view it names."""
    for index in range(len(log) - 1, -1, -1):
        if log[index].type == EventType.COMPACTION:
            return index, view_of(log[index])
    return -1, ()


@dataclass(frozen=True, slots=True)
class ReadLog:
    """A session's log held as a list, with what its newest boundary says: the derivation of
    ``archived`` and of the active view (Spring AI 2.1), in one place.

    Let B be the newest ``COMPACTION`` event, at ``boundary``. The active view is the events
    B's record names (``view``), in that order, then every event after B but boundaries. A
    message at or before B that the view does not name reads ``archived=True``; every other
    event reads ``archived=False``. With no boundary, every event is in the view.
    """

    events: Sequence[SessionEvent]
    """The whole log, in order."""
    boundary: int
    """The index of the newest boundary (the last event of its commit); -1 when none."""
    view: Sequence[str]
    """The ids of the active view the newest boundary names, in view order."""
    positions: Mapping[str, int]
    """Each event id's index in ``events``."""
    named: frozenset[str] = field(init=False)
    """``view`` as a set."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "named", frozenset(self.view))

    @classmethod
    def of(cls, events: Sequence[SessionEvent]) -> ReadLog:
        """The whole log (or its newest part) ``events``, in order."""
        boundary, view = newest_boundary(events)
        return cls(events, boundary, view, {e.id: i for i, e in enumerate(events)})

    def derived(self, index: int) -> SessionEvent:
        """The event at ``index`` with ``archived`` as the newest boundary says."""
        event = self.events[index]
        archived = event.is_message and index <= self.boundary and event.id not in self.named
        if event.archived == archived:
            return event
        return event.model_copy(update={"archived": archived})

    def newest_first(self, *, active_view: bool) -> Iterator[SessionEvent]:
        """The log from its newest event back (``archived`` derived), or the active view from
        its end back."""
        if not active_view:
            for index in range(len(self.events) - 1, -1, -1):
                yield self.derived(index)
            return
        for index in range(len(self.events) - 1, self.boundary, -1):
            event = self.events[index]
            if event.type != EventType.COMPACTION:
                yield event if not event.archived else self.derived(index)
        for event_id in reversed(self.view):
            index = self.positions.get(event_id, len(self.events))
            if index <= self.boundary:
                yield self.derived(index)
