"""Starting a chat turn in one step where the store can: an optional capability.

A chat turn, as the session-memory advisor performs it, resolves the session (creating it on
the first turn), reads the window the model sees, appends the user's message and, after the
model call, appends the reply. `start_turn` does all but the last in one call: a store
that implements `TurnRepository` does them together (``MongoSessionRepository`` in the commit
that appends the events, which also returns the session; ``InMemorySessionRepository`` in one
atomic step); any other store gets the same result from the plain protocol, in separate reads
and writes. A store may register the ids passed as ``reserve_event_ids`` (the reply's id) ahead,
so the reply's later ``append_event`` needs no registration of its own. What each of these
costs on MongoDB is on the maintainers' MongoDB page.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, TypeGuard, runtime_checkable

from .._checks import require_many, require_object, require_repository, require_text, require_type
from ..events import Session, SessionEvent
from ..exceptions import AccessDenied, SessionNotFound, UsageError
from ..filters import EventFilter
from ._protocol import SessionRepository, SessionSnapshot

__all__ = ["TurnRepository", "check_creation", "start_turn", "supports_turns"]


@runtime_checkable
class TurnRepository(SessionRepository, Protocol):
    """A store that starts a turn (check, append, read) in one step."""

    async def start_turn(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        filter: EventFilter,
        *,
        user_id: str | None = None,
        reserve_event_ids: Sequence[str] = (),
        create: Session | None = None,
    ) -> SessionSnapshot:
        """Append ``events`` and return the window ``filter`` selects as it was before them.

        See `start_turn`.
        """
        ...


@runtime_checkable
class _StartsTurns(Protocol):
    """The one method that tells a `TurnRepository` from a plain one (a cheap runtime check)."""

    async def start_turn(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        filter: EventFilter,
        *,
        user_id: str | None = None,
        reserve_event_ids: Sequence[str] = (),
        create: Session | None = None,
    ) -> SessionSnapshot: ...


def supports_turns(repository: SessionRepository) -> TypeGuard[TurnRepository]:
    """Whether ``repository`` declares the `TurnRepository` capability (also through a wrapper
    that passes its optional capabilities through).

    Raises:
        UsageError: ``repository`` is ``None`` or a plain value (a string, a number).
    """
    require_object(repository, "repository", "a SessionRepository", methods=())
    return isinstance(repository, _StartsTurns)


def check_creation(session_id: str, user_id: str | None, create: Session | None) -> None:
    """Refuse a session to create that is not ``session_id``, or not ``user_id``'s.

    Raises:
        UsageError: it is not.
    """
    if create is None:
        return
    if create.id != session_id:
        raise UsageError(f"the session to create is {create.id!r}, not {session_id!r}")
    if user_id is not None and create.user_id != user_id:
        raise UsageError(f"the session to create belongs to {create.user_id!r}, not to {user_id!r}")


async def start_turn(
    repository: SessionRepository,
    session_id: str,
    events: Sequence[SessionEvent],
    filter: EventFilter,
    *,
    user_id: str | None = None,
    reserve_event_ids: Sequence[str] = (),
    create: Session | None = None,
) -> SessionSnapshot:
    """Check the session, append ``events`` (idempotently) and read the window before them.

    The snapshot's ``events`` are what ``filter`` selects from the log without this call's
    ``events`` (as if read just before the append); its ``version`` is the version right after
    the append, so an ``expected_version`` append of the reply succeeds only if nobody else wrote
    in between. ``reserve_event_ids`` are ids of events this process will append next (the
    reply): a store may register them now, so that append needs no registration of its own; an
    id reserved and never appended is harmless. ``create`` is the session to create when
    ``session_id`` does not exist (its id must be ``session_id``): the turn's events are then its
    first, and the window is empty. A session that exists is used as it is, whatever ``create``
    says.

    Raises:
        SessionNotFound: the session does not exist (and ``create`` is ``None``); nothing was
            written.
        AccessDenied: ``user_id`` is given and the session belongs to another user; nothing
            was written.
        EventIdConflict: an event id belongs to another session; nothing was written.
        UsageError: ``create`` has another id than ``session_id``, or another owner than
            ``user_id``; or an argument is not of its type.
    """
    require_text(session_id, "session_id")
    require_many(events, "events", "a list of events")
    require_type(filter, EventFilter, "filter", "an EventFilter")
    if supports_turns(repository):
        return await repository.start_turn(
            session_id,
            events,
            filter,
            user_id=user_id,
            reserve_event_ids=reserve_event_ids,
            create=create,
        )
    require_repository(repository, "repository")
    check_creation(session_id, user_id, create)
    snapshot = await repository.read_snapshot(session_id, filter)
    if snapshot is None and create is not None:
        if await repository.save_if_absent(create):
            await repository.append_events(session_id, events)
            version = await repository.get_event_version(session_id)
            return SessionSnapshot(session=create, version=version, events=())
        snapshot = await repository.read_snapshot(session_id, filter)  # created concurrently
    if snapshot is None:
        raise SessionNotFound(session_id)
    if user_id is not None and snapshot.session.user_id != user_id:
        raise AccessDenied(session_id, user_id)
    await repository.append_events(session_id, events)
    ids = {event.id for event in events}
    return SessionSnapshot(
        session=snapshot.session,
        version=await repository.get_event_version(session_id),
        events=tuple(event for event in snapshot.events if event.id not in ids),
    )
