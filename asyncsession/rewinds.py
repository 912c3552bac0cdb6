"""Points in a session's log, and the record a rewind leaves in it.

A **point** ([`LogPoint`][asyncsession.rewinds.LogPoint]) is a place in a log: the end of commit
``version``, or, with ``event_id``, just after that event of commit ``version``. A fork begins
with its parent's log up to a point; a rewind goes back (or forward) to one; a read ``as_of`` a
version sees the log as it was at the end of that commit.

A **rewind** appends one commit holding one ``REWIND`` event, a *boundary* like a compaction's,
whose payload is a [`RewindRecord`][asyncsession.rewinds.RewindRecord]. From then on the active
view is the one the log had at the record's point, followed by whatever is appended after the
rewind. Nothing is removed: the events after the point read ``archived=True`` (they stay in the
log, and searches find them), and a later rewind to a point after them, such as the version the
rewind was made at, brings them back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import cast

from pydantic import JsonValue

from .events import EventType, SessionEvent
from .exceptions import UsageError

__all__ = ["LogPoint", "RewindRecord"]


def _version(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise UsageError(f"{name} must be an int >= 0, not {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class LogPoint:
    """A place in a session's log: the end of commit ``version``, or just after its event
    ``event_id``.

    Raises:
        UsageError: ``version`` is not an int >= 0, ``event_id`` is not a non-empty string,
            or an event is named at version 0 (the start of the log holds none).
    """

    version: int
    """The commit the point is in (0: the start of the log, before any commit)."""
    event_id: str | None = None
    """The last event before the point when it is inside commit ``version``; ``None`` at the
    end of the commit."""

    def __post_init__(self) -> None:
        _version(self.version, "a point's version")
        event = cast(object, self.event_id)
        if event is not None and (not isinstance(event, str) or not event):
            raise UsageError(f"a point's event_id must be a non-empty string, not {event!r}")
        if event is not None and self.version == 0:
            raise UsageError("the start of the log (version 0) holds no event")


@dataclass(frozen=True, slots=True, kw_only=True)
class RewindRecord:
    """What a ``REWIND`` event says: the typed view of its payload.

    The active view after it is the view the log had at ``to``, then every event appended after
    the rewind. Read one back with
    [`from_event`][asyncsession.rewinds.RewindRecord.from_event].
    """

    to: LogPoint
    """The point whose view the rewind restores."""
    from_version: int
    """The session's version the rewind was appended at: a rewind to it undoes this one."""

    def __post_init__(self) -> None:
        if not isinstance(cast(object, self.to), LogPoint):
            raise UsageError(f"to must be a LogPoint, not {type(cast(object, self.to)).__name__}")
        _version(self.from_version, "from_version")
        if self.to.version > self.from_version:
            raise UsageError(
                f"a rewind at version {self.from_version} cannot go to version {self.to.version}"
            )

    @property
    def undo(self) -> LogPoint:
        """The point a rewind goes to to undo this one: the log just before it."""
        return LogPoint(version=self.from_version)

    def to_event(self, session_id: str, *, event_id: str | None = None) -> SessionEvent:
        """The ``REWIND`` event that stores this record, to be appended at `from_version`; a
        fixed ``event_id`` makes a retry of the append a replay."""
        payload: dict[str, JsonValue] = {
            "version": self.to.version,
            "event": self.to.event_id,
            "fromVersion": self.from_version,
        }
        if event_id is None:
            return SessionEvent(session_id=session_id, type=EventType.REWIND, payload=payload)
        return SessionEvent(
            id=event_id, session_id=session_id, type=EventType.REWIND, payload=payload
        )

    @classmethod
    def from_event(cls, event: SessionEvent) -> RewindRecord:
        """The record a ``REWIND`` event holds.

        Raises:
            UsageError: ``event`` is not a ``REWIND`` event, or its payload is not a record.
        """
        payload = event.payload
        if event.type != EventType.REWIND or not isinstance(payload, dict):
            raise UsageError(f"event {event.id!r} is not a REWIND event")
        try:
            return cls(
                to=LogPoint(
                    version=cast(int, payload["version"]),
                    event_id=cast("str | None", payload.get("event")),
                ),
                from_version=cast(int, payload["fromVersion"]),
            )
        except (KeyError, UsageError) as exc:
            raise UsageError(f"event {event.id!r} does not hold a rewind record") from exc
