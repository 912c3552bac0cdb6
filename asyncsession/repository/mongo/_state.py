"""The log part of a session document, decoded: version, counters, tail and pending compaction.

Tail entries pushed by appends carry no position: the ``k`` entries without a ``seq`` field are
always a suffix of the tail, and the ``j``-th of them sits at ``seq - (k - 1 - j) * GAP``, where
``seq`` is the session's counter. That lets an append assign positions with plain ``$inc`` and
``$push`` (no read, no pipeline update). Compaction rewrites the whole tail under its
compare-and-swap and gives every entry an explicit position.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ...events import Session
from ._codec import MESSAGE_TYPE_NAMES, Doc, pack_entry, session_from_doc, unpack_entry
from ._layout import (
    ANY_ARCHIVED,
    ARCHIVE,
    ARCHIVED_PREFIX,
    COMPACTED,
    COMPACTIONS,
    ID,
    INCARNATION,
    INSERTS,
    LAST_USER,
    LIVE,
    MINOR,
    PENDING,
    ROLLED,
    SEQ,
    TAIL,
    TAIL_SIZE,
    TURN,
    VERSION,
)
from ._positions import GAP, Position

__all__ = ["Entry", "LogState", "Pending", "decode_entries", "decode_state", "ids_in"]


@dataclass(slots=True, kw_only=True)
class Entry:
    """One event as the session document holds it (tail or pending compaction)."""

    id: str
    seq: int
    minor: str
    type: str
    ts: datetime
    synthetic: bool
    archived: bool
    data: str | None
    """The JSON body; ``None`` when it lives only in the events collection."""
    turn: int = -1
    """Where the turn this event belongs to started (a hint for turn-aware windows)."""

    @property
    def position(self) -> Position:
        """Where the event is in the log."""
        return (self.seq, self.minor)

    @property
    def is_message(self) -> bool:
        """Whether the event carries a chat message."""
        return self.type in MESSAGE_TYPE_NAMES

    def to_doc(self) -> Doc:
        """The entry with an explicit position, as compaction writes it."""
        doc = pack_entry(self.id, self.type, self.ts, self.synthetic, self.archived, self.data)
        doc[SEQ] = self.seq
        if self.minor:
            doc[MINOR] = self.minor
        if self.turn >= 0:
            doc[TURN] = self.turn
        return doc

    @classmethod
    def from_doc(cls, doc: Doc, seq: int) -> Entry:
        """An entry from its document; ``seq`` is used when the document has none."""
        type, ts, synthetic, archived, data = unpack_entry(doc)
        return cls(
            id=doc[ID],
            seq=int(doc.get(SEQ, seq)),
            minor=doc.get(MINOR, ""),
            type=type,
            ts=ts,
            synthetic=synthetic,
            archived=archived,
            data=data,
            turn=int(doc.get(TURN, -1)),
        )


@dataclass(slots=True, kw_only=True)
class Pending:
    """What the newest compaction changes below the tail, until it is rolled forward."""

    cv: int
    archive: frozenset[str]
    inserts: list[Entry]


@dataclass(slots=True, kw_only=True)
class LogState:
    """A session document, decoded."""

    session: Session
    inc: str
    """The incarnation: a token that changes when a session is deleted and created again."""
    version: int
    counter: int
    """The position of the newest appended event (the ``seq`` field)."""
    rolled: int
    """Events at ``seq <= rolled`` live in the events collection; the rest in ``tail``."""
    live: int
    """How many unarchived message events live in the events collection."""
    cv: int
    """How many compactions the log has had."""
    compacted: int
    """``counter`` right after the newest compaction (``-1`` before the first)."""
    last_user: int
    """The ``seq`` of the newest user message in the events collection (a hint)."""
    tail: list[Entry] = field(default_factory=list[Entry])
    """The newest events, oldest first: the whole tail, or its newest entries when the session
    document was read with a ``$slice`` of the tail (see `partial`)."""
    pending: Pending | None = None
    size: int = 0
    """How many entries the whole tail has."""
    archived_prefix: int = 0
    """How many of the oldest tail entries are known to be archived (set by compaction, which
    rewrites the tail; appends add unarchived entries at the end; roll-forward cuts the front)."""
    any_archived: bool = True
    """Whether the log may hold an archived event (the ``ar`` field): ``False`` only while it
    has had no compaction and no append of an archived event. A read of every event below the
    tail then needs one query instead of one per value of ``archived`` (see `by_position`).
    Session documents of earlier versions have no ``ar``, which reads as ``True``."""

    @property
    def archived_below(self) -> bool | None:
        """The ``archived`` value a read of every event below the tail needs to ask for:
        ``False`` when no event is archived, ``None`` (both values) otherwise."""
        return None if self.any_archived else False

    @property
    def partial(self) -> bool:
        """Whether `tail` holds only the newest entries of the tail.

        Entries without an explicit position are always a suffix of the tail and are placed
        from the counter down, so a suffix decodes to the right positions. Only the turn hints
        of its entries before its first user message are unknown; they matter for reads below
        the tail and for compaction, which both need the whole tail anyway.
        """
        return len(self.tail) < self.size

    @property
    def holds_unarchived(self) -> bool:
        """Whether `tail` holds every unarchived entry of the tail (a `partial` one may)."""
        return len(self.tail) >= self.size - self.archived_prefix


def decode_entries(
    raw: Sequence[Doc], counter: int, last_user: int, size: int | None = None
) -> list[Entry]:
    """Tail entries with their positions and turn hints, oldest first.

    ``raw`` is the whole tail, or its first entries when ``size`` (the whole tail's length) is
    given. Entries with explicit positions always come first, so a prefix that holds an implicit
    entry holds them all.
    """
    explicit = sum(1 for doc in raw if SEQ in doc)
    implicit = (len(raw) if size is None else size) - explicit
    entries: list[Entry] = []
    j = 0
    for doc in raw:
        if SEQ in doc:
            entries.append(Entry.from_doc(doc, 0))
        else:
            entries.append(Entry.from_doc(doc, counter - (implicit - 1 - j) * GAP))
            j += 1
    entries.sort(key=lambda e: e.position)
    turn = last_user
    for entry in entries:
        if entry.type == "USER":
            turn = entry.seq
        entry.turn = turn
    return entries


def _pending(raw: Doc | None) -> Pending | None:
    if not raw:
        return None
    inserts = [Entry.from_doc(doc, 0) for doc in raw.get(INSERTS, ())]
    inserts.sort(key=lambda e: e.position)
    return Pending(
        cv=int(raw[COMPACTIONS]), archive=frozenset(raw.get(ARCHIVE, ())), inserts=inserts
    )


def decode_state(doc: Doc) -> LogState:
    """Decode a whole session document."""
    counter = int(doc[SEQ])
    last_user = int(doc.get(LAST_USER, -1))
    tail = decode_entries(doc.get(TAIL, ()), counter, last_user)
    return LogState(
        session=session_from_doc(doc),
        inc=doc[INCARNATION],
        version=int(doc[VERSION]),
        counter=counter,
        rolled=int(doc[ROLLED]),
        live=int(doc.get(LIVE, 0)),
        cv=int(doc.get(COMPACTIONS, 0)),
        compacted=int(doc.get(COMPACTED, -1)),
        last_user=last_user,
        tail=tail,
        pending=_pending(doc.get(PENDING)),
        size=int(doc.get(TAIL_SIZE, len(tail))),
        archived_prefix=int(doc.get(ARCHIVED_PREFIX, 0)),
        any_archived=bool(doc.get(ANY_ARCHIVED, True)),
    )


def ids_in(doc: Doc, ids: Iterable[str]) -> set[str]:
    """Which of ``ids`` a (projected) session document holds in its tail or pending inserts."""
    held: set[str] = {entry[ID] for entry in doc.get(TAIL, ())}
    pending: Doc = doc.get(PENDING) or {}
    inserts: list[Doc] = pending.get(INSERTS, [])
    held.update(entry[ID] for entry in inserts)
    return held.intersection(ids)
