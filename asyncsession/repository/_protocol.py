"""The contract every session store keeps: `SessionRepository`, `SessionSnapshot`, `Lease`.

A session's log is a sequence of **commits** numbered 1, 2, 3, … densely per session; a commit
holds one or more events in order, and the session's **version** is the number of its newest
commit (0 before the first). Every appended batch is one commit, and so is a compaction: its
summaries, then one ``COMPACTION`` event (the *boundary*) whose record names the active view.
Nothing once committed is rewritten; ``archived`` is derived on read from the newest boundary
(see [`EventFilter`][asyncsession.filters.EventFilter]). A rewind is a commit too: one
``REWIND`` boundary. A **fork** is a session whose log begins with another's up to a point,
read from there, never copied; its own commits continue the numbering after that point.

The backend owns *selection*: filtering and windows are pushed into its reads where their cost
grows with the log. ``asyncsession.testing.contract`` checks the whole contract against any
store.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Self, cast

from .._offload import DEFAULT_PAGE_CHARS, BodyPage, page_of
from .._text import check_event_text, check_session_text
from ..compaction_protocols import CompactionRecord
from ..events import EventType, Session, SessionEvent
from ..exceptions import UsageError
from ..filters import EventFilter
from ..rewinds import LogPoint, RewindRecord
from ._metadata_index import check_principal

__all__ = [
    "Lease",
    "SessionRepository",
    "SessionSnapshot",
    "check_batch",
    "check_owner",
    "check_point",
    "check_session",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class Lease:
    """A turn's claim on a session: "please wait until I am done, or until ``expires_at``".

    A commit may carry one (the commit a turn's question went in, while its reply is pending);
    a commit without one ends any lease before it. The version compare-and-swap, not the lease,
    is what keeps the log right when two turns race anyway.

    Raises:
        UsageError: ``holder`` is not a non-empty string, or ``expires_at`` is not an aware
            datetime.
    """

    holder: str
    """Who holds it: an attempt id, random per turn attempt."""
    expires_at: datetime
    """When it ends unless renewed (UTC, to the millisecond)."""

    def __post_init__(self) -> None:
        holder = cast(object, self.holder)
        if not isinstance(holder, str) or not holder:
            raise UsageError(f"a lease's holder must be a non-empty string, not {holder!r}")
        expires = cast(object, self.expires_at)
        if not isinstance(expires, datetime) or expires.utcoffset() is None:
            raise UsageError(f"a lease's expires_at must be an aware datetime, not {expires!r}")
        expires = expires.astimezone(UTC)
        object.__setattr__(
            self, "expires_at", expires.replace(microsecond=expires.microsecond // 1000 * 1000)
        )

    def is_live(self, now: datetime | None = None) -> bool:
        """Whether it has not expired at ``now`` (the current time by default)."""
        return self.expires_at > (now or datetime.now(UTC))


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionSnapshot:
    """A session, its version, the events of one read and the newest commit's lease, taken
    together.

    ``version`` is never newer than ``events``: a compare-and-swap with it fails if anything
    was written after the events were read.
    """

    session: Session
    """The session."""
    version: int
    """The session's version (its newest commit's number) when the events were read."""
    events: tuple[SessionEvent, ...]
    """The events that matched the read's filter, in log order (view order for an
    ``active_view`` read)."""
    lease: Lease | None = None
    """The lease on the newest commit (on the session itself at version 0), expired or not;
    ``None`` when there is none."""


class SessionRepository(ABC):
    """Where sessions and their logs live. Every method is safe under concurrent tasks.

    Subclass it and implement the abstract methods; `append_event` and `read_snapshot` have
    defaults made of the others. A store is an async context manager that `aclose`s on exit.
    """

    # --- sessions ------------------------------------------------------------------------------

    @abstractmethod
    async def save(self, session: Session) -> Session:
        """Create the session, or update its ``user_id``, ``expires_at`` and ``metadata``.

        An update keeps ``created_at``, the log and the version. Returns the stored session.
        """

    @abstractmethod
    async def save_if_absent(self, session: Session) -> bool:
        """Insert the session unless its id exists; ``True`` if this call inserted it."""

    @abstractmethod
    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""

    @abstractmethod
    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user, oldest first (by ``created_at``, then id)."""

    @abstractmethod
    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """The sessions whose metadata holds the string ``value`` under ``name``, oldest first
        (by ``created_at``, then id), at most ``limit`` of them.

        ``name`` is a key the store indexes: a well-known key of
        [`Session.metadata`][asyncsession.events.Session.metadata], or one declared with
        ``indexed_metadata_keys`` when the store was built. The principal is the ``user_id``.

        Raises:
            UsageError: ``name`` is not indexed, or ``limit`` is below 1.
        """

    @abstractmethod
    async def delete(self, session_id: str) -> None:
        """Remove the session and all its events; an unknown id is not an error.

        A fork never loses what it reads: while forks read a deleted session's events, the
        store keeps those events (and nothing else of it) out of sight, and keeps its id taken
        (`save_if_absent` returns ``False``, `save` raises `SessionExists`) until the last such
        fork is deleted.
        """

    @abstractmethod
    async def delete_expired_sessions(self, before: datetime) -> int:
        """Remove every session that expired strictly before ``before``, with its events (kept
        out of sight for its forks, as `delete` says).

        The expiry is re-checked atomically per session, so a TTL extended concurrently wins.
        Returns how many sessions were removed.
        """

    # --- forks ---------------------------------------------------------------------------------

    @abstractmethod
    async def fork(
        self,
        session_id: str,
        child: Session,
        *,
        at: int | str | None = None,
        before: str | None = None,
    ) -> Session:
        """Create ``child`` as a fork of the session: its log begins with the session's log up
        to a point, which it reads without a copy, and its own commits continue from there.

        The point is the end of commit ``at`` (a version), just after the event ``at`` (an
        event id), just before the event ``before``, or, with neither, the session's version
        now. The fork's version starts at the point's commit; its reads show the prefix's
        events as its own (with its ``session_id``), appending a prefix event's id to it is a
        replay, and the parent stays writable: what the parent appends later is not the
        fork's. ``child``'s ``id``, expiry and metadata are taken as given, and its ``user_id``
        must be the parent's (a fork stays under its owner's key, and an erasure of the owner
        erases it); the stored session names the parent and the point in ``forked_from``. A
        fork repeated with the same child id and point (after a lost reply) returns the fork
        made the first time. The parent's offloaded bodies are shared, not copied:
        ``read_body`` of the fork reads them, and they stay while the fork reads them.

        Raises:
            SessionNotFound: the session does not exist (or was deleted meanwhile).
            SessionExists: ``child.id`` is another session's, or a fork of another point.
            UsageError: both ``at`` and ``before`` are given, the point is not in the log (a
                version past the newest, an unknown event, a point inside a boundary's
                commit), or ``child.user_id`` is not the parent's.
        """

    @abstractmethod
    async def locate(
        self, session_id: str, *, at: int | str | None = None, before: str | None = None
    ) -> tuple[LogPoint, int] | None:
        """The point of the session's log that ``at`` or ``before`` name (as for `fork`), and
        the session's version; ``None`` for an unknown session.

        The point is canonical: ``event_id`` is ``None`` when it is the end of its commit.

        Raises:
            UsageError: as for `fork`.
        """

    @abstractmethod
    async def find_forks(self, session_id: str) -> list[Session]:
        """The sessions forked from this one (not their forks), oldest first."""

    # --- the log -------------------------------------------------------------------------------

    @abstractmethod
    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Append a batch of events atomically, in order, as one commit (one new version).

        Events whose id the session already has are idempotent replays: skipped; a batch of
        replays only changes nothing and returns ``True`` (even with a stale expected version),
        and a partly replayed batch appends only its new events. With ``expected_version``,
        the batch is appended only if the session's version still equals it; otherwise nothing
        is written and the result is ``False``. Of several writers with the same expected
        version, exactly one succeeds. The commit carries ``lease`` (no extra write); a commit
        without one ends any lease before it. ``archived`` on a given event is ignored: it is
        derived on read.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: an event id belongs to another session; nothing is written.
            UsageError: an event belongs to another session than ``session_id``, or a
                ``COMPACTION`` event does not hold a compaction record.
        """

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event to ``event.session_id``'s log: a batch of one (see
        [`append_events`][asyncsession.repository.SessionRepository.append_events])."""
        await self.append_events(event.session_id, [event])

    @abstractmethod
    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        """The session's events that match, in log order (view order for ``active_view``);
        empty for an unknown session.

        A ``last_n`` window is extended to the start of the turn it lands in (see
        [`EventFilter`][asyncsession.filters.EventFilter]).
        """

    @abstractmethod
    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        """Matching events of every session of the user, by timestamp, with a plain window."""

    @abstractmethod
    async def get_event_version(self, session_id: str) -> int:
        """The session's version: 0 at first, +1 per appended batch and per compaction.

        0 for an unknown session.
        """

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest commit's lease in one
        read; ``None`` if the session is unknown.

        The version is read no later than the events. This default reads the session, then
        the version, then the events, and reports no lease; a store that leases overrides it.
        """
        session = await self.find_by_id(session_id)
        if session is None:
            return None
        version = await self.get_event_version(session_id)
        events = await self.find_events(session_id, filter)
        return SessionSnapshot(session=session, version=version, events=tuple(events))

    # --- large bodies --------------------------------------------------------------------------

    async def read_body(self, session_id: str, event_id: str) -> SessionEvent | None:
        """The event as it was appended, its whole body included when the store offloaded it;
        ``None`` when the session has no such event. ``archived`` is not derived: it reads
        ``False``.

        A store offloads an event whose content is over its ``offload_threshold``: the log
        keeps a preview under the same id (each text cut to ``preview_chars``), whose metadata
        key ``offloaded`` holds ``{"size": <bytes as JSON>, "chars": [<length of each text>]}``.

        This default reads the whole log and returns the event found there, for a store that
        never offloads; a store that does overrides it.
        """
        for event in await self.find_events(session_id, EventFilter.all()):
            if event.id == event_id:
                return event.model_copy(update={"archived": False}) if event.archived else event
        return None

    async def read_body_page(
        self,
        session_id: str,
        event_id: str,
        *,
        offset: int = 0,
        limit: int = DEFAULT_PAGE_CHARS,
        call_id: str | None = None,
    ) -> BodyPage | None:
        """One page of an event's whole text, for a tool that lets the model read an offloaded
        output: ``limit`` characters from ``offset`` of the result of tool call ``call_id``
        (the event's first result when ``None``), of a message's text, or of a custom event's
        payload as JSON. ``None`` when the session has no such event. The page's ``text``
        starts at ``offset`` of a text ``total`` characters long; ``next_offset`` is where the
        next page starts (``None`` after the last).

        Each page reads the whole body (one `read_body`): ask for pages of a generous size.

        Raises:
            UsageError: ``offset`` is negative, ``limit`` is below 1, or ``call_id`` names no
                result of the event.
        """
        event = await self.read_body(session_id, event_id)
        if event is None:
            return None
        return page_of(event, offset=offset, limit=limit, call_id=call_id)

    # --- leases --------------------------------------------------------------------------------

    @abstractmethod
    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Take (or renew) the lease on commit ``version`` (0: the session itself).

        Succeeds when that commit has no lease, its lease has expired, or ``lease.holder``
        holds it; ``False`` while another holder's lease runs, or when the session has no
        commit ``version``. Of concurrent takers exactly one wins.

        Raises:
            SessionNotFound: the session does not exist.
        """

    @abstractmethod
    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it; otherwise do nothing."""

    # --- lifecycle -----------------------------------------------------------------------------

    @property
    def loop_bound(self) -> bool:
        """Whether the store belongs to one event loop, the first that uses it, and refuses
        every other (a PyMongo or Motor client does). ``False`` (the default): any loop may call
        it. Adapters that serve sync callers run a loop-bound store's calls on its loop."""
        return False

    @property
    def event_loop(self) -> asyncio.AbstractEventLoop | None:
        """The event loop a `loop_bound` store belongs to; ``None`` until a loop has used it
        (and always for a store any loop may call)."""
        return None

    @abstractmethod
    async def aclose(self) -> None:
        """Close the store; closing again does nothing, and a call after it raises
        `UsageError`."""

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()


def check_batch(session_id: str, events: Sequence[SessionEvent]) -> list[SessionEvent]:
    """The batch for ``session_id`` as a store appends it: an id given twice is kept once (the
    first; the second is a replay of it). Every store calls it before it writes.

    Raises:
        UsageError: an event belongs to another session, or a ``COMPACTION`` or ``REWIND``
            event is not the last of the batch or does not hold its record.
        UsageError: a string of an event does not encode as UTF-8 (a lone surrogate).
    """
    batch: dict[str, SessionEvent] = {}
    for event in events:
        if event.session_id != session_id:
            raise UsageError(
                f"event {event.id!r} belongs to session {event.session_id!r}, not {session_id!r}"
            )
        if event.type in (EventType.COMPACTION, EventType.REWIND):
            if event is not events[-1]:
                raise UsageError(
                    f"the {event.type} event {event.id!r} must be the last of its append"
                )
            if event.type == EventType.COMPACTION:
                CompactionRecord.from_event(event)
            else:
                RewindRecord.from_event(event)
        check_event_text(event)
        batch.setdefault(event.id, event)
    return list(batch.values())


def check_session(session: Session) -> None:
    """Refuse a session that a store cannot keep as given; every store calls it before it
    writes a session.

    Raises:
        UsageError: its id, user id or metadata holds a string that does not encode as UTF-8.
        UsageError: its metadata names another principal than its ``user_id``.
    """
    check_session_text(session)
    check_principal(session)


def check_version(version: int, name: str = "version") -> int:
    """``version`` if it is a commit number (an int >= 0).

    Raises:
        UsageError: it is not.
    """
    given = cast(object, version)
    if isinstance(given, bool) or not isinstance(given, int) or given < 0:
        raise UsageError(f"{name} must be an int >= 0, not {given!r}")
    return version


def check_point(at: int | str | None, before: str | None) -> None:
    """Refuse a point named twice or not as a version or an event id.

    Raises:
        UsageError: both are given, ``at`` is neither an int >= 0 nor a non-empty string, or
            ``before`` is not a non-empty string.
    """
    if at is not None and before is not None:
        raise UsageError("name the point with at or with before, not both")
    given = cast(object, at)
    if isinstance(given, bool) or not isinstance(given, int | str | None):
        raise UsageError(f"at must be a version (an int) or an event id, not {given!r}")
    if isinstance(given, int):
        check_version(given, "at")
    if isinstance(given, str) and not given:
        raise UsageError("at must be a non-empty event id")
    other = cast(object, before)
    if other is not None and (not isinstance(other, str) or not other):
        raise UsageError(f"before must be a non-empty event id, not {other!r}")


def check_owner(parent: Session, child: Session) -> None:
    """Refuse a fork for another owner than its parent's: a fork reads its parent's events as
    its own, encrypted (on a store with encryption) with the parent's owner's key, and an
    erasure of that owner erases the fork with the parent.

    Raises:
        UsageError: ``child.user_id`` is not ``parent.user_id``.
    """
    if child.user_id != parent.user_id:
        raise UsageError(
            f"a fork of session {parent.id!r} belongs to its owner {parent.user_id!r}, "
            f"not {child.user_id!r}"
        )
