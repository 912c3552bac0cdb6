"""The contract every session store keeps.

The backend owns *selection*: filtering, windows and paging are pushed into its queries, because
their cost grows with the log. Core owns *interpretation*: what a compaction means arrives as a
plain [`CompactionPlan`][asyncsession.compaction_protocols.CompactionPlan].
``asyncsession.testing.contract`` checks the whole contract against any store.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol, runtime_checkable

from .._checks import require_repository, require_text, require_type
from .._text import check_event_text, check_session_text
from ..compaction_protocols import CompactionPlan
from ..events import Session, SessionEvent
from ..exceptions import UsageError
from ..filters import EventFilter
from ._metadata_index import check_principal

__all__ = [
    "SessionRepository",
    "SessionSnapshot",
    "check_batch",
    "check_session",
    "snapshot_by_parts",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSnapshot:
    """A session, its version, and the events of one read, taken together.

    ``version`` is never newer than ``events``: a compare-and-swap with it fails if anything
    was written after the events were read.
    """

    session: Session
    """The session."""
    version: int
    """The session's event-log version when the events were read (or earlier)."""
    events: tuple[SessionEvent, ...]
    """The events that matched the read's filter, in log order."""


@runtime_checkable
class SessionRepository(Protocol):
    """Where sessions and their event logs live. Every method is safe under concurrent tasks."""

    async def save(self, session: Session) -> Session:
        """Create the session, or update its ``user_id``, ``expires_at`` and ``metadata``.

        An update keeps ``created_at``, the event log and the version. Returns the stored
        session.
        """
        ...

    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists; ``True`` if this call inserted it."""
        ...

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        ...

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user."""
        ...

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """The sessions whose metadata holds the string ``value`` under ``name``, oldest first
        (by ``created_at``, then id), at most ``limit`` of them.

        ``name`` is a key the store indexes: a well-known
        [`SessionAttributes`][asyncsession.events.SessionAttributes] key, or one declared with
        ``indexed_metadata_keys`` when the store was built. The principal is the ``user_id``.

        Raises:
            UsageError: ``name`` is not indexed, or ``limit`` is below 1.
        """
        ...

    async def delete(self, session_id: str) -> None:
        """Remove the session and all its events; an unknown id is not an error."""
        ...

    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``, with its events.

        The expiry is re-checked atomically per session, so a TTL extended concurrently wins.
        Returns how many sessions were removed.
        """
        ...

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event to ``event.session_id``'s log (see
        [`append_events`][asyncsession.repository._protocol.SessionRepository.append_events])."""
        ...

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        """Append a batch of events atomically, in order, as one new version.

        Events whose id the session already has are idempotent replays: skipped, and a batch
        of replays only changes nothing and returns ``True``. With ``expected_version``, the
        batch is appended only if the session's version still equals it; otherwise nothing is
        written and the result is ``False``. Of several writers with the same expected version,
        exactly one succeeds.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: an event id belongs to another session; nothing is written.
            UsageError: an event belongs to another session than ``session_id``.
        """
        ...

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The session's events that match, oldest first; empty for an unknown session.

        A ``last_n`` window is extended to the start of the turn it lands in (see
        [`EventFilter`][asyncsession.repository._protocol.EventFilter]).
        """
        ...

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of every session of the user, by timestamp, with a plain window."""
        ...

    async def get_event_version(self, session_id: str) -> int:
        """The session's version: 0 at first, +1 per appended batch and per compaction.

        0 for an unknown session.
        """
        ...

    async def apply_compaction(
        self, session_id: str, plan: CompactionPlan, expected_version: int
    ) -> bool:
        """Apply ``plan`` if the session's version is still ``expected_version``.

        Archives in place and inserts before anchors; never reorders or removes events. A stale
        version changes nothing and returns ``False``, except for a retry of the session's
        newest compaction (the same plan, or a copy of it with its
        [`plan_id`][asyncsession.compaction_protocols.CompactionPlan.plan_id], at the same
        expected version, from any process, after its first reply was lost): that returns
        ``True``, since the plan is applied. An equal plan another caller computed is another
        call: ``False``.

        Raises:
            SessionNotFound: the session does not exist.
            InvalidCompactionPlan: an archive or anchor id is not in the log; nothing changes.
        """
        ...

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version and its matching events in one read; ``None`` if unknown.

        The version is read no later than the events. A store without a cheaper way can
        return [`snapshot_by_parts`][asyncsession.repository._protocol.snapshot_by_parts].
        """
        ...


async def snapshot_by_parts(
    repository: SessionRepository, session_id: str, filter: EventFilter
) -> SessionSnapshot | None:
    """A snapshot made of three reads: the session, then the version, then the events.

    Raises:
        UsageError: an argument is not of its type.
    """
    require_repository(repository, "repository")
    require_text(session_id, "session_id")
    require_type(filter, EventFilter, "filter", "an EventFilter")
    session = await repository.find_by_id(session_id)
    if session is None:
        return None
    version = await repository.get_event_version(session_id)
    events = await repository.find_events(session_id, filter)
    return SessionSnapshot(session=session, version=version, events=tuple(events))


def check_batch(session_id: str, events: Sequence[SessionEvent]) -> None:
    """Refuse a batch for ``session_id`` that holds another session's event, or a string that
    is not UTF-8 text; every store calls it before it writes.

    Raises:
        UsageError: an event belongs to another session.
        InvalidText: a string of an event does not encode as UTF-8 (a lone surrogate).
    """
    for event in events:
        if event.session_id != session_id:
            raise UsageError(
                f"event {event.id!r} belongs to session {event.session_id!r}, not {session_id!r}"
            )
        check_event_text(event)


def check_session(session: Session) -> None:
    """Refuse a session that a store cannot keep as given; every store calls it before it
    writes a session.

    Raises:
        InvalidText: its id, user id or metadata holds a string that does not encode as UTF-8.
        UsageError: its metadata names another principal than its ``user_id``.
    """
    check_session_text(session)
    check_principal(session)
