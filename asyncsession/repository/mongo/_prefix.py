"""The commits a session's log is made of, as stored: lineages in session documents, and the
queries and checks that take a fork's prefix from its parents' commits (see `_lineage`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from ._layout import (
    BASE,
    COMMIT,
    EVENT_ID,
    EVENTS,
    ID,
    INCARNATION,
    LAST,
    LINEAGE,
    SESSION,
    THROUGH,
    Doc,
)
from ._lineage import Lineage, Segment

__all__ = ["commits_query", "events_of", "lineage_of", "owns", "segments_doc"]


def lineage_of(doc: Mapping[str, Any]) -> Lineage:
    """The lineage a session document holds (a plain session's has no segments)."""
    first = 1
    segments: list[Segment] = []
    for entry in cast(list[Doc], doc.get(LINEAGE) or []):
        segments.append(
            Segment(entry[SESSION], entry[INCARNATION], first, entry[LAST], entry.get(THROUGH))
        )
        first = entry[LAST] + 1
    return Lineage(doc[ID], doc[INCARNATION], int(doc.get(BASE) or 0), tuple(segments))


def segments_doc(segments: tuple[Segment, ...]) -> list[Doc]:
    """Segments as a session document holds them."""
    return [
        {SESSION: s.session, INCARNATION: s.incarnation, LAST: s.last, THROUGH: s.through}
        for s in segments
    ]


def commits_query(lineage: Lineage, low: int = 1, high: int | None = None) -> Doc:
    """The commits numbered ``low`` to ``high`` (no bound: ``None``) of the session's log: its
    own (of any incarnation: a reader checks), and its segments' (of theirs)."""
    branches: list[Doc] = []
    own_low = max(low, lineage.base + 1)
    if high is None or own_low <= high:
        numbers: Doc = {"$gte": own_low} if own_low > 1 else {}
        if high is not None:
            numbers["$lte"] = high
        branch: Doc = {SESSION: lineage.session}
        if numbers:
            branch[COMMIT] = numbers
        branches.append(branch)
    for segment in lineage.segments:
        first = max(low, segment.first)
        last = segment.last if high is None else min(high, segment.last)
        if first <= last:
            branches.append(
                {
                    SESSION: segment.session,
                    INCARNATION: segment.incarnation,
                    COMMIT: {"$gte": first, "$lte": last},
                }
            )
    if not branches:
        return {SESSION: lineage.session, COMMIT: {"$lt": 0}}  # nothing
    return branches[0] if len(branches) == 1 else {"$or": branches}


def owns(lineage: Lineage, doc: Mapping[str, Any]) -> bool:
    """Whether the commit ``doc`` is one of the log's (of the right incarnation and number)."""
    number: int = doc[COMMIT]
    if doc[SESSION] == lineage.session:
        return doc.get(INCARNATION) == lineage.incarnation and number > lineage.base
    return lineage.segment_of(doc[SESSION], doc.get(INCARNATION), number) is not None


def events_of(lineage: Lineage, doc: Mapping[str, Any]) -> list[Doc]:
    """The events of the commit ``doc`` that the log holds: all of them, but for the last
    commit of a segment cut at an event."""
    events = cast(list[Doc], doc[EVENTS])
    if doc[SESSION] == lineage.session:
        return events
    segment = lineage.segment_of(doc[SESSION], doc.get(INCARNATION), doc[COMMIT])
    if segment is None or segment.through is None or doc[COMMIT] != segment.last:
        return events
    for index, event in enumerate(events):
        if event[EVENT_ID] == segment.through:
            return events[: index + 1]
    return events
