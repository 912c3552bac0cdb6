"""Removing and keeping the store: `delete SESSION`, `sweep` (the expired sessions),
`ensure-indexes`, `erase-user USER` (a user's data key, sessions, events and memories) and
`rotate-keys` (rewraps the data keys). The last two use the global encryption setting
(`--encryption FILE`): the arguments of `EncryptionOptions` as a JSON object."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from datetime import UTC, datetime
from typing import Any

from pymongo import AsyncMongoClient

from ..exceptions import SessionNotFound
from ..memory import MongoMemoryStore
from ..repository import ErasureReport
from ._command import Command, Context, client_options, instant
from ._errors import EXIT_OK, EXIT_USAGE, Failure

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


async def _ensure_indexes(ctx: Context) -> int:
    await ctx.repository.ensure_indexes()
    ctx.emit({"indexes": "ok"}, "indexes are in place")
    return EXIT_OK


def _configure_erase(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id", nargs="?", help="the user to erase")
    parser.add_argument(
        "--yes", action="store_true", help="do not ask: an erasure cannot be undone"
    )
    parser.add_argument(
        "--pending",
        action="store_true",
        help="finish the erasures a crash interrupted instead (no USER)",
    )
    parser.add_argument(
        "--memories",
        metavar="COLLECTION",
        default="memories",
        help="the memory stores' collection (default: memories)",
    )


def _confirmed(ctx: Context, user_id: str) -> bool:
    if ctx.args.yes:
        return True
    reader = sys.stdin
    if ctx.is_json or reader is None or not reader.isatty():
        raise Failure(
            EXIT_USAGE,
            "usage",
            f"erasing {user_id!r} cannot be undone: add --yes to do it without a question",
        )
    print(
        f"Erase user {user_id!r}: their data key, sessions, events and memories, for good.\n"
        "Type the user id to confirm: ",
        end="",
        file=ctx.err,
        flush=True,
    )
    return reader.readline().strip() == user_id


def _emit_report(ctx: Context, report: ErasureReport) -> None:
    ctx.emit(
        dataclasses.asdict(report),
        f"erased user {report.user_id!r}: {report.keys_deleted} data key(s), "
        f"{report.sessions_deleted} session(s), {report.memory_entries_deleted} memory "
        f"entr{'y' if report.memory_entries_deleted == 1 else 'ies'}"
        + (" (finished an interrupted erasure)" if report.resumed else ""),
    )


async def _erase(ctx: Context) -> int:
    user_id: str | None = ctx.args.user_id
    if ctx.args.pending == (user_id is not None):
        raise Failure(EXIT_USAGE, "usage", "name one USER to erase, or --pending, not both")
    if user_id is not None and not _confirmed(ctx, user_id):
        ctx.note("not confirmed: nothing was erased")
        return EXIT_USAGE
    keys = ctx.repository.keys  # the store's, from the global setting
    if keys is None:
        ctx.note(
            "no encryption setting (--encryption): no data key is deleted, and copies of the "
            "content in backups stay readable"
        )
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        ctx.args.uri, tz_aware=True, **client_options(ctx.args)
    )
    async with client:
        memories = MongoMemoryStore(client[ctx.args.db], scope="-", collection=ctx.args.memories)
        if user_id is not None:
            _emit_report(ctx, await ctx.repository.erase_user(user_id, memories=memories))
        else:
            reports = await ctx.repository.finish_erasures(memories=memories)
            for report in reports:
                _emit_report(ctx, report)
            if not reports:
                ctx.emit({"finished": 0}, "no erasure was pending")
    return EXIT_OK


def _configure_rotate(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--user", metavar="USER", help="only this user's key (default: all)")
    parser.add_argument(
        "--to",
        metavar="PROVIDER",
        help="move the keys to this provider of the setting (default: the one each key has)",
    )
    parser.add_argument(
        "--master-key",
        metavar="JSON",
        type=json.loads,
        help="the master key of --to, as JSON (e.g. an AWS key's region and ARN)",
    )


async def _rotate(ctx: Context) -> int:
    keys = ctx.repository.keys  # the store's, from the global setting
    if keys is None:
        message = (
            "rotate-keys needs the encryption setting: --encryption or $ASYNCSESSION_ENCRYPTION"
        )
        raise Failure(EXIT_USAGE, "usage", message)
    count = await keys.rotate(
        user_id=ctx.args.user, provider=ctx.args.to, master_key=ctx.args.master_key
    )
    ctx.emit({"rewrapped": count}, f"rewrapped {count} data key(s); no content was re-encrypted")
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
    Command(
        name="erase-user",
        help="erase a user: their data key first, then sessions, events and memories",
        configure=_configure_erase,
        execute=_erase,
    ),
    Command(
        name="rotate-keys",
        help="rewrap the users' data keys under a master key (content is not re-encrypted)",
        configure=_configure_rotate,
        execute=_rotate,
    ),
    Command(
        name="ensure-indexes",
        help="create the store's indexes (idempotent)",
        configure=lambda parser: None,
        execute=_ensure_indexes,
    ),
)
