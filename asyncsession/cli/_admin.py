"""Store administration: `ensure-indexes` creates the store's indexes (idempotent)."""

from __future__ import annotations

import argparse

from ._command import Command, Context
from ._errors import EXIT_OK

__all__ = ["COMMANDS"]


def _configure(parser: argparse.ArgumentParser) -> None:
    del parser  # no arguments of its own


async def _ensure_indexes(ctx: Context) -> int:
    await ctx.repository.ensure_indexes()
    ctx.emit({"indexes": "ok"}, "indexes are in place")
    return EXIT_OK


COMMANDS = (
    Command(
        name="ensure-indexes",
        help="create the store's indexes (idempotent)",
        configure=_configure,
        execute=_ensure_indexes,
    ),
)
