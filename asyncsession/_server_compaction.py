"""A reply the server compacted during, stored with the archive of what its item covers.

With ``context_management`` on the Responses API, the server may compact the request's context
while it answers: the reply's output then holds a ``compaction`` item standing for every input
item before it, followed by the reply proper. The memory advisor stores such a reply as a
compaction of the session: one compare-and-swap that archives the events the request sent
(system messages aside), appends the reply and the ``COMPACTION`` record naming the server, on
the version read with the active view. Events another call stored meanwhile are not covered and
stay active. A lost compare-and-swap is read again and retried; after the last attempt the reply
is appended as any reply is (nothing archived), so it is never lost and nothing is half-written.

A turn stored with its reply (``store_question="with_reply"``) is committed the same way: its
events are appended in the compare-and-swap that archives what the reply's item covers, those
the item covers (the question, the rounds of a tool loop before the reply) written archived
already, and after the last lost attempt the turn is appended as it would have been without
the compaction.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

from .compaction_protocols import CompactionRequest, CompactionResult
from .events import EventType, SessionEvent
from .messages import AssistantMessage, Message
from .service import SessionService

__all__ = [
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "commit_compacted_reply",
    "commit_compacted_turn",
    "compacted_during",
    "covered_by_reply",
]

SERVER_COMPACTION_TRIGGER: Final = "context_management"
"""The ``trigger`` of the ``COMPACTION`` record a reply compacted by the server writes."""
SERVER_COMPACTION_STRATEGY: Final = "responses-server-compaction"
"""The ``strategy`` of that record."""
COMMIT_ATTEMPTS: Final = 3
"""How many compare-and-swaps a compacted reply tries before it is appended plainly."""


def compacted_during(message: Message) -> bool:
    """Whether ``message`` is a reply the server compacted during: a ``compaction`` item with
    the reply's output after it (a ``responses.compact`` item stands alone)."""
    if not isinstance(message, AssistantMessage):
        return False
    kinds = [item.get("type") for item in message.items]
    return "compaction" in kinds and kinds.index("compaction") < len(kinds) - 1


def covered_by_reply(sent: Iterable[SessionEvent]) -> frozenset[str]:
    """The ids among the events a request was built from that its compaction item covers:
    its messages, system messages aside (they are sent with every request)."""
    return frozenset(e.id for e in sent if e.is_message and e.type != EventType.SYSTEM)


def context_management(request: CompactionRequest) -> bool:
    """The trigger of a server compaction: it happened (the record names this function)."""
    return True


class _ArchiveCovered:
    """The strategy of a server compaction: archive what the item covers, append the new
    events (those the item covers archived already)."""

    __slots__ = ("__name__", "covered", "events", "ids")

    def __init__(self, events: Sequence[SessionEvent], covered: frozenset[str]) -> None:
        self.__name__ = SERVER_COMPACTION_STRATEGY  # the record's strategy
        self.events = tuple(events)
        self.ids = frozenset(e.id for e in self.events)
        self.covered = covered

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        if any(e.id in self.ids for e in request.events):  # stored already: a replay
            return CompactionResult.unchanged(request.events)
        archived = tuple(e for e in request.events if e.id in self.covered)
        kept = tuple(e for e in request.events if e.id not in self.covered)
        written = tuple(e.as_archived() if e.id in self.covered else e for e in self.events)
        return CompactionResult(compacted_events=(*kept, *written), archived_events=archived)


async def _commit(
    service: SessionService, events: Sequence[SessionEvent], covered: frozenset[str]
) -> CompactionResult | None:
    """Append ``events`` archiving the active events among ``covered``, in one versioned
    write. The result: applied, or not applied when some of the events were stored already (a
    replay); ``None`` when every attempt lost its compare-and-swap."""
    strategy = _ArchiveCovered(events, covered)
    for _ in range(COMMIT_ATTEMPTS):
        result = await service.compact(events[0].session_id, context_management, strategy)
        if result.applied:
            return result
        if result.error is None and any(e.id in strategy.ids for e in result.compacted_events):
            return result  # stored already
    return None


async def commit_compacted_reply(
    service: SessionService, reply: SessionEvent, covered: frozenset[str]
) -> SessionEvent:
    """Store ``reply`` archiving the active events among ``covered``, in one versioned write.

    Returns the reply as stored (tagged with the record's id when the compaction applied).
    """
    result = await _commit(service, [reply], covered)
    if result is None:
        await service.append_event(reply)
    elif result.applied:
        return next(e for e in result.summary_events if e.id == reply.id)
    return reply


async def commit_compacted_turn(
    service: SessionService, events: Sequence[SessionEvent], covered: frozenset[str]
) -> None:
    """Store a turn's ``events`` (its question first, a reply the server compacted among them)
    in one versioned write that archives the active events among ``covered``; the events in
    ``covered`` are written archived. When the compaction cannot apply, the events are
    appended plainly (those the session has already are skipped)."""
    if not events:
        return
    result = await _commit(service, events, covered)
    if result is None or not result.applied:
        await service.append_events(events[0].session_id, events)
