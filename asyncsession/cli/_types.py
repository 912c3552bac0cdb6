"""Argument types: each checks one flag's value at parse time, so a bad value is a usage error."""

from __future__ import annotations

import argparse
from datetime import datetime

from ..events import EventType

__all__ = [
    "KNOWN_TYPES",
    "event_type",
    "instant",
    "non_negative_int",
    "positive_float",
    "positive_int",
]


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be ≥ {least}, not {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (argparse adds the flag: `argument --last: must be ≥ 1`)."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number of at least 0 (a version)."""
    return _whole(text, 0)


def positive_float(text: str) -> float:
    """A number of seconds greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text}")
    return value


KNOWN_TYPES = (
    EventType.USER,
    EventType.ASSISTANT,
    EventType.TOOL,
    EventType.SYSTEM,
    EventType.COMPACTION,
    EventType.REWIND,
)
"""The event types the library defines; `--type` takes them by name, in any case."""


def event_type(text: str) -> EventType:
    """An event type by name, any case: `user` is `USER`; a custom type by its full name with
    its prefix (`acme.audit` is `ACME.AUDIT`).

    A bare name that is not one of `KNOWN_TYPES` is refused: it is far more often a typo than a
    custom type, and a typo would otherwise show an empty log as if the session had none.
    """
    name = text.strip().upper()
    known = {kind.name: kind for kind in KNOWN_TYPES}
    if name in known:
        return known[name]
    if "." in name:
        try:
            return EventType(name)
        except ValueError:
            pass  # breaks the naming rule: the message below says the rule
    names = ", ".join(kind.name.lower() for kind in KNOWN_TYPES[:-1])
    raise argparse.ArgumentTypeError(
        f"unknown event type {text!r}: use {names} or {KNOWN_TYPES[-1].name.lower()} (any "
        "case), or a custom type by its full name with its prefix, e.g. ACME.AUDIT (letters, "
        "digits, '_' and '.', starting with a letter, at most 64 characters)"
    )


def instant(text: str) -> datetime:
    """An ISO-8601 instant with a time zone (`Z` or an offset)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        message = f"not an ISO-8601 instant like 2026-01-31T00:00:00Z: {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError("needs a time zone, e.g. 2026-01-31T00:00:00Z")
    return when
