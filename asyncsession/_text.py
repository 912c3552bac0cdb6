"""Text a store can hold: every string of an event or a session encodes as UTF-8.

Python strings may hold lone surrogates (``"\\ud83d"``), which no UTF-8 store can keep: BSON
would rewrite them, JSON encoders fail. Every store checks at its boundary, before anything is
written, and refuses them with a `UsageError` that says where the string is.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Final, cast

from pydantic import BaseModel

from .events import Session, SessionEvent
from .exceptions import UsageError

__all__ = ["check_event_text", "check_session_text"]


def _bad(text: str) -> bool:
    if text.isascii():  # constant time in CPython: the common case costs nothing
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


_ATOMIC: Final = frozenset({int, float, bool, type(None), datetime, bytes})
"""Types that hold no text: most fields of an event, skipped without a walk."""


def _find(value: object) -> tuple[list[str], str] | None:
    """The first string under ``value`` that is not UTF-8 text, with the path to it (innermost
    last); ``None`` if there is none. The path is only built for a bad string: checking an
    event is on every append's path."""
    kind = type(value)
    if kind is str:
        return ([], cast(str, value)) if _bad(cast(str, value)) else None
    if kind in _ATOMIC:
        return None
    if isinstance(value, str):
        return ([], value) if _bad(value) else None
    if isinstance(value, dict | Mapping):
        for key, item in cast(Mapping[object, object], value).items():
            if isinstance(key, str) and _bad(key):
                return ([" (a key)"], key)
            found = _find(item)
            if found is not None:
                found[0].insert(0, f"[{key!r}]")
                return found
    elif isinstance(value, list | tuple):
        for index, item in enumerate(cast(list[object] | tuple[object, ...], value)):
            found = _find(item)
            if found is not None:
                found[0].insert(0, f"[{index}]")
                return found
    elif isinstance(value, BaseModel):
        for name, item in vars(value).items():
            found = _find(item)
            if found is not None:
                found[0].insert(0, f".{name}")
                return found
        if value.__pydantic_extra__:
            found = _find(value.__pydantic_extra__)
            if found is not None:
                found[0].insert(0, " (extra)")
                return found
    return None


def _invalid(where: str, found: tuple[list[str], str]) -> UsageError:
    path, text = found
    index = next(i for i, c in enumerate(text) if 0xD800 <= ord(c) <= 0xDFFF)
    return UsageError(
        f"{where}{''.join(path)} holds a string that is not valid UTF-8 text: a lone surrogate "
        f"{text[index]!r} at index {index}; decode your input strictly or replace it"
    )


def check_event_text(event: SessionEvent) -> None:
    """Refuse an event with a string anywhere in it (id, message, payload, metadata, keys and
    values at any depth) that does not encode as UTF-8.

    Raises:
        UsageError: such a string; the message says which field holds it.
    """
    for name, value in vars(event).items():
        found = _find(value)
        if found is not None:
            raise _invalid(f"event {event.id!r}: {name}" if name != "id" else "event id", found)


def check_session_text(session: Session) -> None:
    """Refuse a session with a string (id, user id, metadata) that does not encode as UTF-8.

    Raises:
        UsageError: such a string; the message says which field holds it.
    """
    for name, value in vars(session).items():
        found = _find(value)
        if found is not None:
            where = f"session {session.id!r}: {name}" if name != "id" else "session id"
            raise _invalid(where, found)
