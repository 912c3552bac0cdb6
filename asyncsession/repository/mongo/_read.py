"""Reads for the MongoDB store: the session document's tail first, then bounded range queries.

Every read starts from one decoded session document (its version, tail and counters). The tail
holds every event above ``rolled``; the events collection holds the rest. A read of the events
collection is an aggregation of two ``$match`` stages. The first is shaped for the index: the
session, ``archived: false`` when the filter excludes archived events, and a range of positions
up to ``rolled``. The second carries the rest of the filter (the incarnation, types, flags, time
range, keyword regexes on the JSON body that match every case of each letter). MongoDB merges
the two; planners that only use an index when *every* predicate is in it (measured on the test
server: any further field in a ``find`` turns a 2 ms range scan into a scan of the whole
collection) still scan just the range.
Results are checked against the filter once more in memory, which is also where ``pattern`` is
evaluated.

Windows never sort-with-limit on the server. A ``last_n`` read walks back from ``rolled`` in index
ranges that grow fourfold, starting with a range that would hold the missing events if all of
them matched; a window that must reach back to its turn's user message asks for exactly the
range down to that turn's start, which every event records as a hint. A page walks forward from
the start of the log the same way, until it is full.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from datetime import datetime

from ..._pymongo_errors import storage_errors
from ...events import SessionEvent
from ...filters import EventFilter, MatchMode
from ._cache import own
from ._codec import MESSAGE_TYPE_NAMES, Doc, as_utc, keyword_regex
from ._drawn import loaded_id
from ._layout import (
    ARCHIVED,
    DATA,
    ID,
    INCARNATION,
    MINOR,
    SEQ,
    SESSION_ID,
    SYNTHETIC,
    TIMESTAMP,
    TURN,
    TYPE,
)
from ._positions import GAP, Position
from ._state import Entry, LogState
from ._store import Store, aggregate, by_position, find_by_event_ids

__all__ = ["LogReader", "allowed_types", "criteria"]

Hit = tuple[Position, SessionEvent, int]
"""A matching event with its position and turn hint."""
_UserKey = tuple[datetime, str, Position]
"""Cross-session order: timestamp, then session id, then position."""

_MAX_SKIP = 1 << 62


def allowed_types(filter: EventFilter) -> frozenset[str] | None:
    """The event type names a filter can return; ``None`` for any."""
    allowed: set[str] | None = None
    if filter.message_types is not None:
        allowed = {t.value.upper() for t in filter.message_types}
    if filter.event_types is not None:
        names = {t.name for t in filter.event_types}
        allowed = names if allowed is None else allowed & names
    if filter.active_view and filter.event_types is None:
        allowed = set(MESSAGE_TYPE_NAMES) if allowed is None else allowed & MESSAGE_TYPE_NAMES
    return None if allowed is None else frozenset(allowed)


def criteria(filter: EventFilter, compacted: int) -> Doc | None:
    """The filter as query criteria on event documents; ``None`` when nothing can match.

    ``compacted`` is the session's compaction mark, for the active view's custom events.
    """
    query: Doc = {}
    conjuncts: list[Doc] = []
    if filter.exclude_synthetic:
        query[SYNTHETIC] = {"$ne": True}  # stored only when true
    if filter.exclude_archived or filter.active_view:
        query[ARCHIVED] = False
    allowed = allowed_types(filter)
    if allowed is not None:
        if not allowed:
            return None
        customs = sorted(allowed - MESSAGE_TYPE_NAMES)
        if filter.active_view and customs:
            clauses: list[Doc] = [{TYPE: {"$in": customs}, SEQ: {"$gt": compacted}}]
            messages = sorted(allowed & MESSAGE_TYPE_NAMES)
            if messages:
                clauses.append({TYPE: {"$in": messages}})
            conjuncts.append({"$or": clauses})
        else:
            query[TYPE] = {"$in": sorted(allowed)}
    if filter.from_ is not None or filter.to is not None:
        span: Doc = {}
        if filter.from_ is not None:
            span["$gte"] = filter.from_
        if filter.to is not None:
            span["$lte"] = filter.to
        query[TIMESTAMP] = span
    if filter.keyword is not None:
        conjuncts.append({DATA: {"$regex": keyword_regex(filter.keyword)}})
    if filter.keywords is not None:
        terms = [{DATA: {"$regex": keyword_regex(term)}} for term in filter.keywords]
        if filter.match_mode is MatchMode.ALL:
            conjuncts.extend(terms)
        else:
            conjuncts.append({"$or": terms})
    if conjuncts:
        query["$and"] = conjuncts
    return query


def _pipelines(
    state: LogState, filter: EventFilter, query_criteria: Doc, low: int | None, high: int
) -> list[list[Doc]]:
    """Match the index first (session, ``archived``, a position range), then the rest: one
    aggregation when the filter leaves archived events out, else one per value of ``archived``
    (see `by_position`)."""
    seq: Doc = {"$lte": high}
    if low is not None:
        seq["$gte"] = low
    leaves_out = filter.exclude_archived or filter.active_view
    archived = False if leaves_out else state.archived_below
    rest = {INCARNATION: state.inc, **query_criteria}
    rest.pop(ARCHIVED, None)
    return [
        [{"$match": first}, {"$match": rest}]
        for first in by_position(state.session.id, seq, archived)
    ]


def _accept(filter: EventFilter, compacted: int, hit: Hit) -> bool:
    position, event, _ = hit
    if not filter.matches(event):
        return False
    return not (filter.active_view and not event.is_message and position[0] <= compacted)


class LogReader:
    """Reads one session's log (or one user's sessions) from decoded session documents."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def _hit(self, session_id: str, entry: Entry) -> Hit:
        assert entry.data is not None
        event = self._store.cache.event(
            session_id, entry.id, entry.data, entry.archived, entry.ts, entry.type
        )
        return (entry.position, event, entry.turn)

    async def load_bodies(self, states: Iterable[LogState]) -> None:
        """Fill in the bodies of the big events the session documents only reference."""
        for state in states:
            entries = [e for e in state.tail if e.data is None]
            if state.pending is not None:
                entries += [e for e in state.pending.inserts if e.data is None]
            if not entries:
                continue
            session_id = state.session.id
            with storage_errors(f"read session {session_id!r}"):
                docs = await find_by_event_ids(
                    self._store.events,
                    [e.id for e in entries],
                    {SESSION_ID: session_id},
                    {DATA: 1},
                )
            bodies = {doc[ID]: doc[DATA] for doc in docs}
            for entry in entries:
                entry.data = bodies.get(entry.id)
                if entry.data is None:  # pragma: no cover - a reference always has its document
                    raise RuntimeError(f"event {entry.id!r} of {session_id!r} has no body")

    def _tail_hits(
        self, state: LogState, filter: EventFilter, exclude: frozenset[str]
    ) -> list[Hit]:
        hits = (self._hit(state.session.id, e) for e in state.tail if e.id not in exclude)
        return [hit for hit in hits if _accept(filter, state.compacted, hit)]

    async def _fetch(
        self,
        state: LogState,
        filter: EventFilter,
        query_criteria: Doc,
        low: int | None,
        high: int,
        exclude: frozenset[str],
    ) -> list[Hit]:
        """Matching events of the events collection at ``low <= seq <= high``."""
        session_id = state.session.id
        pipelines = _pipelines(state, filter, query_criteria, low, high)
        with storage_errors(f"read session {session_id!r}"):
            batches = await asyncio.gather(
                *(aggregate(self._store.events, pipeline) for pipeline in pipelines)
            )
        docs = [doc for batch in batches for doc in batch]
        return self._hits_of(state, filter, docs, low, high, exclude)

    def _hits_of(
        self,
        state: LogState,
        filter: EventFilter,
        docs: Sequence[Doc],
        low: int | None,
        high: int,
        exclude: frozenset[str],
    ) -> list[Hit]:
        session_id = state.session.id
        pending = state.pending
        pending_ids: set[str] = set() if pending is None else {e.id for e in pending.inserts}
        hits: list[Hit] = []
        for doc in docs:
            event_id = loaded_id(doc[ID])
            if event_id in exclude or event_id in pending_ids:
                continue
            archived = bool(doc.get(ARCHIVED)) or (
                pending is not None and event_id in pending.archive
            )
            event = self._store.cache.event(
                session_id, event_id, doc[DATA], archived, as_utc(doc[TIMESTAMP]), doc[TYPE]
            )
            hit: Hit = ((int(doc[SEQ]), doc.get(MINOR, "")), event, int(doc.get(TURN, -1)))
            if _accept(filter, state.compacted, hit):
                hits.append(hit)
        if pending is not None:
            for entry in pending.inserts:
                if entry.id in exclude or entry.seq > high or (low is not None and entry.seq < low):
                    continue
                hit = self._hit(session_id, entry)
                if _accept(filter, state.compacted, hit):
                    hits.append(hit)
        return hits

    @staticmethod
    def _below_may_match(filter: EventFilter, state: LogState) -> bool:
        """Whether the events collection can hold a match (from the session's counters)."""
        if state.rolled < 0:
            return False
        if (filter.exclude_archived or filter.active_view) and state.live == 0:
            allowed = allowed_types(filter)
            if allowed is not None and allowed <= MESSAGE_TYPE_NAMES:
                return False
            if filter.active_view and state.compacted >= state.rolled:
                return False
        return True

    async def read(
        self, state: LogState, filter: EventFilter, *, exclude: frozenset[str] = frozenset()
    ) -> list[SessionEvent]:
        """The session's matching events, oldest first, windowed as the filter says (the
        caller's own copies).

        Events whose ids are in ``exclude`` are treated as if they were not in the log.
        """
        return own(await self._read(state, filter, exclude))

    async def _read(
        self, state: LogState, filter: EventFilter, exclude: frozenset[str]
    ) -> list[SessionEvent]:
        await self.load_bodies([state])
        tail = self._tail_hits(state, filter, exclude)
        query_criteria = criteria(filter, state.compacted)
        below = query_criteria is not None and self._below_may_match(filter, state)
        if filter.last_n is not None:
            assert query_criteria is not None or not below
            return await self._last_n(
                state, filter, query_criteria if below else None, tail, exclude
            )
        if below and filter.page_size is not None:
            assert query_criteria is not None
            return await self._page(state, filter, query_criteria, tail, exclude)
        hits = list(tail)
        if below:
            assert query_criteria is not None
            hits += await self._fetch(state, filter, query_criteria, None, state.rolled, exclude)
        hits.sort(key=lambda hit: hit[0])
        return filter.apply_turn_aware_window([hit[1] for hit in hits])

    async def read_slice(
        self, state: LogState, filter: EventFilter, *, exclude: frozenset[str] = frozenset()
    ) -> list[SessionEvent] | None:
        """A ``last_n`` window from the newest tail entries of a `partial` state (the caller's
        own copies), or ``None`` when they do not hold the whole window (the caller then reads
        the whole tail)."""
        n = filter.last_n
        assert n is not None
        await self.load_bodies([state])
        newest_first = list(reversed(self._tail_hits(state, filter, exclude)))
        if len(newest_first) < n:
            return None
        allowed = allowed_types(filter)
        turn_aware = not filter.has_text_criteria and (allowed is None or "USER" in allowed)
        if turn_aware and not any(hit[1].is_turn_start for hit in newest_first[n - 1 :]):
            return None
        return own(filter.apply_turn_aware_window([hit[1] for hit in reversed(newest_first)]))

    async def _page(
        self,
        state: LogState,
        filter: EventFilter,
        query_criteria: Doc,
        tail: list[Hit],
        exclude: frozenset[str],
    ) -> list[SessionEvent]:
        """One page: walk forward from the start of the log in growing ranges until it is full.

        The cost follows the position of the page's last event, not the length of the log.
        """
        assert filter.page_size is not None
        size = filter.page_size
        start = (filter.page or 0) * size
        if start >= _MAX_SKIP:
            return []
        end = start + size
        found: list[Hit] = []
        low, span = 0, max(end, 8) * GAP * 2
        while len(found) < end and low <= state.rolled:
            high = min(low + span - 1, state.rolled)
            more = await self._fetch(state, filter, query_criteria, low, high, exclude)
            found += sorted(more, key=lambda hit: hit[0])
            low, span = high + 1, span * 4
        events = [hit[1] for hit in found]
        if len(events) < end:
            events += [hit[1] for hit in tail]
        return events[start:end]

    async def _last_n(
        self,
        state: LogState,
        filter: EventFilter,
        query_criteria: Doc | None,
        tail: list[Hit],
        exclude: frozenset[str],
    ) -> list[SessionEvent]:
        """The newest ``last_n`` matches, reaching back to their turn's start when needed."""
        n = filter.last_n
        assert n is not None
        allowed = allowed_types(filter)
        turn_aware = not filter.has_text_criteria and (allowed is None or "USER" in allowed)
        newest_first = list(reversed(tail))

        def satisfied() -> bool:
            if len(newest_first) < n:
                return False
            if not turn_aware or newest_first[n - 1][1].is_turn_start:
                return True
            return any(hit[1].is_turn_start for hit in newest_first[n:])

        high = state.rolled
        exhausted = query_criteria is None
        span = max(n - len(newest_first), 1) * GAP * 2
        hinted = False
        while not exhausted and not satisfied():
            assert query_criteria is not None
            low: int | None = high - span + 1
            if turn_aware and len(newest_first) >= n and not hinted:
                hinted = True
                hint = newest_first[-1][2]
                if 0 <= hint <= high:
                    low = min(hint, high - span + 1)
            assert low is not None
            if low <= 0:
                low = None
                exhausted = True
            found = await self._fetch(state, filter, query_criteria, low, high, exclude)
            found.sort(key=lambda hit: hit[0], reverse=True)
            newest_first += found
            if low is not None:
                high = low - 1
                span *= 4
        return filter.apply_turn_aware_window([hit[1] for hit in reversed(newest_first)])

    async def read_for_user(
        self, states: Sequence[LogState], filter: EventFilter
    ) -> list[SessionEvent]:
        """Matching events of several sessions, plainly windowed.

        Ordered by timestamp; ties by session id, then log order.
        """
        await self.load_bodies(states)
        unwindowed = filter.without_window()
        clauses: list[Doc] = []
        for state in states:
            query_criteria = criteria(unwindowed, state.compacted)
            if query_criteria is not None and state.rolled >= 0:
                clauses.append(
                    {
                        SESSION_ID: state.session.id,
                        INCARNATION: state.inc,
                        SEQ: {"$lte": state.rolled},
                        **query_criteria,
                    }
                )
        below = await self._fetch_for_user(states, filter, clauses) if clauses else {}
        found: list[tuple[_UserKey, SessionEvent]] = []
        for state in states:
            session_id = state.session.id
            hits = self._tail_hits(state, unwindowed, frozenset())
            docs = below.get(session_id, [])
            if docs or state.pending is not None:
                hits += self._hits_of(state, unwindowed, docs, None, state.rolled, frozenset())
            found += [((hit[1].timestamp, session_id, hit[0]), hit[1]) for hit in hits]
        found.sort(key=lambda item: item[0])
        return own(filter.apply_window([item[1] for item in found]))

    async def _fetch_for_user(
        self,
        states: Sequence[LogState],
        filter: EventFilter,
        clauses: list[Doc],
    ) -> dict[str, list[Doc]]:
        """The matching events below the tails of the sessions, by session."""
        sessions = sorted({clause[SESSION_ID] for clause in clauses})
        pipeline: list[Doc] = [
            {"$match": {SESSION_ID: {"$in": sessions}}},
            {"$match": {"$or": clauses} if len(clauses) > 1 else clauses[0]},
        ]
        order = {TIMESTAMP: 1, SESSION_ID: 1, SEQ: 1, MINOR: 1}
        # Keyword criteria are a prefilter (see `keyword_regex`): no limit before the check.
        exact = (
            filter.pattern is None
            and not filter.has_text_criteria
            and all(state.pending is None for state in states)
        )
        if exact and filter.last_n is not None:
            pipeline += [{"$sort": dict.fromkeys(order, -1)}, {"$limit": filter.last_n}]
        elif exact and filter.page_size is not None:
            end = ((filter.page or 0) + 1) * filter.page_size
            if end >= _MAX_SKIP:
                return {}
            pipeline += [{"$sort": order}, {"$limit": end}]
        with storage_errors("read events by user"):
            docs = await aggregate(self._store.events, pipeline)
        by_session: dict[str, list[Doc]] = {}
        for doc in docs:
            by_session.setdefault(doc[SESSION_ID], []).append(doc)
        return by_session
