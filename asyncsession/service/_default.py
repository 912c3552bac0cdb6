"""`DefaultSessionService`: the standard service, over a `SessionRepository`.

It validates arguments, applies the service's policies (the default time to live, whether
system messages may be stored) and delegates to the repository.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, cast

from pydantic import JsonValue

from .._checks import (
    REPOSITORY_METHODS,
    require_event,
    require_message,
    require_object,
    require_type,
    user_input,
)
from .._compaction_pass import check_strategy, check_trigger, run_compaction
from .._lifecycle import ForwardsLoop
from .._text import check_event_text, check_session_text
from ..compaction_protocols import (
    CompactionResult,
    CompactionStrategy,
    TriggerLike,
)
from ..events import (
    DEFAULT_TIME_TO_LIVE,
    CreateSessionRequest,
    EventType,
    Session,
    SessionEvent,
    utc_now,
)
from ..exceptions import SessionExists, SessionNotFound, StorageError, UsageError
from ..filters import DEFAULT_PAGE_SIZE, EventFilter, MatchMode
from ..messages import Message, MessageType
from ..repository import Lease, SessionRepository, SessionSnapshot
from ..rewinds import RewindRecord
from ._protocol import SessionService

__all__ = ["DefaultSessionService"]

_SYSTEM_MESSAGES_DISABLED = (
    "Storing a system message in session {session_id!r} is disabled. System prompts are "
    "configuration, not conversation: send them with each request instead. To store them "
    "anyway (the latest one stays active, older ones are archived by compaction), build the "
    "service with allow_system_messages=True."
)


_REWIND_ATTEMPTS = 200
"""How many times a rewind reads the version and appends at it before it gives up (with a
growing random pause, at most 0.2 s, after each lost race)."""


def _require(value: str, what: str) -> str:
    given = cast(object, value)  # callers outside the type checker may pass anything
    if not isinstance(given, str) or not value.strip():
        raise UsageError(f"{what} must be a non-empty string")
    return value


def _filter(value: EventFilter | None, what: str = "filter") -> EventFilter:
    given = cast(object, value)  # callers outside the type checker may pass anything
    if given is None:
        return EventFilter.all()
    if not isinstance(given, EventFilter):
        shown = f"the class {given.__name__}" if isinstance(given, type) else repr(given)[:60]
        raise UsageError(
            f"{what} must be an EventFilter (EventFilter.all(), EventFilter.active(), "
            f"EventFilter.last_n(n), ...), not {shown}"
        )
    return given


class DefaultSessionService(ForwardsLoop, SessionService):
    """The standard ``SessionService`` over a repository.

    To change what one operation does (authorize, measure, log), subclass it, override that
    operation and call ``super()``.

    Args:
        repository: where sessions live.
        default_time_to_live: the lifetime of a session created without one (60 days).
        allow_system_messages: whether system messages may be stored (off: they are
            configuration and belong to each request).
        clock: the time source, for tests.
    """

    def __init__(
        self,
        repository: SessionRepository,
        *,
        default_time_to_live: timedelta = DEFAULT_TIME_TO_LIVE,
        allow_system_messages: bool = False,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        require_object(
            repository,
            "DefaultSessionService's repository",
            "a SessionRepository such as InMemorySessionRepository()",
            methods=REPOSITORY_METHODS,
        )
        require_type(default_time_to_live, timedelta, "default_time_to_live", "a timedelta")
        if default_time_to_live <= timedelta(0):
            raise UsageError("default_time_to_live must be positive")
        self.repository = repository
        """Where sessions live."""
        self.default_time_to_live = default_time_to_live
        """The lifetime of a session created without one."""
        self._allow_system_messages = allow_system_messages
        self._clock = clock

    @property
    def allow_system_messages(self) -> bool:
        """Whether system messages may be stored."""
        return self._allow_system_messages

    def _new_session(self, request: CreateSessionRequest) -> Session:
        now = self._clock()
        ttl = self.default_time_to_live if request.time_to_live is None else request.time_to_live
        try:
            expires_at = now + ttl  # a non-positive ttl: already expired, as in the reference
        except OverflowError:
            raise UsageError(f"time_to_live {ttl!r} reaches past the year 9999") from None
        values: dict[str, Any] = {
            "user_id": request.user_id,
            "created_at": now,
            "expires_at": expires_at,
            "metadata": dict(request.metadata),
        }
        if request.id is not None:
            values["id"] = request.id
        with user_input("the session to create"):
            session = Session(**values)
        check_session_text(session)  # refused here for every store, a user's own too
        return session

    async def create(self, request: CreateSessionRequest) -> Session:
        """Create a session from the request.

        Raises:
            SessionExists: a session with the request's id exists.
        """
        require_type(request, CreateSessionRequest, "request", "a CreateSessionRequest")
        session = self._new_session(request)
        if not await self.repository.save_if_absent(session):
            raise SessionExists(session.id)
        return session

    async def find_or_create(self, request: CreateSessionRequest) -> Session:
        """The session with ``request.id``, created if absent; a concurrent creator's wins."""
        require_type(request, CreateSessionRequest, "request", "a CreateSessionRequest")
        if request.id is not None:
            found = await self.repository.find_by_id(request.id)
            if found is not None:
                return found
        try:
            return await self.create(request)
        except SessionExists:
            assert request.id is not None
            found = await self.repository.find_by_id(request.id)
            if found is None:  # created and deleted in between: try once more
                return await self.create(request)
            return found

    async def find_by_id(self, session_id: str) -> Session | None:
        """The session, or ``None``."""
        return await self.repository.find_by_id(_require(session_id, "session_id"))

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        """Every session of the user."""
        return await self.repository.find_by_user_id(_require(user_id, "user_id"))

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        """At most ``limit`` sessions whose metadata holds ``value`` under the indexed key
        ``name``, oldest first (see
        [`SessionRepository.find_by_metadata`][asyncsession.repository.SessionRepository.find_by_metadata])."""
        return await self.repository.find_by_metadata(_require(name, "name"), value, limit=limit)

    async def delete(self, session_id: str) -> None:
        """Remove the session and all its events."""
        await self.repository.delete(_require(session_id, "session_id"))

    async def delete_expired_sessions(self, before: datetime | None = None) -> int:
        """Remove the sessions that expired before ``before`` (default: the clock's now)."""
        if before is not None and before.tzinfo is None:
            raise UsageError("before must be a timezone-aware datetime")
        return await self.repository.delete_expired_sessions(before or self._clock())

    async def append_event(self, event: SessionEvent) -> None:
        """Append one event; a replay of its id is a no-op.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: the id belongs to another session.
            UsageError: a system message while they are disabled.
        """
        await self.append_events(require_event(event, "event").session_id, [event])

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        """Append a batch as one commit; with ``expected_version``, only if nothing changed
        since; the commit carries ``lease`` (a commit without one ends any lease before it).

        Events are checked before the repository sees them (their text, and no system
        messages unless they are allowed), so a store of your own that checks nothing is safe.
        """
        if not events:
            _require(session_id, "session_id")
        if expected_version is not None and expected_version < 0:
            raise UsageError("expected_version must be >= 0")
        for event in events:
            if not isinstance(event, SessionEvent):
                require_event(event, "events[]")  # raises, naming what was passed
            if event.type is EventType.SYSTEM and not self._allow_system_messages:
                raise UsageError(_SYSTEM_MESSAGES_DISABLED.format(session_id=event.session_id))
            check_event_text(event)
        return await self.repository.append_events(
            session_id, events, expected_version, lease=lease
        )

    async def append_message(
        self,
        session_id: str,
        message: Message,
        *,
        event_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        """Wrap a message in a new event (now, a random id unless given), append it, return it."""
        require_message(message, "message")
        event = self._new_event(session_id, message, event_id, metadata)
        await self.append_event(event)
        return event

    async def append_messages(
        self,
        session_id: str,
        messages: Sequence[Message],
        *,
        event_ids: Sequence[str] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> list[SessionEvent]:
        """Wrap each message in a new event and append them all as one version; return them.

        The turn stored after the reply: the question and the answer as one version, both or
        neither, where two ``append_message`` calls are two versions. The question is then
        stored only once the reply is there, so a model call that fails leaves nothing behind;
        append the question first when it must survive such a failure.

        ``event_ids`` names the events (one per message), which makes a retry of the call a
        no-op; without them the ids are random UUIDs, and a retry with the returned events'
        ids is a no-op too. ``metadata`` goes on every event.

        Raises:
            SessionNotFound: the session does not exist.
            EventIdConflict: an id belongs to another session.
            UsageError: ``event_ids`` does not name each message once, or a system message
                while they are disabled.
        """
        _require(session_id, "session_id")
        if isinstance(cast(object, messages), str):
            raise UsageError("messages must be a sequence of messages, not a string")
        for message in messages:
            require_message(message, "messages[]")
        if event_ids is None:
            ids = [str(uuid.uuid4()) for _ in messages]
        else:
            ids = [_require(event_id, "event_ids[]") for event_id in event_ids]
            if len(ids) != len(messages) or len(set(ids)) != len(ids):
                raise UsageError(
                    f"event_ids must name each of the {len(messages)} messages once, "
                    f"got {len(ids)} ids ({len(set(ids))} distinct)"
                )
        events = [
            self._new_event(session_id, message, event_id, metadata)
            for message, event_id in zip(messages, ids, strict=True)
        ]
        await self.append_events(session_id, events)
        return events

    def _new_event(
        self,
        session_id: str,
        message: Message,
        event_id: str | None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        values: dict[str, Any] = {
            "session_id": _require(session_id, "session_id"),
            "message": message,
            "timestamp": self._clock(),
            "metadata": dict(metadata or {}),
        }
        if event_id is not None:
            values["id"] = event_id
        with user_input("the event to append"):
            return SessionEvent(**values)

    async def get_events(
        self, session_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """The matching events, oldest first; empty for an unknown session."""
        return await self.repository.find_events(
            _require(session_id, "session_id"),
            filter if isinstance(filter, EventFilter) else _filter(filter),
        )

    async def search_events(
        self,
        session_id: str,
        keywords: Sequence[str],
        *,
        match_mode: MatchMode = "any",
        message_types: Iterable[MessageType] | None = None,
        since: datetime | None = None,
        include_synthetic: bool = False,
        page: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> list[SessionEvent]:
        """One page of the session's message events that contain any (``match_mode="all"``:
        all) of ``keywords``, oldest first; empty for an unknown session (see
        [`EventFilter.keywords_search`][asyncsession.filters.EventFilter.keywords_search]).

        Archived events are searched too: recall finds what compaction took out of the view;
        the summaries compaction wrote only with ``include_synthetic``.

        Raises:
            UsageError: no keyword or over 20, one blank or over 200 characters, a bad mode,
                message type or page, or a naive ``since``.
        """
        search = EventFilter.keywords_search(
            keywords,
            match_mode,
            page,
            page_size,
            message_types=message_types,
            since=since,
            include_synthetic=include_synthetic,
        )
        return await self.repository.find_events(_require(session_id, "session_id"), search)

    async def get_messages(self, session_id: str) -> list[Message]:
        """Every message of the log, archived ones included."""
        events = await self.get_events(session_id, EventFilter.all())
        return [e.message for e in events if e.message is not None]

    async def get_active_messages(self, session_id: str) -> list[Message]:
        """The messages of the active view."""
        events = await self.get_events(session_id, EventFilter.active())
        return [e.message for e in events if e.message is not None]

    async def get_event_version(self, session_id: str) -> int:
        """The session's event-log version; 0 for an unknown session."""
        return await self.repository.get_event_version(_require(session_id, "session_id"))

    async def get_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        """The session, its version, its matching events and the newest commit's lease in one
        read; ``None`` if unknown."""
        return await self.repository.read_snapshot(
            _require(session_id, "session_id"),
            filter if isinstance(filter, EventFilter) else _filter(filter),
        )

    async def fork(
        self,
        session_id: str,
        *,
        at: int | str | None = None,
        before: str | None = None,
        fork_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> Session:
        """A new session (a *fork*) whose log begins with this one's up to a point, which it
        reads as its own first events without a copy; both sessions stay writable.

        The point is the end of version ``at``, just after the event ``at`` (an event id), just
        before the event ``before`` (to edit that message: fork before it, then append the new
        one), or, with neither, the session's version now. The fork belongs to the same user
        (and, on a store with encryption, stays under that user's key), has the service's
        default time to live, the parent's metadata unless ``metadata`` is given, and names
        its parent and point in ``forked_from``. Its version starts at the point's version.
        Give ``fork_id`` to make a retry (after a lost reply) return the same fork.

        Raises:
            SessionNotFound: the session does not exist.
            SessionExists: ``fork_id`` is another session's.
            UsageError: both ``at`` and ``before`` are given, or the point is not in the log.
        """
        session_id = _require(session_id, "session_id")
        parent = await self.repository.find_by_id(session_id)
        if parent is None:
            raise SessionNotFound(session_id)
        request = CreateSessionRequest(
            id=fork_id,
            user_id=parent.user_id,
            metadata=dict(parent.metadata if metadata is None else metadata),
        )
        return await self.repository.fork(
            session_id, self._new_session(request), at=at, before=before
        )

    async def rewind(
        self,
        session_id: str,
        *,
        to: int | str | None = None,
        before: str | None = None,
        event_id: str | None = None,
    ) -> RewindRecord:
        """Make the active view the one the log had at a point: one append of a ``REWIND``
        boundary at the session's version (a lost compare-and-swap reads again).

        The point is the end of version ``to``, just after the event ``to`` (an event id), or
        just before the event ``before`` (to edit that message: rewind before it, then append
        the new one). The events after the point leave the active view and the windows (they
        read ``archived=True``) but stay in the log, searchable; a later rewind forward brings
        them back: ``rewind(session_id, to=record.from_version)`` undoes this one. Compactions
        compose with it (the newest boundary decides), and the session's metadata is not
        touched. Give ``event_id`` (say, fixed by a request id) to make a retry a replay.

        Returns:
            the record the rewind appended (``from_version``: the version it was appended at).

        Raises:
            SessionNotFound: the session does not exist.
            UsageError: neither or both of ``to`` and ``before`` are given, or the point is not
                in the log.
            StorageError: concurrent writers kept moving the version for 200 attempts.
        """
        session_id = _require(session_id, "session_id")
        if (to is None) == (before is None):
            raise UsageError("name the point to rewind to with to or with before (one of them)")
        fixed = event_id if event_id is not None else str(uuid.uuid4())
        for attempt in range(_REWIND_ATTEMPTS):
            located = await self.repository.locate(session_id, at=to, before=before)
            if located is None:
                raise SessionNotFound(session_id)
            point, version = located
            event = RewindRecord(to=point, from_version=version).to_event(
                session_id, event_id=fixed
            )
            if await self.repository.append_events(session_id, [event], version):
                return RewindRecord.from_event(event)
            # another writer appended first: wait out its burst a little longer each time
            await asyncio.sleep(random.uniform(0, min(0.2, 0.005 * 2**attempt)))
        raise StorageError(
            f"could not rewind session {session_id!r}: its version moved on at every one of "
            f"{_REWIND_ATTEMPTS} attempts"
        )

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        """Take (or renew) the lease on commit ``version`` (0: the session itself); ``False``
        while another holder's lease runs (see
        [`SessionRepository.acquire_lease`][asyncsession.repository.SessionRepository.acquire_lease])."""
        require_type(lease, Lease, "lease", "a Lease")
        return await self.repository.acquire_lease(
            _require(session_id, "session_id"), version, lease
        )

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        """End the lease on commit ``version`` if ``holder`` holds it."""
        await self.repository.release_lease(_require(session_id, "session_id"), version, holder)

    async def find_events_by_user_id(
        self, user_id: str, filter: EventFilter | None = None
    ) -> list[SessionEvent]:
        """Matching events across all the user's sessions, by timestamp."""
        return await self.repository.find_events_by_user_id(
            _require(user_id, "user_id"),
            filter if isinstance(filter, EventFilter) else _filter(filter),
        )

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact the session if ``trigger`` fires (see ``asyncsession.compaction``).

        Reads the version with the active events (one ``read_snapshot``); asks the trigger;
        runs the strategy; appends the result as one commit (its summaries, then the
        ``COMPACTION`` boundary naming the new view) at that version.
        A lost compare-and-swap is a silent no-op (the next turn tries again): the result then
        has ``applied=False``.

        Raises:
            SessionNotFound: the session does not exist.
            UsageError: ``trigger`` or ``strategy`` is not one (for example ``None``).
        """
        return await run_compaction(
            self.repository,
            _require(session_id, "session_id"),
            check_trigger(trigger),
            check_strategy(strategy),
        )
