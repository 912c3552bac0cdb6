"""The ids the store draws for its callers, and the form they take in the store's collections.

The store hands out ids of its own format (`new_drawn_id`: a version 8 UUID in canonical
text), which `is_drawn` tells from the version 4 UUIDs `SessionEvent` picks and from ids of
the caller's. Everywhere an id is a ``str``, as the caller sees it, except as the ``_id`` of a
document in the events collection, where most events of a long session are, and in the id
registry: there a drawn id is stored as the 16 bytes of its UUID (BSON binary, subtype 4), 20
bytes less than its text in each document and 16 less in each ``_id`` index entry. Every other
id, and every id in a session document's tail, is stored as its text. `stored_id` gives the
form to write and to query, `loaded_id` reads either form back (whatever the client's
``uuidRepresentation``).

Drawn ids have only ever been stored as text by unreleased development versions; collections
written by those are not looked up by drawn id.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, MutableMapping
from typing import Any, Final

from bson.binary import UUID_SUBTYPE, Binary

from ._layout import ID

__all__ = ["is_drawn", "loaded_id", "loaded_ids", "new_drawn_id", "stored_id", "stored_ids"]

_VERSION: Final = 8


def new_drawn_id() -> str:
    """A new random id in the store's own format: a UUID of version 8 (RFC 9562's custom
    version; 122 random bits, as in a version 4 one), in canonical (lower-case) text."""
    digits = uuid.uuid4().hex
    return str(uuid.UUID(hex=digits[:12] + "8" + digits[13:]))


def is_drawn(event_id: str) -> bool:
    """Whether ``event_id`` has the format of the ids the store hands out (see
    `new_drawn_id`). Only such ids are let go of by the registry once they are stored below the
    tail, and only they are looked up there when they register without a clash
    (``_ids``); an id of the caller's that happens to have the format just pays that
    lookup."""
    return len(event_id) == 36 and event_id[14] == "8" and event_id[8] == "-"


def stored_id(event_id: str) -> str | Binary:
    """The form of ``event_id`` in the events collection, to write and to match: the binary
    UUID of a drawn id in canonical text (so that `loaded_id` gives back the very same
    string), else the text itself."""
    if not is_drawn(event_id):
        return event_id
    try:
        value = uuid.UUID(event_id)
    except ValueError:
        return event_id
    if value.version != _VERSION or str(value) != event_id:
        return event_id
    return Binary(value.bytes, UUID_SUBTYPE)


def stored_ids(event_ids: Iterable[str]) -> list[str | Binary]:
    """`stored_id` of each id, in order."""
    return [stored_id(event_id) for event_id in event_ids]


def loaded_id(value: Any) -> str:
    """The id a stored ``_id`` stands for: the text, or the canonical text of a binary UUID
    (a ``Binary`` of subtype 4, or a ``uuid.UUID`` when the client decodes them)."""
    if isinstance(value, str):
        return value
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, Binary) and value.subtype == UUID_SUBTYPE:
        return str(uuid.UUID(bytes=bytes(value)))
    raise TypeError(f"not an event id: {value!r}")


def loaded_ids(docs: Iterable[MutableMapping[str, Any]]) -> None:
    """Turn the ``_id`` of each events-collection document (that has one) into the id it
    stands for, in place."""
    for doc in docs:
        if ID in doc:
            doc[ID] = loaded_id(doc[ID])
