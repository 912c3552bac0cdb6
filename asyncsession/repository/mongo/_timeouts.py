"""The client timeouts `MongoSessionRepository.from_uri` sets: bounded for a web request.

PyMongo's defaults wait 30 s to select a server and 20 s to connect, and never time out a socket
read, so a request made while the server is down hangs for half a minute. A store that owns its
client fails within these bounds instead, with `StorageUnavailable`. An option the caller gives,
as a keyword or in the URI (in any letter case), wins over these defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final
from urllib.parse import parse_qsl, urlsplit

__all__ = [
    "DEFAULT_CONNECT_TIMEOUT_MS",
    "DEFAULT_SERVER_SELECTION_TIMEOUT_MS",
    "DEFAULT_SOCKET_TIMEOUT_MS",
    "with_web_timeouts",
]

DEFAULT_SERVER_SELECTION_TIMEOUT_MS: Final = 5_000
"""How long an operation waits for a suitable server (``serverSelectionTimeoutMS``)."""
DEFAULT_CONNECT_TIMEOUT_MS: Final = 5_000
"""How long opening one connection may take (``connectTimeoutMS``)."""
DEFAULT_SOCKET_TIMEOUT_MS: Final = 10_000
"""How long one reply may take once sent (``socketTimeoutMS``)."""

_DEFAULTS: Final[Mapping[str, int]] = {
    "serverSelectionTimeoutMS": DEFAULT_SERVER_SELECTION_TIMEOUT_MS,
    "connectTimeoutMS": DEFAULT_CONNECT_TIMEOUT_MS,
    "socketTimeoutMS": DEFAULT_SOCKET_TIMEOUT_MS,
}


def _uri_option_names(uri: str) -> set[str]:
    query = urlsplit(uri).query
    return {name.lower() for name, _ in parse_qsl(query, keep_blank_values=True)}


def with_web_timeouts(uri: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The client options with the web timeouts added where neither they nor the URI set one."""
    given = {name.lower() for name in options} | _uri_option_names(uri)
    defaults = {name: value for name, value in _DEFAULTS.items() if name.lower() not in given}
    return {**defaults, **options}
