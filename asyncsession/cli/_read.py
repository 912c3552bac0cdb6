"""Reading commands: `sessions USER` lists a user's sessions, `show SESSION` prints a log and
`export SESSION` writes it whole as JSON Lines (an offloaded body read back in place of its
preview)."""

from __future__ import annotations

import argparse
import json

import anyio

from .._describe import describe
from .._offload import OffloadedBody
from ..events import SessionEvent
from ..exceptions import SessionNotFound
from ..filters import EventFilter
from ..repository import SessionRepository
from ._command import Command, Context, event_type, non_negative_int, positive_int
from ._errors import EXIT_OK

__all__ = ["COMMANDS", "EXPORT_PAGE"]

EXPORT_PAGE = 500


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id")


async def _sessions(ctx: Context) -> int:
    repo, user_id = ctx.repository, ctx.args.user_id
    sessions = await repo.find_by_user_id(user_id)
    versions = [await repo.get_event_version(session.id) for session in sessions]
    if ctx.is_json:
        ctx.emit(
            [
                {**session.model_dump(mode="json"), "version": version}
                for session, version in zip(sessions, versions, strict=True)
            ]
        )
        return EXIT_OK
    rows = [["SESSION", "CREATED", "EXPIRES", "VERSION"]]
    for session, version in zip(sessions, versions, strict=True):
        expires = session.expires_at.isoformat() if session.expires_at else "never"
        rows.append([session.id, session.created_at.isoformat(), expires, str(version)])
    ctx.table(rows)
    print(f"{len(sessions)} session(s) of {user_id}", file=ctx.out)
    return EXIT_OK


def _configure_show(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--active", action="store_true", help="only what the model sees")
    view.add_argument("--archived", action="store_true", help="only archived events")
    parser.add_argument(
        "--type",
        action="append",
        default=[],
        dest="types",
        type=event_type,
        metavar="TYPE",
        help="event type: user, assistant, tool, system or compaction (any case), or a custom "
        "type by its full name, e.g. ACME.AUDIT; repeatable",
    )
    parser.add_argument(
        "--last",
        type=positive_int,
        metavar="N",
        help="the newest N events; the window may start earlier to keep a turn whole",
    )
    parser.add_argument("--keyword", help="only events whose text contains this")
    parser.add_argument(
        "--as-of",
        type=non_negative_int,
        metavar="VERSION",
        help="the log as it was at this version: what the model saw then (with --active)",
    )


async def _show(ctx: Context) -> int:
    args = ctx.args
    filter = EventFilter(
        exclude_archived=args.active,
        active_view=args.active,
        event_types=args.types or None,
        last_n=None if args.archived else args.last,  # --last then counts archived events
        keyword=args.keyword,
        as_of=args.as_of,
    )
    snapshot = await ctx.repository.read_snapshot(args.session_id, filter)
    if snapshot is None:
        raise SessionNotFound(args.session_id)
    events: list[SessionEvent] = list(snapshot.events)
    if args.archived:
        events = [e for e in events if e.archived]
        if args.last is not None:
            events = events[-args.last :] if args.last else []
    version = snapshot.version
    widened = args.last is not None and len(events) > args.last
    if ctx.is_json:
        body: dict[str, object] = {
            "version": version,
            "events": [e.model_dump(mode="json") for e in events],
        }
        if args.last is not None:
            body["extended_to_turn_start"] = widened
        ctx.emit(body)
        return EXIT_OK
    rows = [["#", "TIME", "TYPE", "FLAGS", "CONTENT"]]
    for number, event in enumerate(events, 1):
        flags = ",".join(
            f for f, on in (("archived", event.archived), ("synthetic", event.is_synthetic)) if on
        )
        time, kind = event.timestamp.isoformat(), str(event.type)
        rows.append([str(number), time, kind, flags or "-", describe(event)])
    ctx.table(rows)
    print(f"{len(events)} event(s), version {version}", file=ctx.out)
    if widened:
        print(
            f"note: showing {len(events)} events for --last {args.last}: the window starts at "
            "its turn's user message, so the turn is shown whole",
            file=ctx.out,
        )
    return EXIT_OK


def _configure_export(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    parser.add_argument(
        "--output", "-o", help="file to write; - is standard output (default: standard output)"
    )


async def _whole(repo: SessionRepository, event: SessionEvent) -> SessionEvent:
    """The event with its whole body (its preview when the body is gone)."""
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
    if ctx.is_json and target is not None:
        ctx.emit(summary)
    elif ctx.is_json:  # standard output holds the events themselves
        print(json.dumps(summary), file=ctx.err)
    else:
        print(f"exported {written} event(s) of {args.session_id}", file=ctx.err)
    return EXIT_OK


COMMANDS = (
    Command(
        name="sessions",
        help="list a user's sessions",
        configure=_configure_sessions,
        execute=_sessions,
    ),
    Command(name="show", help="print a session's log", configure=_configure_show, execute=_show),
    Command(
        name="export",
        help="write a session's log as JSON Lines",
        configure=_configure_export,
        execute=_export,
    ),
)
