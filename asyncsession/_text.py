"""Text a store can hold: every string of an event or a session encodes as UTF-8.

Python strings may hold lone surrogates (``"\\ud83d"``), which no UTF-8 store can keep: BSON
would rewrite them, JSON encoders fail. Every store checks at its boundary, before anything is
written, and refuses them with [`InvalidText`][asyncsession.exceptions.InvalidText].
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import cast

from pydantic import BaseModel

from .events import Session, SessionEvent
from .exceptions import InvalidText

__all__ = ["check_event_text", "check_session_text"]


def _bad(text: str) -> bool:
    if text.isascii():  # constant time in CPython: the common case costs nothing
        return False
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _walk(value: object, where: str) -> None:
    """Raise `InvalidText` for the first string under ``value`` that is not UTF-8 text."""
    if isinstance(value, str):
        if _bad(value):
            raise InvalidText(where, value)
    elif isinstance(value, Mapping):
        for key, item in cast(Mapping[object, object], value).items():
            if isinstance(key, str) and _bad(key):
                raise InvalidText(f"{where} (a key)", key)
            _walk(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(cast(list[object] | tuple[object, ...], value)):
            _walk(item, f"{where}[{index}]")
    elif isinstance(value, BaseModel):
        for name, item in vars(value).items():
            _walk(item, f"{where}.{name}")
        if value.__pydantic_extra__:
            _walk(value.__pydantic_extra__, f"{where} (extra)")


def check_event_text(event: SessionEvent) -> None:
    """Refuse an event with a string anywhere in it (id, message, payload, metadata, keys and
    values at any depth) that does not encode as UTF-8.

    Raises:
        InvalidText: such a string; ``where`` says which field holds it.
    """
    for name, value in vars(event).items():
        _walk(value, f"event {event.id!r}: {name}" if name != "id" else "event id")


def check_session_text(session: Session) -> None:
    """Refuse a session with a string (id, user id, metadata) that does not encode as UTF-8.

    Raises:
        InvalidText: such a string; ``where`` says which field holds it.
    """
    for name, value in vars(session).items():
        _walk(value, f"session {session.id!r}: {name}" if name != "id" else "session id")
