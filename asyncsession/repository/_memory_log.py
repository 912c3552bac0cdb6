"""One session's log in the in-memory store: its own events in a list that only grows, with each
id's index, where each commit ends and where its boundaries are; a fork's log also holds its
prefix as pieces of other logs' own events, read as one list without copies."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast, overload

from bson.binary import Binary

from .._view import BOUNDARY_TYPES, ReadLog
from ..events import Session, SessionEvent
from ..exceptions import UsageError
from ..rewinds import LogPoint
from ._protocol import Lease
from ._sealing import LogView, Sealed

__all__ = ["Entry", "MemoryLog", "Piece"]

Entry = SessionEvent | Sealed
"""An event as the log keeps it: in clear, or sealed (encryption on); a preview when offloaded."""


@dataclass(frozen=True, slots=True)
class Piece:
    """The first ``stop`` own events of ``log``, which a fork's prefix reads."""

    log: MemoryLog
    stop: int


@dataclass(slots=True, eq=False)
class MemoryLog:
    """A session and its log."""

    session: Session
    """The session; its metadata is empty while it is sealed in ``metadata``."""
    entries: list[str] = field(default_factory=list[str])
    """The index entries of the session's metadata, for ``find_by_metadata``."""
    metadata: Binary | None = None
    """The session's metadata, encrypted (with encryption on and metadata to keep)."""
    events: list[Entry] = field(default_factory=list[Entry])
    """Its own events, in order (previews of offloaded ones)."""
    bodies: dict[str, Entry] = field(default_factory=dict[str, Entry])
    """The whole events its own events are previews of, by id."""
    positions: dict[str, int] = field(default_factory=dict[str, int])
    """Each own event id's index in ``events``."""
    ends: list[int] = field(default_factory=list[int])
    """Own commit ``k`` (0-based) -> the index in ``events`` one past its last event."""
    boundaries: list[int] = field(default_factory=list[int])
    """The indices in ``events`` of its boundary events."""
    base: int = 0
    """The version its own commits start after (a fork's point's commit; 0 for other logs)."""
    version: int = 0
    pieces: tuple[Piece, ...] = ()
    """The prefix, oldest first."""
    leases: dict[int, Lease] = field(default_factory=dict[int, Lease])
    """Own commit number (0: the session, and any commit of the prefix) -> its lease."""
    _offsets: tuple[int, ...] = ()
    _prefix_boundaries: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        offsets: list[int] = []
        bounds: list[int] = []
        total = 0
        for piece in self.pieces:
            offsets.append(total)
            owned = piece.log.boundaries
            bounds += [total + b for b in owned[: bisect_right(owned, piece.stop - 1)]]
            total += piece.stop
        self._offsets = (*offsets, total)
        self._prefix_boundaries = tuple(bounds)

    @property
    def prefix(self) -> int:
        """How many events the prefix holds."""
        return self._offsets[-1]

    def __len__(self) -> int:
        return self.prefix + len(self.events)

    # --- positions in the joined log -------------------------------------------------------------

    def _piece_of(self, index: int) -> tuple[Piece, int]:
        """The piece that holds the prefix's event ``index``, and the event's own index in
        its log."""
        k = bisect_right(self._offsets, index) - 1
        return self.pieces[k], index - self._offsets[k]

    def event(self, index: int) -> Entry:
        """The entry at ``index`` of the joined log, as this session's (a sealed entry names
        no session: it is opened as this one's)."""
        prefix = self.prefix
        if index >= prefix:
            return self.events[index - prefix]
        piece, own = self._piece_of(index)
        found = piece.log.events[own]
        if isinstance(found, Sealed):
            return found
        return found.model_copy(update={"session_id": self.session.id})

    def body(self, event_id: str) -> Entry | None:
        """The whole event ``event_id`` of the joined log (its entry when not offloaded), as
        this session's; ``None`` when the log has no such event."""
        index = self.position(event_id)
        if index is None:
            return None
        if index >= self.prefix:
            return self.bodies.get(event_id, self.events[index - self.prefix])
        piece, _ = self._piece_of(index)
        whole = piece.log.bodies.get(event_id)
        if whole is None:
            return self.event(index)
        if isinstance(whole, Sealed):
            return whole
        return whole.model_copy(update={"session_id": self.session.id})

    def position(self, event_id: str) -> int | None:
        """The index of ``event_id`` in the joined log, or ``None``."""
        own = self.positions.get(event_id)
        if own is not None:
            return self.prefix + own
        for piece, offset in zip(self.pieces, self._offsets, strict=False):
            index = piece.log.positions.get(event_id)
            if index is not None and index < piece.stop:
                return offset + index
        return None

    def commit_of(self, index: int) -> int:
        """The number of the commit the event at ``index`` of the joined log is in."""
        prefix = self.prefix
        if index >= prefix:
            return self.base + bisect_right(self.ends, index - prefix) + 1
        piece, own = self._piece_of(index)
        return piece.log.base + bisect_right(piece.log.ends, own) + 1

    def end_of(self, commit: int) -> int:
        """The number of events of the joined log up to the end of ``commit`` (at most the
        version)."""
        if commit <= 0:
            return 0
        if commit > self.base:
            k = min(commit, self.version) - self.base - 1
            return self.prefix + (self.ends[k] if k >= 0 else 0)
        for piece, offset in zip(self.pieces, self._offsets, strict=False):
            log = piece.log
            if commit > log.base + bisect_right(log.ends, piece.stop - 1) + 1:
                continue  # after this piece's last commit
            return offset + min(log.ends[commit - log.base - 1], piece.stop)
        return self.prefix

    def locate(self, at: int | str | None, before: str | None) -> LogPoint:
        """The point ``at`` or ``before`` names (see ``SessionRepository.fork``).

        Raises:
            UsageError: it is not in the log.
        """
        if isinstance(at, int):
            if at > self.version:
                raise UsageError(
                    f"session {self.session.id!r} is at version {self.version}, not {at}"
                )
            return LogPoint(version=at)
        if at is None and before is None:
            return LogPoint(version=self.version)
        event_id = at if at is not None else before
        assert event_id is not None
        index = self.position(event_id)
        if index is None:
            raise UsageError(f"session {self.session.id!r} has no event {event_id!r}")
        last = index if before is None else index - 1
        if last < 0:
            return LogPoint(version=0)
        commit = self.commit_of(last)
        end = self.end_of(commit)
        if last == end - 1:
            return LogPoint(version=commit)
        if self.event(end - 1).type in BOUNDARY_TYPES:
            raise UsageError(
                f"the point after event {self.event(last).id!r} is inside the commit of a "
                "boundary: a log is never there"
            )
        return LogPoint(version=commit, event_id=self.event(last).id)

    def prefix_at(self, point: LogPoint) -> tuple[Piece, ...]:
        """The pieces of a fork of this log at ``point``."""
        length = self.end_of(point.version)
        if point.event_id is not None:
            index = self.position(point.event_id)
            assert index is not None
            length = index + 1
        pieces: list[Piece] = []
        for piece, offset in zip(self.pieces, self._offsets, strict=False):
            if offset >= length:
                break
            pieces.append(Piece(piece.log, min(piece.stop, length - offset)))
        if length > self.prefix:
            pieces.append(Piece(self, length - self.prefix))
        return tuple(pieces)

    # --- reads ---------------------------------------------------------------------------------

    def read(self, as_of: int | None = None) -> ReadLog:
        """The joined log (as it was at version ``as_of``) for the derivation, in a store
        without encryption (whose entries are all events)."""
        if not self.pieces and (as_of is None or as_of >= self.version):
            events = cast(list[SessionEvent], self.events)
            return ReadLog(events, self.positions, self.boundaries, self._last_of)
        length = len(self) if as_of is None else self.end_of(as_of)
        joined = cast(Sequence[SessionEvent], _Joined(self, length))
        return ReadLog(joined, _JoinedPositions(self, length), self._bounds(length), self._last_of)

    def taken(self, as_of: int | None = None) -> LogView:
        """The joined log as it is now (as it was at version ``as_of``), to read outside the
        lock: the entries taken so far never change (a log only grows, and a delete replaces
        its lists rather than cutting them)."""
        length = len(self) if as_of is None else self.end_of(as_of)
        if not self.pieces:
            entries: Sequence[Entry] = self.events
            positions: Mapping[str, int] = self.positions
        else:
            entries, positions = _Joined(self, length), _JoinedPositions(self, length)
        return LogView(
            session_id=self.session.id,
            user_id=self.session.user_id,
            entries=entries,
            count=length,
            positions=positions,
            boundaries=tuple(self._bounds(length)),
            last_of=self._last_of,
        )

    def _bounds(self, length: int) -> list[int]:
        """The indices of the boundaries among the first ``length`` events of the joined log."""
        bounds = [*self._prefix_boundaries, *(self.prefix + b for b in self.boundaries)]
        return bounds[: bisect_right(bounds, length - 1)]

    def forget(self, keep: int) -> list[str]:
        """Forget the own events from index ``keep`` on (a deleted session keeps only what its
        forks read): the lists are replaced, never cut, so a read that took them goes on.
        Returns the ids forgotten."""
        gone = [entry.id for entry in self.events[keep:]]
        self.events = self.events[:keep]
        self.positions = {i: p for i, p in self.positions.items() if p < keep}
        self.bodies = {i: b for i, b in self.bodies.items() if i in self.positions}
        return gone

    def _last_of(self, commit: int) -> int | None:
        if not 0 < commit <= self.version:
            return None
        return self.end_of(commit) - 1


class _Joined(Sequence[Entry]):
    """The first ``length`` events of a joined log, as one sequence."""

    __slots__ = ("_length", "_log")

    def __init__(self, log: MemoryLog, length: int) -> None:
        self._log = log
        self._length = length

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | Sequence[Entry]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._length))]
        if index < 0:
            index += self._length
        if not 0 <= index < self._length:
            raise IndexError(index)
        return self._log.event(index)


class _JoinedPositions(Mapping[str, int]):
    """Each event id of the first ``length`` events of a joined log -> its index."""

    __slots__ = ("_length", "_log")

    def __init__(self, log: MemoryLog, length: int) -> None:
        self._log = log
        self._length = length

    def __getitem__(self, event_id: str) -> int:
        index = self._log.position(event_id)
        if index is None or index >= self._length:
            raise KeyError(event_id)
        return index

    def __iter__(self) -> Iterator[str]:
        return (self._log.event(i).id for i in range(self._length))

    def __len__(self) -> int:
        return self._length
