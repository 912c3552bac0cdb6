"""Sessions found by indexed metadata: the keys a store indexes and the checks every store makes.

A store indexes the well-known keys of
[`Session.metadata`][asyncsession.events.Session.metadata] and the keys its application declared
when it built the store. Only string values are indexed. The principal is the session's
``user_id``, so a lookup by it is a lookup by owner, and a session whose metadata names another
principal is refused.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final, cast

from ..events import PRINCIPAL_NAME, WELL_KNOWN_KEYS, Session
from ..exceptions import UsageError

__all__ = [
    "DEFAULT_LIMIT",
    "check_lookup",
    "check_principal",
    "index_entries",
    "index_entry",
    "indexed_keys",
]

DEFAULT_LIMIT: Final = 100
"""How many sessions a ``find_by_metadata`` returns unless told otherwise."""
_SEPARATOR: Final = "\x00"


def indexed_keys(declared: Iterable[str]) -> frozenset[str]:
    """The keys a store indexes: the well-known attributes and ``declared``.

    Raises:
        UsageError: a declared key is not a non-empty string, or holds a NUL character.
    """
    given = cast(object, declared)
    if isinstance(given, str):
        raise UsageError("indexed_metadata_keys must be a collection of keys, not one string")
    keys = set(WELL_KNOWN_KEYS)
    for key in declared:
        if not isinstance(cast(object, key), str) or not key or _SEPARATOR in key:
            raise UsageError(f"an indexed metadata key must be a non-empty string, not {key!r}")
        keys.add(key)
    return frozenset(keys)


def index_entry(name: str, value: str) -> str:
    """The one string that stands for ``value`` under ``name`` in an index."""
    return f"{name}{_SEPARATOR}{value}"


def index_entries(session: Session, keys: frozenset[str]) -> list[str]:
    """The index entries of the session's metadata: one per indexed key with a string value
    (the principal is served by ``user_id`` and has none), sorted."""
    return sorted(
        index_entry(key, value)
        for key, value in session.metadata.items()
        if key in keys and key != PRINCIPAL_NAME and isinstance(value, str)
    )


def check_principal(session: Session) -> None:
    """Refuse a session whose metadata names another principal than its ``user_id``.

    Raises:
        UsageError: ``metadata[PRINCIPAL_NAME]`` is not the ``user_id``.
    """
    principal = session.metadata.get(PRINCIPAL_NAME)
    if principal is not None and principal != session.user_id:
        raise UsageError(
            f"session {session.id!r}: metadata {PRINCIPAL_NAME!r} is "
            f"{principal!r}, not its user_id {session.user_id!r}"
        )


def check_lookup(name: str, value: str, limit: int, keys: frozenset[str]) -> None:
    """Refuse a lookup by a key the store does not index, or with a bad value or limit.

    Raises:
        UsageError: ``name`` is not indexed, ``value`` is not a string, or ``limit`` < 1.
    """
    if not isinstance(cast(object, name), str) or name not in keys:
        declared = ", ".join(sorted(keys))
        raise UsageError(
            f"metadata key {name!r} is not indexed by this store (indexed: {declared}); "
            "declare it with indexed_metadata_keys when you build the store"
        )
    if not isinstance(cast(object, value), str):
        raise UsageError(f"find_by_metadata compares strings, not {type(value).__name__}")
    if isinstance(cast(object, limit), bool) or not isinstance(cast(object, limit), int):
        raise UsageError(f"limit must be an int, not {type(limit).__name__}")
    if limit < 1:
        raise UsageError(f"limit must be >= 1, not {limit}")
