"""A reply the server compacted during, stored with the archive of what its item covers.

With ``context_management`` on the Responses API, the server may compact the request's context
while it answers: the reply's output then holds a ``compaction`` item standing for every input
item before it, followed by the reply proper. The memory advisor stores such a reply as a
compaction of the session: one compare-and-swap that archives the events the request sent
(system messages aside), appends the reply and the ``COMPACTION`` record naming the server, on
the version read with the active view. Events another call stored meanwhile are not covered and
stay active. A lost compare-and-swap is read again and retried; after the last attempt the reply
is appended as any reply is (nothing archived), so it is never lost and nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from .compaction_protocols import CompactionRequest, CompactionResult
from .events import EventType, SessionEvent
from .messages import AssistantMessage, Message
from .service import SessionService

__all__ = [
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "commit_compacted_reply",
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
    """The strategy of a server compaction: archive what the item covers, append the reply."""

    __slots__ = ("__name__", "covered", "reply")

    def __init__(self, reply: SessionEvent, covered: frozenset[str]) -> None:
        self.__name__ = SERVER_COMPACTION_STRATEGY  # the record's strategy
        self.reply = reply
        self.covered = covered

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        if any(e.id == self.reply.id for e in request.events):  # stored already: a replay
            return CompactionResult.unchanged(request.events)
        archived = tuple(e for e in request.events if e.id in self.covered)
        kept = tuple(e for e in request.events if e.id not in self.covered)
        return CompactionResult(compacted_events=(*kept, self.reply), archived_events=archived)


async def commit_compacted_reply(
    service: SessionService, reply: SessionEvent, covered: frozenset[str]
) -> SessionEvent:
    """Store ``reply`` archiving the active events among ``covered``, in one versioned write.

    Returns the reply as stored (tagged with the record's id when the compaction applied).
    """
    strategy = _ArchiveCovered(reply, covered)
    for _ in range(COMMIT_ATTEMPTS):
        result = await service.compact(reply.session_id, context_management, strategy)
        if result.applied:
            return next(e for e in result.summary_events if e.id == reply.id)
        if result.error is None and any(e.id == reply.id for e in result.compacted_events):
            return reply  # already stored
    await service.append_event(reply)
    return reply
