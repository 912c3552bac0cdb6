"""The command line's streams: a reader that went away, and what must stay off standard output.

A closed pipe (`asyncsession show S | head -1`) ends the command quietly with exit 0, as `git`
and `jq` do: the reader has what it wanted. Warnings (Python's and the driver's) and log
records go to standard error, one line each, and as one JSON object per line under `--json`,
so standard output carries only the command's result.
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

from .._mongo_uri import in_chain

__all__ = ["diagnostics", "flush_stdout", "is_closed_pipe", "write_or_drop"]


def is_closed_pipe(error: BaseException) -> bool:
    """Whether `error` (or one it was raised from) says the reader of a pipe has gone."""
    found = in_chain(error, OSError)
    return found is not None and (
        isinstance(found, BrokenPipeError) or found.errno in (errno.EPIPE, errno.ESHUTDOWN)
    )


def flush_stdout() -> None:
    """Write what is still buffered for standard output. If its reader has gone, point it at
    the null device instead, so the interpreter's last flush cannot fail on the closed pipe
    (Python would print "Exception ignored ... BrokenPipeError" and exit 120)."""
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


def write_or_drop(stream: TextIO, line: str) -> None:
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
        write_or_drop(self._err, _line(kind, message, record.name, is_json=self._is_json))


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
        write_or_drop(err, _line("warning", text, category.__name__, is_json=is_json))

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
