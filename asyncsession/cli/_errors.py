"""How a command ends: its exit code, the one line an error becomes, and a reader that went away.

0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI is invalid.
A closed pipe (`asyncsession show S | head -1`) ends the command quietly with exit 0, as `git`
and `jq` do. Warnings (Python's and the driver's) and log records go to standard error, one line
each (one JSON object each under `--json`), so standard output carries only the result.
"""

from __future__ import annotations

import contextlib
import errno
import json
import logging
import os
import sys
import warnings
from collections.abc import Generator
from typing import TextIO

from pymongo.errors import ConfigurationError, ConnectionFailure, PyMongoError

from .._mongo_uri import first_line, hosts_of, in_chain, is_unresolved, reason
from ..exceptions import AsyncSessionError, SessionNotFound, StorageError

__all__ = [
    "EXIT_FAILED",
    "EXIT_NOT_FOUND",
    "EXIT_OK",
    "EXIT_UNREACHABLE",
    "EXIT_USAGE",
    "Failure",
    "diagnostics",
    "failure_of",
    "flush_stdout",
    "is_closed_pipe",
    "report",
]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 0, 1, 2, 3, 4


class Failure(Exception):
    """An error the command line reports: an exit code, a `kind` for scripts (`usage`,
    `not_found`, `unreachable`, `invalid_uri`, `storage`, `failed`), one line for people."""

    def __init__(self, code: int, kind: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.kind = kind
        self.message = message


def failure_of(error: BaseException, *, uri: str | None, timeout: float) -> Failure | None:
    """The failure `error` is reported as; `None` for an error the command line does not own."""
    if isinstance(error, Failure):
        return error
    if isinstance(error, SessionNotFound):
        return Failure(EXIT_NOT_FOUND, "not_found", f"unknown session {error.session_id!r}")
    where = hosts_of(uri or "")
    down = in_chain(error, ConnectionFailure)
    if down is not None:
        return Failure(
            EXIT_UNREACHABLE,
            "unreachable",
            f"cannot reach MongoDB at {where}: {reason(down)} (gave up after {timeout:g} s)",
        )
    config = in_chain(error, ConfigurationError)
    if config is not None:  # raised when the client first resolves a mongodb+srv:// name
        text = first_line(config)
        if is_unresolved(config):
            return Failure(EXIT_UNREACHABLE, "unreachable", f"cannot resolve {where}: {text}")
        return Failure(EXIT_UNREACHABLE, "invalid_uri", f"invalid MongoDB URI: {text}")
    if isinstance(error, OSError):  # a file the command reads or writes
        name = f" {error.filename}" if error.filename else ""
        why = (error.strerror or first_line(error)).lower()
        return Failure(EXIT_FAILED, "failed", f"cannot open{name}: {why}")
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
        _write_or_drop(err, json.dumps(body, ensure_ascii=False))
    else:
        _write_or_drop(err, f"error: {failure.message}")
    return failure.code


def is_closed_pipe(error: BaseException) -> bool:
    """Whether `error` (or one it was raised from) says the reader of a pipe has gone."""
    found = in_chain(error, OSError)
    return found is not None and (
        isinstance(found, BrokenPipeError) or found.errno in (errno.EPIPE, errno.ESHUTDOWN)
    )


def flush_stdout() -> None:
    """Flush standard output; if its reader has gone, point it at the null device, so the
    interpreter's last flush cannot fail (it would print "Exception ignored" and exit 120)."""
    try:
        sys.stdout.flush()
    except OSError as exc:
        if not is_closed_pipe(exc):
            raise
    else:
        return
    null = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, sys.stdout.fileno())
    finally:
        os.close(null)


def _write_or_drop(stream: TextIO, line: str) -> None:
    """Write one line and flush it; a reader that has gone is not an error worth a line."""
    try:
        print(line, file=stream, flush=True)
    except OSError as exc:
        if not is_closed_pipe(exc):
            raise


def _line(kind: str, message: str, source: str, *, is_json: bool) -> str:
    if is_json:
        return json.dumps({kind: {"source": source, "message": message}}, ensure_ascii=False)
    return f"{kind}: {message} ({source})"


class _Records(logging.Handler):
    """Log records of WARNING and above, one line each on standard error."""

    def __init__(self, err: TextIO, *, is_json: bool) -> None:
        super().__init__(logging.WARNING)
        self._err = err
        self._is_json = is_json

    def emit(self, record: logging.LogRecord) -> None:
        message = " ".join(record.getMessage().split())
        if record.exc_info and record.exc_info[1] is not None:
            error = record.exc_info[1]
            first = str(error).splitlines()[0] if str(error) else ""
            message += f": {type(error).__name__}" + (f": {first}" if first else "")
        kind = "warning" if record.levelno < logging.ERROR else "error"
        _write_or_drop(self._err, _line(kind, message, record.name, is_json=self._is_json))


@contextlib.contextmanager
def diagnostics(err: TextIO, *, is_json: bool) -> Generator[None, None, None]:
    """Inside the block, warnings and log records (WARNING and above) that nothing else handles
    are written to `err` as one line each (one JSON object each under `is_json`)."""

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        text = " ".join(str(message).split())
        _write_or_drop(err, _line("warning", text, category.__name__, is_json=is_json))

    root = logging.getLogger()
    handler = None if root.handlers else _Records(err, is_json=is_json)
    with warnings.catch_warnings():
        warnings.showwarning = show
        if handler is not None:
            root.addHandler(handler)
        try:
            yield
        finally:
            if handler is not None:
                root.removeHandler(handler)
