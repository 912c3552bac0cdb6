"""Encrypted content in the session stores: the keys a store uses, what a read can select without
them, and the in-memory store's reads of sealed events (`read_sealed`, `search_sealed`), which
take a `LogView` under the lock and decrypt outside it only what the read reaches. A text
search decrypts its candidates, at most `EncryptionOptions.max_search_candidates`."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast, overload

from bson.binary import Binary
from pymongo import AsyncMongoClient

from .._offload import content_json
from .._view import ReadLog
from ..encryption import EncryptionOptions, UserKeys
from ..events import EventType, SessionEvent
from ..exceptions import UsageError
from ..filters import EventFilter
from ..rewinds import RewindRecord

__all__ = [
    "LogView",
    "Sealed",
    "check_candidates",
    "keys_of",
    "may_match",
    "open_event",
    "read_sealed",
    "seal_event",
    "search_sealed",
]


def keys_of(
    encryption: EncryptionOptions | UserKeys | None, client: AsyncMongoClient[Any] | None
) -> UserKeys | None:
    """The user keys a store encrypts with: the ones given, or new ones on ``client``'s
    deployment (in this process without a client).

    Raises:
        UsageError: ``encryption`` is neither a setting nor user keys.
    """
    if encryption is None or isinstance(encryption, UserKeys):
        return encryption
    if not isinstance(cast(object, encryption), EncryptionOptions):
        raise UsageError(
            "encryption must be EncryptionOptions or UserKeys, "
            f"not {type(cast(object, encryption)).__name__}"
        )
    return UserKeys(encryption, client)


def may_match(filter: EventFilter, type: EventType, timestamp: datetime) -> bool:
    """Whether an event of this type and time can match ``filter``: its criteria on what stays
    in clear (types, times, the view's rule for custom events), and that a text search looks
    only at messages with text (never at tool results or custom events)."""
    message_type = type.message_type
    if filter.has_text_criteria and message_type in (None, "tool"):
        return False
    if filter.active_view and message_type is None and filter.event_types is None:
        return False
    if filter.from_ is not None and timestamp < filter.from_:
        return False
    if filter.to is not None and timestamp > filter.to:
        return False
    if filter.message_types is not None and message_type not in filter.message_types:
        return False
    return filter.event_types is None or type in filter.event_types


def check_candidates(count: int, keys: UserKeys, where: str) -> None:
    """Refuse a text search of encrypted content with more candidates than the setting allows.

    Raises:
        UsageError: ``count`` is over ``max_search_candidates``.
    """
    limit = keys.options.max_search_candidates
    if count > limit:
        raise UsageError(
            f"this text search of {where} would decrypt {count} events of encrypted content, "
            f"more than max_search_candidates ({limit}): narrow it by time (from_, to, since) "
            "or by message type"
        )


@dataclass(frozen=True, slots=True)
class Sealed:
    """An event of the in-memory store with its content encrypted."""

    id: str
    type: EventType
    timestamp: datetime
    content: Binary
    """The event's content as JSON (`asyncsession.repository._offload.content_json`),
    encrypted with the data key of the session's owner."""


async def seal_event(keys: UserKeys, user_id: str, event: SessionEvent) -> Sealed:
    """``event`` with its content encrypted for ``user_id``."""
    content = await keys.encrypt(user_id, content_json(event))
    return Sealed(id=event.id, type=event.type, timestamp=event.timestamp, content=content)


async def open_event(keys: UserKeys, user_id: str, session_id: str, sealed: Sealed) -> SessionEvent:
    """The event ``sealed`` holds.

    Raises:
        ContentErased: the data key it was encrypted with was deleted.
    """
    content: bytes = await keys.decrypt(user_id, sealed.content)
    fields: dict[str, Any] = json.loads(content)
    return SessionEvent.model_validate(
        {
            "id": sealed.id,
            "session_id": session_id,
            "timestamp": sealed.timestamp,
            "type": sealed.type,
            **fields,
        }
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class LogView:
    """A session's log as it was when taken under the store's lock: read it outside the lock.

    The log only grows, so its first ``count`` entries stay as they are.
    """

    session_id: str
    user_id: str
    entries: Sequence[SessionEvent | Sealed]
    count: int
    positions: Mapping[str, int]
    boundaries: Sequence[int]
    """The indices of its boundary events (compactions', rewinds'), ascending."""
    last_of: Callable[[int], int | None]
    """Commit number -> the index of its last event (see `asyncsession._view.ReadLog`)."""

    def read(self, events: Sequence[SessionEvent]) -> ReadLog:
        """The derivation over ``events``, this log's entries as events."""
        return ReadLog(events, self.positions, self.boundaries, self.last_of)


class _Closed(Exception):
    """A read reached an entry that is still encrypted."""

    def __init__(self, index: int) -> None:
        super().__init__(index)
        self.index = index


class _Opened(Sequence[SessionEvent]):
    """A log's entries, each one decrypted so far, or `_Closed` when it is not."""

    def __init__(self, log: LogView, opened: dict[int, SessionEvent]) -> None:
        self._log = log
        self._opened = opened

    def __len__(self) -> int:
        return self._log.count

    @overload
    def __getitem__(self, index: int) -> SessionEvent: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[SessionEvent]: ...
    def __getitem__(self, index: int | slice) -> SessionEvent | Sequence[SessionEvent]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(self._log.count))]
        if index < 0:
            index += self._log.count
        if not 0 <= index < self._log.count:
            raise IndexError(index)
        entry = self._log.entries[index]
        if isinstance(entry, SessionEvent):
            return entry
        opened = self._opened.get(index)
        if opened is None:
            raise _Closed(index)
        return opened

    def __iter__(self) -> Iterator[SessionEvent]:
        return (self[i] for i in range(self._log.count))


