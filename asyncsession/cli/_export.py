"""`export SESSION`: write a session's whole log as JSON Lines, page by page.

An event whose body the store offloaded (a large tool output) is written whole: its body is
read back (`SessionRepository.read_body`) in place of the preview the log holds.
"""

from __future__ import annotations

import argparse
import json

import anyio

from .._offload import OffloadedBody
from ..events import SessionEvent
from ..exceptions import SessionNotFound
from ..filters import EventFilter
from ..repository import SessionRepository
from ._command import Command, Context
from ._errors import EXIT_OK

__all__ = ["COMMANDS", "EXPORT_PAGE"]

EXPORT_PAGE = 500


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    parser.add_argument(
        "--output", "-o", help="file to write; - is standard output (default: standard output)"
    )


async def _whole(repo: SessionRepository, event: SessionEvent) -> SessionEvent:
    """The event with its whole body (the preview when the body is gone)."""
    if OffloadedBody.of(event) is None:
        return event
    whole = await repo.read_body(event.session_id, event.id)
    return event if whole is None else whole.model_copy(update={"archived": event.archived})


async def _export(ctx: Context) -> int:
    args, repo = ctx.args, ctx.repository
    if await repo.find_by_id(args.session_id) is None:
        raise SessionNotFound(args.session_id)
    to_file = args.output not in (None, "-")
    target = await anyio.open_file(args.output, "w", encoding="utf-8") if to_file else None
    written = 0
    try:
        with ctx.progress(f"exporting {args.session_id}") as bar:
            page = 0
            while True:
                events = await repo.find_events(
                    args.session_id, EventFilter(page=page, page_size=EXPORT_PAGE)
                )
                whole = [await _whole(repo, event) for event in events]
                lines = "".join(event.model_dump_json() + "\n" for event in whole)
                if target is None:
                    ctx.out.write(lines)
                else:
                    await target.write(lines)
                written += len(events)
                bar.advance(len(events))
                if len(events) < EXPORT_PAGE:
                    break
                page += 1
    finally:
        if target is not None:
            await target.aclose()
    summary = {"session_id": args.session_id, "events": written}
    if ctx.options.is_json and target is not None:
        ctx.emit(summary)
    elif ctx.options.is_json:  # standard output holds the events themselves
        print(json.dumps(summary), file=ctx.err)
    else:
        print(f"exported {written} event(s) of {args.session_id}", file=ctx.err)
    return EXIT_OK


COMMANDS = (
    Command(
        name="export",
        help="write a session's log as JSON Lines",
        configure=_configure,
        execute=_export,
    ),
)
