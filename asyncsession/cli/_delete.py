"""Removing sessions: `delete SESSION` removes one; `sweep` deletes the expired ones."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from ..exceptions import SessionNotFound
from ._command import Command, Context
from ._errors import EXIT_OK, EXIT_USAGE, Failure
from ._types import instant

__all__ = ["COMMANDS"]


def _configure_delete(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    parser.add_argument(
        "--yes", action="store_true", help="really delete (required: a delete cannot be undone)"
    )


async def _delete(ctx: Context) -> int:
    session_id = ctx.args.session_id
    if not ctx.args.yes:
        raise Failure(
            EXIT_USAGE, "usage", f"deleting {session_id!r} cannot be undone: add --yes to do it"
        )
    if await ctx.repository.find_by_id(session_id) is None:
        raise SessionNotFound(session_id)
    await ctx.repository.delete(session_id)
    ctx.emit(
        {"session_id": session_id, "deleted": True},
        f"deleted session {session_id!r} with its events",
    )
    return EXIT_OK


def _configure_sweep(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--before",
        type=instant,
        metavar="INSTANT",
        help="ISO-8601 instant with a time zone, e.g. 2026-01-31T00:00:00Z (default: now)",
    )


async def _sweep(ctx: Context) -> int:
    before: datetime = ctx.args.before or datetime.now(UTC)
    bar = ctx.progress("sweeping expired sessions")
    with bar:  # the store sweeps in one call: the bar shows the time it has taken
        deleted = await bar.around(ctx.repository.delete_expired_sessions(before))
    ctx.emit({"deleted": deleted}, f"deleted {deleted} expired session(s)")
    return EXIT_OK


COMMANDS = (
    Command(
        name="delete",
        help="delete a session and its events",
        configure=_configure_delete,
        execute=_delete,
    ),
    Command(
        name="sweep", help="delete expired sessions", configure=_configure_sweep, execute=_sweep
    ),
)
