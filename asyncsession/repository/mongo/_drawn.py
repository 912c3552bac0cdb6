"""The ids the store draws for its callers: their format, the pool, and what is registered ahead.

**Format.** The store hands out ids of its own format (`new_drawn_id`: a version 8 UUID in
canonical text), which `is_drawn` tells from the version 4 UUIDs `SessionEvent` picks and from
ids of the caller's. Everywhere an id is a ``str``, as the caller sees it, except as the ``_id``
of a document in the events collection, where most events of a long session are, and in the id
registry: there a drawn id is stored as the 16 bytes of its UUID (BSON binary, subtype 4), 20
bytes less than its text in each document and 16 less in each ``_id`` index entry. Every other
id, and every id in a session document's tail, is stored as its text. `stored_id` gives the
form to write and to query, `loaded_id` reads either form back (whatever the client's
``uuidRepresentation``). Drawn ids have only ever been stored as text by unreleased development
versions; collections written by those are not looked up by drawn id.

**Pool** (`IdPool`):
An append of an id the caller chose first registers it (see `_ids`), which costs a round
trip. For the ids it hands out itself, the store does that ahead: when a session's pool is
empty, the id it hands out is a fresh UUID, and the append that uses it registers the next few
ids in the same ``insert_many`` as its own (the ``reserve_ids`` of `Committer.append`). Those
ids are then in the process's `Reservations`, so their appends are a single commit each.

The pool grows from 2 ids (a turn: question and reply) to `POOL_MAX` as a session keeps
appending in this process, so a short session leaves at most a few registrations unused; they
are the session's, and deleting it removes them. Nothing here is needed for correctness: an
id whose reservation the process forgot is registered again by its append, which then adopts
the registration (see `IdRegistry.reserve`).

**Registered ahead** (`Reservations`): ids this process registered before their append (a
turn's reply ids, the pool's refills), each with the token it is registered under.
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterable, Mapping, MutableMapping, Sequence
from typing import Any, Final

from bson.binary import UUID_SUBTYPE, Binary

from ._cache import DEFAULT_CACHE_BYTES, ENTRY_OVERHEAD, ByteLRU, hint_bytes
from ._codec import new_token
from ._layout import ID

__all__ = [
    "POOL_MAX",
    "IdPool",
    "Reservations",
    "is_drawn",
    "loaded_id",
    "loaded_ids",
    "new_drawn_id",
    "stored_id",
    "stored_ids",
    "write_tokens",
]

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


POOL_MAX: Final = 16
"""The most ids one refill registers ahead for a session."""
_FIRST: Final = 2
_DRAWN_MAX: Final = 64
"""The most ids drawn from an empty pool (and not yet appended) a session's record keeps."""


class IdPool:
    """Per session: ids registered ahead and ready to hand out, and the ids whose append
    should register the next refill."""

    def __init__(self, max_bytes: int) -> None:
        self._ready: ByteLRU[str, tuple[str, ...]] = ByteLRU(max_bytes)
        # per session: the ids drawn from its empty pool and not yet appended, and the size
        # of the refill their append registers
        self._refill: ByteLRU[str, tuple[tuple[str, ...], int]] = ByteLRU(max_bytes)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._ready.bytes + self._refill.bytes

    def draw(self, session_id: str) -> str:
        """A ready id, or a fresh one whose append refills the pool."""
        ready = self._ready.pop(session_id) or ()
        if ready:
            first, *rest = ready
            if rest:
                self._put_ready(session_id, tuple(rest))
            return first
        event_id = new_drawn_id()
        last = self._refill.pop(session_id)
        size = _FIRST if last is None else min(POOL_MAX, last[1] * 2)
        drawn = (*(() if last is None else last[0][-_DRAWN_MAX + 1 :]), event_id)
        self._put_refill(session_id, drawn, size)
        return event_id

    def _put_refill(self, session_id: str, drawn: tuple[str, ...], size: int) -> None:
        cost = sys.getsizeof(session_id) + sum(map(sys.getsizeof, drawn)) + 2 * ENTRY_OVERHEAD
        self._refill.put(session_id, (drawn, size), cost)

    def refill_for(self, session_id: str, event_ids: list[str]) -> list[str]:
        """The ids to register ahead with an append of ``event_ids`` (none unless one of them
        was drawn from an empty pool)."""
        pending = self._refill.get(session_id)
        if pending is None or not set(pending[0]).intersection(event_ids):
            return []
        return [new_drawn_id() for _ in range(pending[1])]

    def spare(self, session_id: str) -> bool:
        """Whether the next id drawn for ``session_id`` needs no refill: ids are ready, or the
        session's appends never drew (so they register ids of the caller's anyway)."""
        return session_id in self._ready or session_id not in self._refill

    def minted(self, session_id: str, event_ids: list[str], refill: list[str]) -> list[str]:
        """The ids among ``event_ids`` and ``refill`` that this pool made up and that nobody
        but this append can have used: the refill, and the id drawn from an empty pool."""
        if not refill:
            return []
        pending = self._refill.get(session_id)
        drawn = [] if pending is None else [i for i in pending[0] if i in event_ids]
        return [*refill, *drawn]

    def refilled(self, session_id: str, event_ids: list[str]) -> None:
        """Note that ``event_ids`` are registered for ``session_id`` and ready to hand out."""
        pending = self._refill.get(session_id)
        if pending is not None:  # done: keep only the size, which the next refill doubles
            self._put_refill(session_id, (), pending[1])
        held = self._ready.pop(session_id) or ()
        self._put_ready(session_id, (*held, *event_ids))

    def _put_ready(self, session_id: str, ids: tuple[str, ...]) -> None:
        size = sys.getsizeof(session_id) + sum(sys.getsizeof(i) for i in ids) + ENTRY_OVERHEAD
        self._ready.put(session_id, ids, size)


class Reservations:
    """Event ids this process registered ahead of their append (``start_turn``'s reply ids)."""

    def __init__(self, max_bytes: int = hint_bytes(DEFAULT_CACHE_BYTES)) -> None:
        self._tokens: ByteLRU[tuple[str, str], str] = ByteLRU(max_bytes)

    def add(self, session_id: str, event_ids: Sequence[str], token: str) -> None:
        """Remember that ``event_ids`` are registered for ``session_id`` under ``token``."""
        for event_id in event_ids:
            size = sys.getsizeof(session_id) + sys.getsizeof(event_id) + ENTRY_OVERHEAD
            self._tokens.put((session_id, event_id), token, size)

    def holds(self, session_id: str, event_ids: Sequence[str]) -> bool:
        """Whether any of ``event_ids`` is registered ahead for ``session_id``."""
        return any((session_id, event_id) in self._tokens for event_id in event_ids)

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._tokens.bytes

    def take(self, session_id: str, event_ids: Sequence[str]) -> dict[str, str]:
        """The reserved ones among ``event_ids``, each with the token it is registered under
        (forgotten here)."""
        held: dict[str, str] = {}
        for event_id in event_ids:
            token = self._tokens.pop((session_id, event_id))
            if token is not None:
                held[event_id] = token
        return held


def write_tokens(held: Mapping[str, str]) -> tuple[str, list[str]]:
    """The tokens of a write whose ``held`` ids (id -> token) were registered ahead: the one it
    registers its other ids under (one of the held tokens, else a new one), and the other held
    tokens, which its commit is guarded against a fence on too."""
    tokens = sorted(set(held.values())) or [new_token()]
    return tokens[0], tokens[1:]
