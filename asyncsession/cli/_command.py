"""What a command is, and what it gets: its context, a progress bar, tables and argument types.

A command module defines `COMMANDS`, a tuple of [`Command`][asyncsession.cli._command.Command];
`asyncsession.cli._app` lists every command module once, in the order `--help` shows them.
An argument type checks one flag's value at parse time, so a bad value is a usage error.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TextIO, TypeVar

from .._describe import cell
from ..events import EventType
from ..repository import MongoSessionRepository

__all__ = [
    "KNOWN_TYPES",
    "Command",
    "Context",
    "Progress",
    "client_options",
    "event_type",
    "instant",
    "non_negative_int",
    "point",
    "positive_float",
    "positive_int",
]

T = TypeVar("T")


class Progress:
    """Draws `label [#####.....] done/total` (or `label: done`, when the total is unknown) on a
    stream. A disabled bar draws nothing, so a command calls it the same way on a terminal, in
    a pipe and under `--json`."""

    WIDTH = 28
    TICK = 0.2

    def __init__(self, stream: TextIO, label: str, total: int | None, *, enabled: bool) -> None:
        self.stream = stream
        self.label = label
        self.total = total
        self.enabled = enabled
        self.done = 0
        self._started = time.monotonic()
        self._drawn = False

    def advance(self, count: int = 1) -> None:
        """Count `count` more items done and redraw."""
        self.done += count
        self._draw()

    async def around(self, work: Awaitable[T]) -> T:
        """Await `work`, redrawing the elapsed time while it runs (for one long call)."""
        if not self.enabled:
            return await work
        async with asyncio.TaskGroup() as group:
            ticker = group.create_task(self._tick())
            try:
                return await work
            finally:
                ticker.cancel()

    async def _tick(self) -> None:
        while True:
            self._draw()
            await asyncio.sleep(self.TICK)

    def _draw(self) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._started
        if self.total:
            filled = min(self.WIDTH, self.WIDTH * self.done // self.total)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:.1f}s"
        else:
            line = f"{self.label}: {self.done} {elapsed:.1f}s"
        self.stream.write(f"\r{line}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def __enter__(self) -> Self:
        self._draw()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._drawn:  # end the bar's line
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False


def client_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options of every `AsyncMongoClient` the command line builds: a server that is down
    is reported within `--timeout` seconds instead of the driver's 30."""
    millis = max(1, int(args.timeout * 1000))
    return {"serverSelectionTimeoutMS": millis, "connectTimeoutMS": millis}


@dataclass(slots=True, kw_only=True)
class Context:
    """What a running command gets: its arguments, its streams and the store."""

    args: argparse.Namespace
    """The parsed arguments of the command, the global options (`uri`, `db`, `json`,
    `timeout`, `encryption`) included."""
    out: TextIO
    """Where results go (standard output)."""
    err: TextIO
    """Where progress, notes and errors go (standard error)."""
    repository: MongoSessionRepository
    """The session store, opened with `client_options(args)`; closed after the command."""

    @property
    def is_json(self) -> bool:
        """Whether the output is for machines (`--json`)."""
        return bool(self.args.json)

    def emit(self, data: Mapping[str, Any] | list[Any], text: str | None = None) -> None:
        """Print `data` as JSON under `--json`, else `text` (if any)."""
        if self.is_json:
            print(json.dumps(data, ensure_ascii=False), file=self.out)
        elif text is not None:
            print(text, file=self.out)

    def note(self, text: str) -> None:
        """A remark for people on standard error; silent under `--json`."""
        if not self.is_json:
            print(text, file=self.err)

    def progress(self, label: str, total: int | None = None) -> Progress:
        """A progress bar on standard error; drawn only on a terminal and never under `--json`."""
        try:
            enabled = not self.is_json and self.err.isatty()
        except ValueError:  # a closed stream
            enabled = False
        return Progress(self.err, label, total, enabled=enabled)

    def table(self, rows: Sequence[Sequence[str]]) -> None:
        """Print rows as left-aligned columns (the first row is the header), each cell on one
        line of at most `CELL_WIDTH` characters."""
        rows = [[cell(text) for text in row] for row in rows]
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
        for row in rows:
            cells = [text.ljust(width) for text, width in zip(row, widths, strict=True)]
            print("  ".join(cells).rstrip(), file=self.out)


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


def _whole(text: str, least: int) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be ≥ {least}, not {value}")
    return value


def positive_int(text: str) -> int:
    """A whole number of at least 1 (argparse adds the flag: `argument --last: must be ≥ 1`)."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """A whole number of at least 0 (a version)."""
    return _whole(text, 0)


def point(text: str) -> int | str:
    """A point of a log: a version (a whole number >= 0) or an event id."""
    return int(text) if text.isdigit() else text


def positive_float(text: str) -> float:
    """A number of seconds greater than 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, not {text}")
    return value


KNOWN_TYPES = (
    EventType.USER,
    EventType.ASSISTANT,
    EventType.TOOL,
    EventType.SYSTEM,
    EventType.COMPACTION,
    EventType.REWIND,
)
"""The event types the library defines; `--type` takes them by name, in any case."""


def event_type(text: str) -> EventType:
    """An event type by name, any case: `user` is `USER`; a custom type by its full name with
    its prefix (`acme.audit` is `ACME.AUDIT`). Any other bare name is refused: far more often a
    typo than a custom type, it would show an empty log as if the session had none."""
    name = text.strip().upper()
    known = {kind.name: kind for kind in KNOWN_TYPES}
    if name in known:
        return known[name]
    if "." in name:
        try:
            return EventType(name)
        except ValueError:
            pass  # breaks the naming rule: the message below says the rule
    names = ", ".join(kind.name.lower() for kind in KNOWN_TYPES[:-1])
    raise argparse.ArgumentTypeError(
        f"unknown event type {text!r}: use {names} or {KNOWN_TYPES[-1].name.lower()} (any "
        "case), or a custom type by its full name with its prefix, e.g. ACME.AUDIT (letters, "
        "digits, '_' and '.', starting with a letter, at most 64 characters)"
    )


def instant(text: str) -> datetime:
    """An ISO-8601 instant with a time zone (`Z` or an offset)."""
    try:
        when = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        message = f"not an ISO-8601 instant like 2026-01-31T00:00:00Z: {text!r}"
        raise argparse.ArgumentTypeError(message) from None
    if when.tzinfo is None:
        raise argparse.ArgumentTypeError("needs a time zone, e.g. 2026-01-31T00:00:00Z")
    return when
