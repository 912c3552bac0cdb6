"""Builders and the shared base of the contract kit: events, labels and a few store helpers.

Nothing here imports pytest, so these builders also serve the repository tests of this package.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ...compaction_protocols import CompactionRecord
from ...events import COMPACTION_SOURCE, SYNTHETIC, EventType, Session, SessionEvent, utc_now
from ...filters import EventFilter
from ...messages import AssistantMessage, Message, SystemMessage, UserMessage
from ...repository import SessionRepository, SessionSnapshot

__all__ = [
    "SHADOW_PROMPT",
    "ContractBase",
    "assistant",
    "boundary",
    "event",
    "label",
    "labels",
    "new_id",
    "summary_turn",
    "synthetic",
    "system",
    "user",
]

SHADOW_PROMPT = "Summarize the conversation we had so far."


def new_id(prefix: str = "s") -> str:
    """A fresh random id, so every test may share one store."""
    return f"{prefix}-{uuid.uuid4()}"


def event(session_id: str, message: Message, **values: Any) -> SessionEvent:
    """A message event of `session_id`."""
    return SessionEvent(session_id=session_id, message=message, **values)


def user(session_id: str, text: str, **values: Any) -> SessionEvent:
    """A user message event."""
    return event(session_id, UserMessage(text=text), **values)


def assistant(session_id: str, text: str, **values: Any) -> SessionEvent:
    """An assistant message event."""
    return event(session_id, AssistantMessage(text=text), **values)


def system(session_id: str, text: str) -> SessionEvent:
    """A stored system message event."""
    return event(session_id, SystemMessage(text=text))


def synthetic(session_id: str, message: Message, timestamp: datetime | None = None) -> SessionEvent:
    """A synthetic event, as compaction writes it."""
    return SessionEvent(
        session_id=session_id,
        message=message,
        timestamp=timestamp or utc_now(),
        metadata={SYNTHETIC: True, COMPACTION_SOURCE: "recursive-summarization"},
    )


def summary_turn(session_id: str, text: str) -> list[SessionEvent]:
    """A synthetic shadow prompt and summary sharing one timestamp."""
    now = utc_now()
    return [
        synthetic(session_id, UserMessage(text=SHADOW_PROMPT), now),
        synthetic(session_id, AssistantMessage(text=text), now),
    ]


def boundary(
    session_id: str, view: Sequence[SessionEvent | str], covered: Sequence[SessionEvent | str] = ()
) -> SessionEvent:
    """A ``COMPACTION`` event whose record names ``view`` (events or ids) as the active view."""
    ids = tuple(e if isinstance(e, str) else e.id for e in view)
    record = CompactionRecord(
        covered=tuple(e if isinstance(e, str) else e.id for e in covered), kept=ids, view=ids
    )
    return SessionEvent(
        session_id=session_id, type=EventType.COMPACTION, payload=record.to_payload()
    )


def label(e: SessionEvent) -> str:
    """`Σ?` for a synthetic user message, `Σ:<text>` for other synthetic events, else text."""
    if e.is_synthetic:
        return "Σ?" if e.type == EventType.USER else f"Σ:{e.text}"
    return str(e.text)


def labels(events: Sequence[SessionEvent]) -> list[str]:
    """The labels of events, in order."""
    return [label(e) for e in events]


class ContractBase:
    """The helpers every area of the contract shares; no tests of its own."""

    repo: SessionRepository
    """The store under test (the ``repository`` fixture's)."""

    async def new_session(self, user_id: str = "alice", **values: Any) -> Session:
        """Save a session with a random id."""
        session = Session(id=new_id(), user_id=user_id, **values)
        await self.repo.save(session)
        return session

    async def append(self, session_id: str, *texts: str) -> list[SessionEvent]:
        """Append user messages with these texts, one per call."""
        events = [user(session_id, text) for text in texts]
        for e in events:
            await self.repo.append_event(e)
        return events

    async def log(self, session_id: str) -> list[SessionEvent]:
        """Every event of the session, in log order."""
        return await self.repo.find_events(session_id, EventFilter.all())

    async def texts(self, session_id: str, filter: EventFilter | None = None) -> list[str]:
        """The labels of the events a read returns (the whole log by default)."""
        return labels(await self.repo.find_events(session_id, filter or EventFilter.all()))

    async def snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot:
        """The snapshot of a session that exists."""
        snapshot = await self.repo.read_snapshot(session_id, filter)
        assert snapshot is not None
        return snapshot

    async def compact(
        self,
        session_id: str,
        *,
        drop: Sequence[SessionEvent] = (),
        summaries: Sequence[SessionEvent] = (),
        before: SessionEvent | None = None,
    ) -> SessionEvent:
        """Append a compaction at the current version and require it to succeed: the active
        view without ``drop``, with ``summaries`` placed before ``before`` (first when
        ``None``). Returns its boundary."""
        snapshot = await self.snapshot(session_id, EventFilter.active())
        dropped = {e.id for e in drop}
        kept = [e for e in snapshot.events if e.id not in dropped]
        at = 0 if before is None else [e.id for e in kept].index(before.id)
        view = [*kept[:at], *summaries, *kept[at:]]
        edge = boundary(session_id, view, [e for e in snapshot.events if e.id in dropped])
        assert await self.repo.append_events(session_id, [*summaries, edge], snapshot.version)
        return edge
