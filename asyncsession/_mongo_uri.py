"""A MongoDB URI and its failures in words for people: where it points (never its password),
and why its server could not be used, in one line.

The command line and the demo report a server that is down, a name that does not resolve and
a malformed URI with these, instead of the driver's traceback.
"""

from __future__ import annotations

import os
import re
from typing import TypeVar

from pymongo.errors import ConfigurationError, ConnectionFailure, PyMongoError

from .exceptions import AsyncSessionError

__all__ = [
    "describe_failure",
    "first_line",
    "hosts_of",
    "in_chain",
    "is_unresolved",
    "reason",
    "redacted",
]

_E = TypeVar("_E", bound=BaseException)
_ERRNO = re.compile(r"\[Errno (-?\d+)\] ([^(,\]]+)")
_CREDENTIALS = re.compile(r"^(?P<scheme>[a-z+]+://)(?P<user>[^:@/]*):[^/]*@", re.IGNORECASE)


def redacted(uri: str) -> str:
    """The URI with its password replaced by `***` (the user name stays: it says who)."""
    return _CREDENTIALS.sub(r"\g<scheme>\g<user>:***@", uri.strip(), count=1)


def hosts_of(uri: str) -> str:
    """The `host:port` list of a MongoDB URI, without credentials or options."""
    rest = uri.split("://", 1)[-1]
    rest = rest.rsplit("@", 1)[-1]
    return re.split(r"[/?]", rest, maxsplit=1)[0] or "?"


def in_chain(error: BaseException, kind: type[_E]) -> _E | None:
    """`error`, or the first error it was raised from (or during), that is a `kind`."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def first_line(error: BaseException) -> str:
    """The first line of the error's text, or its type's name when it has none."""
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def is_unresolved(error: ConfigurationError) -> bool:
    """Whether the driver's configuration error says a `mongodb+srv://` name did not resolve."""
    text = first_line(error)
    return "DNS" in text or "resolve" in text.lower()


def reason(error: BaseException) -> str:
    """Why no server answered, from the driver's text: "connection refused", "name or service
    not known", else "no server answered"."""
    found = _ERRNO.search(str(error))
    if found is None:
        return "no server answered"
    number = int(found.group(1))
    if number > 0:  # an OS error number: its standard text ("connection refused")
        return os.strerror(number).lower()
    return found.group(2).strip().lower()  # a resolver error, e.g. "name or service not known"


def describe_failure(uri: str, error: BaseException) -> str:
    """What went wrong with the server `uri` names, or with `uri` itself, in one line that shows
    the URI without its password."""
    where = redacted(uri)
    down = in_chain(error, ConnectionFailure)
    if down is not None:
        return f"MongoDB at {where} is unreachable: {reason(down)}"
    config = in_chain(error, ConfigurationError)
    if config is not None:  # a malformed URI, or a mongodb+srv:// name that does not resolve
        if is_unresolved(config):
            return f"cannot resolve {hosts_of(uri)} (from {where}): {first_line(config)}"
        return f"invalid MongoDB URI {where}: {first_line(config)}"
    failed = in_chain(error, PyMongoError)
    if failed is not None:  # e.g. the server refused the credentials
        return f"MongoDB at {where} refused: {first_line(failed)}"
    if isinstance(error, ValueError) and not isinstance(error, AsyncSessionError):
        return f"invalid MongoDB URI {where}: {first_line(error)}"  # PyMongo's, e.g. a bad port
    return f"MongoDB at {where} failed: {first_line(error)}"
