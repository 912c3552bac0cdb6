"""Events encoded for writing: their tail entries, and the documents of big events."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from ...events import SessionEvent
from ...exceptions import EventTooLarge
from ._codec import INLINE_LIMIT, Doc, body_of, bson_size, pack_entry
from ._drawn import stored_id
from ._layout import (
    ARCHIVED,
    COMPACTIONS,
    DATA,
    ID,
    INCARNATION,
    SEQ,
    SESSION_ID,
    SYNTHETIC,
    TIMESTAMP,
    TOKEN,
    TURN,
    TYPE,
)

__all__ = ["BATCH_INLINE_BUDGET", "Prepared", "prepare"]

BATCH_INLINE_BUDGET: Final = 1024 * 1024
"""The most body bytes one commit keeps inline in the tail; the rest go by reference."""


@dataclass(slots=True, kw_only=True)
class Prepared:
    """An event encoded for writing."""

    event: SessionEvent
    entry: Doc
    """Its tail entry (`pack_entry`); without its body when the body goes to the events
    collection."""
    document: Doc | None = None
    """For a big event: the events-collection document written before the commit."""


def prepare(session_id: str, events: Sequence[SessionEvent], max_size: int) -> list[Prepared]:
    """Encode a batch, checking every event against the document size limit.

    Raises:
        EventTooLarge: an event's document would exceed ``max_size``; nothing was written.
    """
    prepared: list[Prepared] = []
    inline_bytes = 0
    for event in events:
        data = body_of(event)
        document: Doc = {
            ID: stored_id(event.id),
            SESSION_ID: session_id,
            INCARNATION: "0" * 12,
            SEQ: 0,
            TIMESTAMP: event.timestamp,
            TYPE: event.type.name,
            SYNTHETIC: event.is_synthetic,
            ARCHIVED: event.archived,
            TURN: 0,
            COMPACTIONS: 0,
            TOKEN: "0" * 12,
            DATA: data,
        }
        size = bson_size(document)
        if size > max_size:
            raise EventTooLarge(event.id, size, max_size)
        body = len(data.encode())
        fields = (event.type.name, event.timestamp, event.is_synthetic, event.archived)
        if body > INLINE_LIMIT or inline_bytes + body > BATCH_INLINE_BUDGET:
            del document[INCARNATION], document[SEQ], document[TURN], document[COMPACTIONS]
            if not event.is_synthetic:
                del document[SYNTHETIC]  # stored only when true, as in `_event_document`
            entry = pack_entry(event.id, *fields, None)
            prepared.append(Prepared(event=event, entry=entry, document=document))
        else:
            inline_bytes += body
            prepared.append(Prepared(event=event, entry=pack_entry(event.id, *fields, data)))
    return prepared
