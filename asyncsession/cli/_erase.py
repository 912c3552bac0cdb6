"""Erasure and keys: `erase-user USER` erases a user; `rotate-keys` rewraps the data keys.

Both use the global encryption setting (`--encryption FILE`, else `$ASYNCSESSION_ENCRYPTION`;
see `asyncsession.cli._encryption`): ``{"kms_providers": {...}, "provider": ...,
"master_key": {...}, "key_vault_namespace": "encryption.__keyVault"}``, the arguments of
`EncryptionOptions` (a local key as base64 text).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import AsyncGenerator
from contextlib import asynccontextmanager
from typing import Any

from pymongo import AsyncMongoClient

from ..memory import MongoMemoryStore
from ..repository import ErasureReport
from ._command import Command, Context
from ._encryption import ENCRYPTION_ENV
from ._errors import EXIT_OK, EXIT_USAGE, Failure

__all__ = ["COMMANDS"]


@asynccontextmanager
async def _client(ctx: Context) -> AsyncGenerator[AsyncMongoClient[Any], None]:
    assert ctx.options.uri is not None  # the command line refuses to start without one
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        ctx.options.uri, tz_aware=True, **ctx.options.client_options()
    )
    try:
        yield client
    finally:
        await client.close()


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
    if ctx.options.is_json or reader is None or not reader.isatty():
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
        {
            "user_id": report.user_id,
            "keys_deleted": report.keys_deleted,
            "sessions_deleted": report.sessions_deleted,
            "memory_entries_deleted": report.memory_entries_deleted,
            "resumed": report.resumed,
        },
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
    async with _client(ctx) as client:
        memories = MongoMemoryStore(client[ctx.options.db], scope="-", collection=ctx.args.memories)
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
    if not ctx.args.encryption:
        message = f"rotate-keys needs the encryption setting: --encryption or ${ENCRYPTION_ENV}"
        raise Failure(EXIT_USAGE, "usage", message)
    keys = ctx.repository.keys
    assert keys is not None  # the store was opened with the setting
    count = await keys.rotate(
        user_id=ctx.args.user, provider=ctx.args.to, master_key=ctx.args.master_key
    )
    ctx.emit({"rewrapped": count}, f"rewrapped {count} data key(s); no content was re-encrypted")
    return EXIT_OK


COMMANDS = (
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
)
