"""Exit codes, and the one line an error becomes.

0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI is invalid.
"""

from __future__ import annotations

import json
import os
import re
from typing import TextIO

from pymongo.errors import ConnectionFailure, PyMongoError

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


def _connection_failure(error: BaseException) -> ConnectionFailure | None:
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, ConnectionFailure):
            return seen
        seen = seen.__cause__
    return None


def failure_of(error: BaseException, *, uri: str | None, timeout: float) -> Failure | None:
    """The failure `error` is reported as; `None` for an error the command line does not own."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, SessionNotFound):
        return Failure(EXIT_NOT_FOUND, "not_found", f"unknown session {error.session_id!r}")
    down = _connection_failure(error)
    if down is not None:
        where = hosts_of(uri or "")
        return Failure(
            EXIT_UNREACHABLE,
            "unreachable",
            f"cannot reach MongoDB at {where}: {_reason(down)} (gave up after {timeout:g} s)",
        )
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