async def _open(
    keys: UserKeys, log: LogView, opened: dict[int, SessionEvent], indexes: range | list[int]
) -> None:
    for index in indexes:
        entry = log.entries[index]
        if index not in opened and isinstance(entry, Sealed):
            opened[index] = await open_event(keys, log.user_id, log.session_id, entry)


async def read_sealed(keys: UserKeys, log: LogView, filter: EventFilter) -> list[SessionEvent]:
    """What ``filter`` selects from ``log`` (no text criteria), decrypting only what the read
    reaches: the newest entries, more of them each time the read walks further back."""
    opened: dict[int, SessionEvent] = {}
    step = 16 if filter.last_n is None else 2 * filter.last_n + 2
    while True:
        try:
            return filter.read_backwards(log.read(_Opened(log, opened)))
        except _Closed as closed:
            await _open(keys, log, opened, range(max(0, closed.index - step + 1), closed.index + 1))
            step *= 2


async def search_sealed(
    keys: UserKeys, logs: Sequence[LogView], filter: EventFilter, where: str
) -> list[list[SessionEvent]]:
    """What a text search ``filter`` (unwindowed, or windowed for one log) matches in each of
    ``logs``: their candidates decrypted, at most ``max_search_candidates`` in all.

    Raises:
        UsageError: the logs hold more candidates than that.
    """
    chosen: list[list[int]] = []
    for log in logs:
        indexes: list[int] = []
        for index in range(log.count):
            entry = log.entries[index]
            if may_match(filter, entry.type, entry.timestamp):
                indexes.append(index)
        chosen.append(indexes)
    check_candidates(sum(len(indexes) for indexes in chosen), keys, where)
    found: list[list[SessionEvent]] = []
    for log, indexes in zip(logs, chosen, strict=True):
        opened: dict[int, SessionEvent] = {}
        # archived derives from the boundaries, and a rewind's from the event it went back to
        await _open(keys, log, opened, list(log.boundaries))
        held = {*indexes, *log.boundaries}
        for boundary in log.boundaries:
            event = opened[boundary] if boundary in opened else log.entries[boundary]
            target = _rewound_to(log, cast(SessionEvent, event))
            if target is not None:
                held.add(target)
        chosen_indexes = sorted(held)
        await _open(keys, log, opened, chosen_indexes)
        whole = _Opened(log, opened)
        events = [whole[index] for index in chosen_indexes]
        at = {index: k for k, index in enumerate(chosen_indexes)}
        part = ReadLog(
            events,
            {e.id: k for k, e in enumerate(events)},
            [at[b] for b in log.boundaries],
            functools.partial(_held, log.last_of, at),
        )
        found.append(filter.read_backwards(part))
    return found


def _rewound_to(log: LogView, event: SessionEvent) -> int | None:
    """The index of the last event before the point a ``REWIND`` event goes back to."""
    if event.type != EventType.REWIND:
        return None
    to = RewindRecord.from_event(event).to
    if to.event_id is not None:
        return log.positions.get(to.event_id)
    return log.last_of(to.version) if to.version > 0 else None


def _held(last_of: Callable[[int], int | None], at: Mapping[int, int], commit: int) -> int | None:
    """The index among the events held of the last event of ``commit`` (``None``: not held)."""
    index = last_of(commit)
    return None if index is None else at.get(index)
