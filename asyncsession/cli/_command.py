"""What a command is: a name, its options, and a coroutine run with the command's context.

A command module defines `COMMANDS`, a tuple of [`Command`][asyncsession.cli._command.Command];
`asyncsession.cli._registry` lists every command module once, in the order `--help` shows them.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..repository import MongoSessionRepository
from ._progress import Progress

__all__ = ["Command", "Context", "Options"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """The global options, given before or after the command."""

    uri: str | None
    """The MongoDB URI (`--uri`, else `MONGODB_URI`)."""
    db: str
    """The database name (`--db`, else `ASYNCSESSION_DB`, else `asyncsession`)."""
    is_json: bool
    """Machine-readable output (`--json`): results on stdout, errors on stderr, both JSON."""
    timeout: float
    """Seconds to find and connect to the server before giving up (`--timeout`)."""

    def client_options(self) -> dict[str, Any]:
        """The `AsyncMongoClient` options of every client the command line builds.

        Short server-selection and connect timeouts, so a server that is down is reported
        within `timeout` seconds instead of the driver's 30.
        """
        millis = max(1, int(self.timeout * 1000))
        return {"serverSelectionTimeoutMS": millis, "connectTimeoutMS": millis}


@dataclass(slots=True, kw_only=True)
class Context:
    """What a running command gets: its arguments, its streams and the store."""

    args: argparse.Namespace
    """The parsed arguments of the command (global options included)."""
    options: Options
    """The global options."""
    out: TextIO
    """Where results go (standard output)."""
    err: TextIO
    """Where progress, notes and errors go (standard error)."""
    repository: MongoSessionRepository
    """The session store, opened with `options.client_options()`; closed after the command."""
    extras: dict[str, object] = field(default_factory=dict[str, object])
    """Room for a command's own state; the command line never reads it."""

    def emit(self, data: Mapping[str, Any] | list[Any], text: str | None = None) -> None:
        """Print `data` as JSON under `--json`, else `text` (if any)."""
        if self.options.is_json:
            print(json.dumps(data, ensure_ascii=False), file=self.out)
        elif text is not None:
            print(text, file=self.out)

    def note(self, text: str) -> None:
        """A remark for people on standard error; silent under `--json`."""
        if not self.options.is_json:
            print(text, file=self.err)

    def progress(self, label: str, total: int | None = None) -> Progress:
        """A progress bar on standard error; drawn only on a terminal and never under `--json`."""
        enabled = not self.options.is_json and _is_tty(self.err)
        return Progress(self.err, label, total, enabled=enabled)


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except ValueError:  # a closed stream
        return False


@dataclass(frozen=True, slots=True, kw_only=True)
class Command:
    """One command of the command line."""

    name: str
    """What the operator types, e.g. `show`."""
    help: str
    """One line for `asyncsession --help`."""
    configure: Callable[[argparse.ArgumentParser], None]
    """Adds the command's own arguments to its parser."""
    execute: Callable[[Context], Awaitable[int]]
    """Runs the command; returns the exit code. Errors of ours are mapped by the caller."""
