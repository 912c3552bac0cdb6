"""Compaction in a turn: a reply the server compacted during, stored as a compaction of the
session, and compaction once the turn is complete.

**Server compaction.** With ``context_management`` on the Responses API the server may compact
a request's context while it answers: the reply's output then starts with a ``compaction`` item
standing for every input item the request sent. The turn stores that as a compaction of the
session, in its last commit: the turn's events, then a ``COMPACTION`` boundary whose view is the
compacted reply and what follows it in the turn, then every active event the request did not
send (a message another caller stored meanwhile stays in the view, and is sent next time). The
boundary covers exactly what the request sent. The commit is appended at the version the turn
knows when it read the whole active view (no command more than a plain reply), else at the
version of a read of it; a lost compare-and-swap is read again and retried, and after the last
attempt the turn's events are appended plainly, nothing covered, so nothing is lost or
half-written.

**After the turn.** Once the final reply asks for no tools, the turn compacts inline with
``(trigger, strategy)`` or hands the session to a background compactor; a failure is logged and
the call still succeeds.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Collection, Sequence
from typing import Final

from .._compaction_pass import compaction_commit
from .._shield import shielded
from ..compaction_protocols import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    TriggerLike,
    should_compact,
)
from ..events import Session, SessionEvent
from ..filters import EventFilter
from ..service import SessionService
from .log import ACTIVE_VIEW, Compaction

__all__ = [
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "commit_compacted",
    "compact_after_turn",
    "known_active_view",
]

logger = logging.getLogger("asyncsession.turn")


SERVER_COMPACTION_TRIGGER: Final = "context_management"
"""The ``trigger`` of the ``COMPACTION`` record of a reply the server compacted during."""

SERVER_COMPACTION_STRATEGY: Final = "responses-server-compaction"
"""The ``strategy`` of that record."""

COMMIT_ATTEMPTS: Final = 3
"""How many compare-and-swaps a compacted turn tries before its events are appended plainly."""


class _Named:
    """Names a role in a compaction record (the record stores the ``__name__``)."""

    __slots__ = ("__name__",)

    def __init__(self, name: str) -> None:
        self.__name__ = name


async def commit_compacted(
    service: SessionService,
    session_id: str,
    turn: Sequence[SessionEvent],
    stored: Collection[str],
    summary: str,
    covered: Collection[str],
    known: tuple[Sequence[SessionEvent], int] | None = None,
) -> bool:
    """Write the turn's last commit as a compaction; ``False`` when it could not apply (the
    caller then appends plainly what ``turn`` still lacks).

    Args:
        turn: the turn's events in order, those already stored (``stored``) included.
        stored: the ids among ``turn`` already committed.
        summary: the id of the compacted reply: the view starts there.
        covered: the ids the compacted request was built from.
        known: the active view as the turn knows it (its read and its own commits) and the
            version it stands at, when the turn read the whole active view: the first attempt
            commits at that version without reading again.
    """
    start = next(i for i, e in enumerate(turn) if e.id == summary)
    mine = {e.id for e in turn}
    early = [e.as_archived() for e in turn[:start] if e.id not in stored and e.id in covered]
    trigger, strategy = _Named(SERVER_COMPACTION_TRIGGER), _Named(SERVER_COMPACTION_STRATEGY)
    for _ in range(COMMIT_ATTEMPTS):
        if known is not None:
            (active, version), known = known, None
        else:
            snapshot = await service.get_snapshot(session_id, EventFilter.active())
            if snapshot is None:
                return False
            active, version = snapshot.events, snapshot.version
        others = [e for e in active if e.id not in covered and e.id not in mine]
        view = [*early, *turn[start:], *others]
        result = CompactionResult(
            compacted_events=tuple(view),
            archived_events=tuple(e for e in active if e.id in covered),
        )
        commit = compaction_commit(session_id, active, result, trigger, strategy)
        if commit is None:
            return False
        if await shielded(service.append_events(session_id, commit, version)):
            return True
    return False


def known_active_view(
    read_filter: EventFilter, events: Sequence[SessionEvent], appended: Sequence[SessionEvent]
) -> list[SessionEvent] | None:
    """The active view as far as the turn knows it, or ``None`` when its read was partial.

    Only a read of the whole active view (``EventFilter.active()``), plus what the turn
    appended, is the active view; any other filter or window leaves events out.
    """
    if read_filter != ACTIVE_VIEW:
        return None
    seen = {event.id for event in events}
    return [*events, *(event for event in appended if event.id not in seen)]


async def compact_after_turn(
    service: SessionService,
    session: Session,
    compaction: Compaction,
    known_events: Sequence[SessionEvent] | None,
) -> None:
    """Compact (or hand to the compactor) once a turn is complete; failures are logged.

    When the turn knows the whole active view, the trigger is asked about it first, so a quiet
    trigger reads and writes nothing. The service asks it again on what it reads, so a trigger
    that fires here but not on the fresh read is harmless.
    """
    trigger: TriggerLike | None
    strategy: CompactionStrategy | None
    if isinstance(compaction, tuple):
        trigger, strategy = compaction
        submitter = None
    else:
        trigger, strategy, submitter = compaction.trigger, None, compaction
    try:
        request = None if known_events is None else CompactionRequest.of(session, known_events)
        if (
            trigger is not None
            and request is not None
            and not await should_compact(trigger, request)
        ):
            return
        if submitter is not None:
            submitted = submitter.submit(session.id)
            if inspect.isawaitable(submitted):
                await submitted
            return
        if trigger is not None and strategy is not None:
            await service.compact(session.id, trigger, strategy)
    except Exception:
        # The chat call succeeded and its turn is stored; the next turn tries again.
        logger.warning("Compaction of session %r failed", session.id, exc_info=True)
