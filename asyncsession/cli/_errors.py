"""Exit codes, and the one line an error becomes.

0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI is invalid.
"""

from __future__ import annotations

import json
import os
import re
from typing import TextIO, TypeVar

from pymongo.errors import ConfigurationError, ConnectionFailure, PyMongoError

from ..exceptions import AsyncSessionError, SessionNotFound, StorageError

__all__ = [
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "Failure",
    "failure_of",
    "hosts_of",
    "report",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
_E = TypeVar("_E", bound=BaseException)
_ERRNO = re.compile(r"\[Errno (-?\d+)\] ([^(,\]]+)")


class Failure(Exception):
    """An error the command line reports: an exit code, a kind for scripts, one line for people."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        """The exit code."""
        self.kind = kind
        """A stable word for scripts: `usage`, `not_found`, `unreachable`, `storage`, `failed`."""
        self.message = message
        """One line for people."""


def hosts_of(uri: str) -> str:
    """The `host:port` list of a MongoDB URI, without credentials or options."""
    rest = uri.split("://", 1)[-1]
    rest = rest.rsplit("@", 1)[-1]
    return re.split(r"[/?]", rest, maxsplit=1)[0] or "?"


def _reason(error: BaseException) -> str:
    found = _ERRNO.search(str(error))
    if found is None:
        return "no server answered"
    number = int(found.group(1))
    if number > 0:  # an OS error number: its standard text ("connection refused")
        return os.strerror(number).lower()
    return found.group(2).strip().lower()  # a resolver error, e.g. "name or service not known"


def _in_chain(error: BaseException, kind: type[_E]) -> _E | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def _first_line(error: BaseException) -> str:
    text = str(error)
    return text.splitlines()[0] if text else type(error).__name__


def failure_of(error: BaseException, *, uri: str | None, timeout: float) -> Failure | None:
    """The failure `error` is reported as; `None` for an error the command line does not own."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, SessionNotFound):
        return Failure(EXIT_NOT_FOUND, "not_found", f"unknown session {error.session_id!r}")
    down = _in_chain(error, ConnectionFailure)
    if down is not None:
        where = hosts_of(uri or "")
        return Failure(
            EXIT_UNREACHABLE,
            "unreachable",
            f"cannot reach MongoDB at {where}: {_reason(down)} (gave up after {timeout:g} s)",
        )
    config = _in_chain(error, ConfigurationError)
    if config is not None:  # raised when the client first resolves a mongodb+srv:// name
        where = hosts_of(uri or "")
        text = _first_line(config)
        if "DNS" in text or "resolve" in text.lower():
            return Failure(EXIT_UNREACHABLE, "unreachable", f"cannot resolve {where}: {text}")
        return Failure(EXIT_UNREACHABLE, "invalid_uri", f"invalid MongoDB URI: {text}")
    if isinstance(error, OSError):  # a file the command reads or writes
        where = f" {error.filename}" if error.filename else ""
        reason = (error.strerror or _first_line(error)).lower()
        return Failure(EXIT_FAILED, "failed", f"cannot open{where}: {reason}")
    if isinstance(error, StorageError | PyMongoError):
        detail = str(error.__cause__ or error)
        first = detail.splitlines()[0] if detail else type(error).__name__
        return Failure(EXIT_FAILED, "storage", f"MongoDB failed: {first}")
    if isinstance(error, AsyncSessionError | ValueError):
        return Failure(EXIT_FAILED, "failed", str(error))
    return None


def report(failure: Failure, *, is_json: bool, err: TextIO) -> int:
    """Print the failure on `err` (one line, JSON under `--json`); returns its exit code."""
    if is_json:
        body = {"error": {"kind": failure.kind, "message": failure.message, "code": failure.code}}
        print(json.dumps(body, ensure_ascii=False), file=err)
    else:
        print(f"error: {failure.message}", file=err)
    return failure.code
