"""How the store meets its client: the timeouts `from_uri` sets, one deadline per public call,
and the library's name in the handshake.

PyMongo's defaults wait 30 s to select a server and 20 s to connect, and never time out a socket
read, so a request made while the server is down hangs for half a minute. A store that owns its
client fails within these bounds instead, with `StorageUnavailable`. ``timeoutMS`` (PyMongo's
client-side operation timeout) bounds each operation end to end, retries and a frozen server
included, which the three per-step timeouts alone do not; PyMongo then uses it in place of
``serverSelectionTimeoutMS`` and ``socketTimeoutMS``, so it is left out when the caller sets
either of those (their per-step bounds stay as chosen). An option the caller gives, as a
keyword or in the URI (in any letter case), wins over these defaults. A borrowed client gets
none of them: its own ``timeoutMS``, or ``pymongo.timeout(seconds)`` around a call, bounds it.

A public call of the store may send more than one command (a read on the error path of an
append, a second range of a long window). `call_deadline` makes them share one deadline, the
client's ``timeoutMS``, so the whole call fails within that bound, not each command.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import Any, Final, cast
from urllib.parse import parse_qsl, urlsplit

import pymongo
from pymongo import AsyncMongoClient, MongoClient
from pymongo.driver_info import DriverInfo

from ..._version import __version__

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "DEFAULT_SOCKET_TIMEOUT_MS",
    "DEFAULT_TIMEOUT_MS",
    "call_deadline",
    "client_timeout",
    "driver_info",
    "identify",
    "with_web_timeouts",
]

DEFAULT_SERVER_SELECTION_TIMEOUT_MS: Final = 5_000
"""How long an operation waits for a suitable server (``serverSelectionTimeoutMS``)."""
DEFAULT_CONNECT_TIMEOUT_MS: Final = 5_000
"""How long opening one connection may take (``connectTimeoutMS``)."""
DEFAULT_SOCKET_TIMEOUT_MS: Final = 10_000
"""How long one reply may take once sent (``socketTimeoutMS``)."""
DEFAULT_TIMEOUT_MS: Final = 5_000
"""How long one store operation may take end to end (``timeoutMS``): as long as selecting a
server, so an unreachable and a frozen server fail within the same bound."""

_DEFAULTS: Final[Mapping[str, int]] = {
    "serverSelectionTimeoutMS": DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
    "connectTimeoutMS": DEFAULT_CONNECT_TIMEOUT_MS,
    "socketTimeoutMS": DEFAULT_SOCKET_TIMEOUT_MS,
    "timeoutMS": DEFAULT_TIMEOUT_MS,
}


_REPLACED_BY_TIMEOUT: Final = frozenset({"serverselectiontimeoutms", "sockettimeoutms"})
"""The per-step bounds ``timeoutMS`` would override: a caller who sets one keeps it."""


def _uri_option_names(uri: str) -> set[str]:
    query = urlsplit(uri).query
    return {name.lower() for name, _ in parse_qsl(query, keep_blank_values=True)}


def with_web_timeouts(uri: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The client options with the web timeouts added where neither they nor the URI set one."""
    given = {name.lower() for name in options} | _uri_option_names(uri)
    if given & _REPLACED_BY_TIMEOUT:
        given.add("timeoutms")
    defaults = {name: value for name, value in _DEFAULTS.items() if name.lower() not in given}
    return {**defaults, **options}


def driver_info() -> DriverInfo:
    """The library's name and version, for a client's handshake."""
    return DriverInfo(name="asyncsession", version=__version__)


def _driver_client(database: object) -> object:
    client: object = getattr(database, "client", None)
    if isinstance(client, AsyncMongoClient):
        return cast(object, client)
    return cast(object, getattr(client, "delegate", None))  # Motor wraps a PyMongo client


def identify(database: object) -> None:
    """Name the library in a borrowed PyMongo client's handshake (Motor wraps one)."""
    client = _driver_client(database)
    if isinstance(client, AsyncMongoClient | MongoClient):
        client.append_metadata(driver_info())


def client_timeout(database: object) -> float | None:
    """The client's ``timeoutMS`` in seconds, or ``None`` when it has none (or is no PyMongo
    client)."""
    client = _driver_client(database)
    if isinstance(client, AsyncMongoClient | MongoClient):
        timeout = client.options.timeout
        return timeout if timeout else None
    return None


def call_deadline(seconds: float | None) -> contextlib.AbstractContextManager[Any]:
    """One deadline for every command of a public call (nested in a caller's shorter one);
    nothing when the client has no ``timeoutMS``."""
    return pymongo.timeout(seconds) if seconds else contextlib.nullcontext()
