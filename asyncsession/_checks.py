"""Argument checks at public entry points: a wrong type is a `UsageError` in our words.

Each helper raises `UsageError` naming the argument and what was expected, so a mistake is
answered where it is made, not as an ``AttributeError`` or a pydantic error far from the call.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import TypeVar

from pydantic import ValidationError

from .events import SessionEvent
from .exceptions import UsageError
from .messages import AssistantMessage, SystemMessage, ToolResponseMessage, UserMessage

_T = TypeVar("_T")


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    return f"{type(value).__name__} {value!r}"[:80]


def require_type(
    value: _T, types: type | tuple[type, ...], name: str, expected: str, *, hint: str = ""
) -> _T:
    """``value`` if it is an instance of ``types``; otherwise a `UsageError` naming ``name``."""
    if not isinstance(value, types):
        raise UsageError(f"{name} must be {expected}, not {_kind(value)}{hint}")
    return value


def require_text(value: _T, name: str) -> _T:
    """``value`` if it is a string (text); otherwise a `UsageError` naming ``name``."""
    return require_type(value, str, name, "a string")


_MESSAGES = (UserMessage, AssistantMessage, SystemMessage, ToolResponseMessage)

REPOSITORY_METHODS = ("find_by_id", "save_if_absent", "append_event", "find_events")
"""What a session repository must have, checked where one is passed."""
SERVICE_METHODS = ("create", "find_by_id", "append_event", "get_events")
"""What a session service must have, checked where one is passed."""


def require_message(value: _T, name: str) -> _T:
    """``value`` if it is one of our messages; a string gets the hint to wrap it."""
    hint = " (wrap text in a message: UserMessage(text=...))" if isinstance(value, str) else ""
    return require_type(value, _MESSAGES, name, "a message such as UserMessage", hint=hint)


def require_event(value: _T, name: str) -> _T:
    """``value`` if it is a `SessionEvent`."""
    return require_type(value, SessionEvent, name, "a SessionEvent")


def require_object(value: _T, name: str, expected: str, *, methods: tuple[str, ...]) -> _T:
    """``value`` if it has the ``methods`` of the protocol ``expected`` names.

    Refuses ``None`` and plain values (a string, a number), which users pass by mistake for a
    repository, a service or a client: they would otherwise fail later with an
    ``AttributeError``.
    """
    if isinstance(value, (str, bytes, int, float)) or value is None:
        raise UsageError(f"{name} must be {expected}, not {_kind(value)}")
    missing = [method for method in methods if not callable(getattr(value, method, None))]
    if missing:
        raise UsageError(
            f"{name} must be {expected}, not {_kind(value)} (it has no {', '.join(missing)})"
        )
    return value


@contextmanager
def user_input(what: str) -> Generator[None]:
    """Turn pydantic's verdict on values a user passed into a `UsageError`, chained to it."""
    try:
        yield
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {"msg": str(exc)}
        raise UsageError(f"{what}: {first['msg']}") from exc
