"""Argument checks at public entry points: a wrong type is a `UsageError` in our words.

Each helper raises `UsageError` naming the argument and what was expected, so a mistake is
answered where it is made, not as an ``AttributeError`` or a pydantic error far from the call.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Mapping
from contextlib import contextmanager
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from pymongo.database import Database

from .events import SessionEvent
from .exceptions import UsageError
from .messages import AssistantMessage, SystemMessage, ToolResponseMessage, UserMessage

_T = TypeVar("_T")


def _kind(value: object) -> str:
    if isinstance(value, str):
        return f"the string {value[:40]!r}"
    if isinstance(value, type):
        return f"the class {value.__name__} itself (pass an instance)"
    return f"{type(value).__name__} {value!r}"[:80]


def require_type(
    value: _T, types: type | tuple[type, ...], name: str, expected: str, *, hint: str = ""
) -> _T:
    if not isinstance(value, types):
        raise UsageError(f"{name} must be {expected}, not {_kind(value)}{hint}")
    return value


def require_text(value: _T, name: str) -> _T:
    return require_type(value, str, name, "a string")


def require_nonblank(value: str, name: str) -> str:
    if not require_text(value, name).strip():
        raise UsageError(f"{name} must be a non-empty string")
    return value


def require_int(value: _T, name: str) -> _T:
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{name} must be an int, not {_kind(value)}")
    return value


def require_many(value: _T, name: str, expected: str) -> _T:
    """``value`` if it is a collection of items: not text, a mapping or one model on its own.

    Only the container is checked, so the check costs the same for any number of items.
    """
    probe: object = value  # narrowed by the checks; ``value`` keeps its type
    if isinstance(probe, (str, bytes, Mapping, BaseModel)) or not isinstance(probe, Iterable):
        single = isinstance(value, (Mapping, BaseModel))
        hint = " (put a single one in a list)" if single else ""
        raise UsageError(f"{name} must be {expected}, not {_kind(value)}{hint}")
    return value


_MESSAGES = (UserMessage, AssistantMessage, SystemMessage, ToolResponseMessage)

REPOSITORY_METHODS = ("find_by_id", "save_if_absent", "append_event", "find_events")
"""What a session repository must have, checked where one is passed."""
SERVICE_METHODS = ("create", "find_by_id", "append_event", "get_events")
"""What a session service must have, checked where one is passed."""
MEMORY_STORE_METHODS = ("stat", "read", "write")
"""What a memory store must have, checked where one is passed."""


def require_message(value: _T, name: str) -> _T:
    hint = " (wrap text in a message: UserMessage(text=...))" if isinstance(value, str) else ""
    return require_type(value, _MESSAGES, name, "a message such as UserMessage", hint=hint)


def require_event(value: _T, name: str) -> _T:
    return require_type(value, SessionEvent, name, "a SessionEvent")


_WRAP_REPOSITORY = "wrap a repository in DefaultSessionService(repository)"


def _has(value: object, methods: tuple[str, ...]) -> bool:
    return all(callable(getattr(value, method, None)) for method in methods)


def require_object(
    value: _T, name: str, expected: str, *, methods: tuple[str, ...], hint: str = ""
) -> _T:
    """``value`` if it has the ``methods`` of the protocol ``expected`` names.

    Refuses ``None``, plain values (a string, a number) and classes (``MongoSessionRepository``
    for ``MongoSessionRepository(db)``), which users pass by mistake for a repository, a
    service or a client: they would otherwise fail later with an ``AttributeError`` or a
    ``TypeError``. ``hint`` says what to do instead when the methods are missing.
    """
    if isinstance(value, (str, bytes, int, float)) or value is None:
        raise UsageError(f"{name} must be {expected}, not {_kind(value)}")
    if isinstance(value, type):
        raise UsageError(
            f"{name} must be {expected}, not the class {value.__name__} itself: "
            f"pass an instance, {value.__name__}(...)"
        )
    missing = [method for method in methods if not callable(getattr(value, method, None))]
    if missing:
        advice = f"; {hint}" if hint else ""
        raise UsageError(
            f"{name} must be {expected}, not {_kind(value)} "
            f"(it has no {', '.join(missing)}{advice})"
        )
    return value


def require_open_client(value: _T, name: str) -> _T:
    """``value`` if it is an SDK client (``openai.AsyncOpenAI``) that is not closed.

    A closed client's next request fails inside the SDK; checked before anything is stored, a
    turn is refused instead of storing a question it cannot answer.
    """
    require_object(value, name, "an openai.AsyncOpenAI", methods=())
    is_closed = getattr(value, "is_closed", None)
    if callable(is_closed) and is_closed() is True:
        raise UsageError(
            f"{name} is closed: build the client with a new openai.AsyncOpenAI, and close "
            "that only when nothing uses it any more"
        )
    return value


def require_estimator(value: _T, name: str = "estimator") -> _T:
    return require_object(value, name, "a TokenCountEstimator", methods=("estimate",))


def require_service(value: _T, name: str) -> _T:
    """``value`` if it has a session service's methods; a repository is told how to wrap it."""
    hint = _WRAP_REPOSITORY if _has(value, REPOSITORY_METHODS) else ""
    return require_object(value, name, "a SessionService", methods=SERVICE_METHODS, hint=hint)


def require_compactor(value: _T, name: str) -> _T:
    """``value`` if it has ``compact`` (a service, a `Compactor`); a repository is told how to
    wrap it."""
    hint = _WRAP_REPOSITORY if _has(value, REPOSITORY_METHODS) else ""
    return require_object(
        value, name, "a SessionService or a Compactor", methods=("compact",), hint=hint
    )


def require_memory_store(value: _T, name: str) -> _T:
    """``value`` if it has a memory store's methods; a path is told which store takes one."""
    if isinstance(value, str):
        raise UsageError(
            f"{name} must be a MemoryStore, not {_kind(value)} "
            "(for a directory use DirectoryMemoryStore(path))"
        )
    return require_object(value, name, "a MemoryStore", methods=MEMORY_STORE_METHODS)


def require_database(value: _T, name: str, owner: str) -> _T:
    """``value`` if it is an async MongoDB database (PyMongo's or Motor's).

    A URI string is told to use ``owner.from_uri``, a sync PyMongo database to use
    ``AsyncMongoClient``.
    """
    if isinstance(value, str):
        raise UsageError(
            f"{name} must be a PyMongo AsyncDatabase, not a string; for a URI use "
            f"{owner}.from_uri(uri, db_name)"
        )
    if isinstance(value, Database):
        raise UsageError(
            f"{name} must be a PyMongo AsyncDatabase, not the sync pymongo Database: "
            "take it from an AsyncMongoClient (client[db_name])"
        )
    return require_object(value, name, "a PyMongo AsyncDatabase", methods=("get_collection",))


@contextmanager
def user_input(what: str) -> Generator[None]:
    """Turn pydantic's verdict on values a user passed into a `UsageError`, chained to it."""
    try:
        yield
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(map(str, first["loc"]))
        raise UsageError(f"{what}: {where + ': ' if where else ''}{first['msg']}") from exc
