"""What a MongoDB store keeps in process memory, bounded in bytes.

Three per-process caches sit beside the database, all of them LRU maps with a byte budget:

* the **event cache**: decoded events by ``(session, id, body, archived)``, so a read of a log
  it saw before decodes nothing again. Only bodies up to the inline limit (16 KiB) are kept; a
  larger event is decoded for its reader and forgotten. Every read gets its own copy of the
  event's containers (``metadata``, ``payload``, the message's dicts and lists), so a caller
  that changes what it got never changes what another caller gets;
* the **tail hints** and the **reservations** (see ``_hints``): a few small values per
  session or event id.

An entry's size is estimated from ``sys.getsizeof`` of its strings (the body counted twice: the
JSON text and the decoded event) plus a fixed overhead per entry. The budgets come from
`MongoSessionRepository(cache_bytes=...)`: the event cache gets it whole, the hints and the
reservations one sixteenth each.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from collections.abc import Iterable
from datetime import datetime
from typing import Final, Generic, TypeVar, cast

from pydantic import BaseModel

from ...events import SessionEvent
from ._codec import INLINE_LIMIT, decode_body

__all__ = [
    "DEFAULT_CACHE_BYTES",
    "ENTRY_OVERHEAD",
    "ByteLRU",
    "EventCache",
    "fresh",
    "hint_bytes",
]

DEFAULT_CACHE_BYTES: Final = 32 * 1024 * 1024
"""The event cache's default budget: 32 MiB (the hints and reservations get 2 MiB each)."""
ENTRY_OVERHEAD: Final = 400
"""Bytes counted per entry beyond its strings: the map's slot, the key tuple, the model."""

_K = TypeVar("_K")
_V = TypeVar("_V")


def hint_bytes(cache_bytes: int) -> int:
    """The budget of the tail hints and of the reservations, for a store's ``cache_bytes``."""
    return max(64 * 1024, cache_bytes // 16)


class ByteLRU(Generic[_K, _V]):
    """A least-recently-used map that holds at most ``max_bytes`` of (estimated) entries."""

    def __init__(self, max_bytes: int) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be >= 0")
        self.max_bytes = max_bytes
        self._entries: OrderedDict[_K, tuple[_V, int]] = OrderedDict()
        self._bytes = 0

    @property
    def bytes(self) -> int:
        """The estimated size of what is held."""
        return self._bytes

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: _K) -> bool:
        return key in self._entries

    def get(self, key: _K) -> _V | None:
        """The value, now the most recently used; ``None`` if absent."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self._entries.move_to_end(key)
        return entry[0]

    def put(self, key: _K, value: _V, size: int) -> None:
        """Hold ``value`` (an entry larger than the whole budget is not held), evicting the
        least recently used entries until the budget holds."""
        self.pop(key)
        if size > self.max_bytes:
            return
        self._entries[key] = (value, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, evicted) = self._entries.popitem(last=False)
            self._bytes -= evicted

    def pop(self, key: _K) -> _V | None:
        """Forget the key; its value, or ``None``."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return None
        self._bytes -= entry[1]
        return entry[0]


_ATOMIC: Final = frozenset({str, int, float, bool, type(None), datetime, bytes})


def fresh(value: object) -> object:
    """``value`` with new dicts and lists all the way down (strings and numbers are shared:
    they cannot change); models are copied with their containers renewed."""
    kind = type(value)
    if kind in _ATOMIC:
        return value
    if isinstance(value, dict):
        return {k: fresh(v) for k, v in cast(dict[str, object], value).items()}
    if isinstance(value, list):
        return [fresh(v) for v in cast(list[object], value)]
    if isinstance(value, tuple):
        items = cast(tuple[object, ...], value)
        return tuple(fresh(v) for v in items) if any(_mutable(v) for v in items) else items
    if isinstance(value, BaseModel):
        return _fresh_model(value)
    return value


def _fresh_model(value: BaseModel) -> BaseModel:
    """A copy of a (frozen) model with its containers renewed; the model itself if it holds
    none. The hot path of every cache hit, so the common fields are told apart by type."""
    changes: dict[str, object] | None = None
    fields: dict[str, object] = vars(value)
    for name, field in fields.items():
        kind: type = type(field)
        if kind in _ATOMIC or (kind is tuple and not field):
            continue
        if kind is dict and not field:
            renewed: object = {}
        elif _mutable(field):
            renewed = fresh(field)
        else:
            continue
        if changes is None:
            changes = {}
        changes[name] = renewed
    if changes is None:
        return value
    copy = value.__copy__()  # what ``model_copy`` does, without its checks
    vars(copy).update(changes)
    return copy


def _mutable(value: object) -> bool:
    kind = type(value)
    if kind in _ATOMIC:
        return False
    if isinstance(value, dict | list | BaseModel):
        return True
    if isinstance(value, tuple):
        return any(_mutable(v) for v in cast(tuple[object, ...], value))
    return False


def own(events: Iterable[SessionEvent]) -> list[SessionEvent]:
    """The caller's own copies of events `EventCache.event` returned (see `fresh`)."""
    return [cast(SessionEvent, fresh(event)) for event in events]


class EventCache:
    """Decoded events by ``(session, id, body, archived)``: committed bodies never change,
    flags do. Bounded in bytes; bodies over the inline limit are never held; every caller gets
    its own copy of an event's containers."""

    def __init__(self, max_bytes: int = DEFAULT_CACHE_BYTES) -> None:
        self._events: ByteLRU[tuple[str, str, str, bool], SessionEvent] = ByteLRU(max_bytes)

    @property
    def bytes(self) -> int:
        """The estimated size of the cached events."""
        return self._events.bytes

    def __len__(self) -> int:
        return len(self._events)

    def event(
        self,
        session_id: str,
        event_id: str,
        data: str,
        archived: bool,
        ts: datetime,
        type: str,
    ) -> SessionEvent:
        """The event with this body, flagged ``archived`` as given; ``ts`` and ``type`` are
        stored beside the body (see `body_of`). The result may be shared with the cache and
        other readers: whoever hands it out hands out `own` copies."""
        key = (session_id, event_id, data, archived)
        event = self._events.get(key)
        if event is None:
            raw = decode_body(data, type)
            raw.update(id=event_id, session_id=session_id, archived=archived)
            raw.setdefault("timestamp", ts)
            raw.setdefault("type", type)  # layout: a model field
            event = SessionEvent.model_validate(raw)
            if len(data) > INLINE_LIMIT:
                return event  # a large body: decoded for this reader only
            size = 2 * sys.getsizeof(data) + sys.getsizeof(event_id) + ENTRY_OVERHEAD
            self._events.put(key, event, size)
        return event
