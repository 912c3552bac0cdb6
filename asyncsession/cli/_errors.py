"""Exit codes, and the one line an error becomes.

0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI is invalid.
"""

from __future__ import annotations

import json
from typing import TextIO

from pymongo.errors import ConfigurationError, ConnectionFailure, PyMongoError

from .._mongo_uri import first_line, hosts_of, in_chain, is_unresolved, reason
from ..exceptions import AsyncSessionError, SessionNotFound, StorageError
from ._streams import write_or_drop

__all__ = [
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "Failure",
    "failure_of",
    "report",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 0, 1, 2, 3, 4


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


def failure_of(error: BaseException, *, uri: str | None, timeout: float) -> Failure | None:
    """The failure `error` is reported as; `None` for an error the command line does not own."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, SessionNotFound):
        return Failure(EXIT_NOT_FOUND, "not_found", f"unknown session {error.session_id!r}")
    down = in_chain(error, ConnectionFailure)
    if down is not None:
        where = hosts_of(uri or "")
        return Failure(
            EXIT_UNREACHABLE,
            "unreachable",
            f"cannot reach MongoDB at {where}: {reason(down)} (gave up after {timeout:g} s)",
        )
    config = in_chain(error, ConfigurationError)
    if config is not None:  # raised when the client first resolves a mongodb+srv:// name
        where = hosts_of(uri or "")
        text = first_line(config)
        if is_unresolved(config):
            return Failure(EXIT_UNREACHABLE, "unreachable", f"cannot resolve {where}: {text}")
        return Failure(EXIT_UNREACHABLE, "invalid_uri", f"invalid MongoDB URI: {text}")
    if isinstance(error, OSError):  # a file the command reads or writes
        where = f" {error.filename}" if error.filename else ""
        why = (error.strerror or first_line(error)).lower()
        return Failure(EXIT_FAILED, "failed", f"cannot open{where}: {why}")
    if isinstance(error, StorageError | PyMongoError):
        detail = first_line(error.__cause__ or error)
        return Failure(EXIT_FAILED, "storage", f"MongoDB failed: {detail}")
    if isinstance(error, AsyncSessionError | ValueError):
        return Failure(EXIT_FAILED, "failed", str(error))
    return None


def report(failure: Failure, *, is_json: bool, err: TextIO) -> int:
    """Print the failure on `err` (one line, JSON under `--json`); returns its exit code, also
    when nobody reads `err` any more."""
    if is_json:
        body = {"error": {"kind": failure.kind, "message": failure.message, "code": failure.code}}
        write_or_drop(err, json.dumps(body, ensure_ascii=False))
    else:
        write_or_drop(err, f"error: {failure.message}")
    return failure.code
