"""Reading commands: `sessions USER` lists a user's sessions; `show SESSION` prints a log."""

from __future__ import annotations

import argparse

from ..events import SessionEvent
from ..exceptions import SessionNotFound
from ..filters import EventFilter
from ._command import Command, Context
from ._errors import EXIT_OK
from ._output import describe, table
from ._types import event_type, non_negative_int, positive_int

__all__ = ["COMMANDS"]


def _configure_sessions(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("user_id")


async def _sessions(ctx: Context) -> int:
    repo, user_id = ctx.repository, ctx.args.user_id
    sessions = await repo.find_by_user_id(user_id)
    versions = [await repo.get_event_version(session.id) for session in sessions]
    if ctx.options.is_json:
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
    table(rows, ctx.out)
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
    if ctx.options.is_json:
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
    table(rows, ctx.out)
    print(f"{len(events)} event(s), version {version}", file=ctx.out)
    if widened:
        print(
            f"note: showing {len(events)} events for --last {args.last}: the window starts at "
            "its turn's user message, so the turn is shown whole",
            file=ctx.out,
        )
    return EXIT_OK


COMMANDS = (
    Command(
        name="sessions",
        help="list a user's sessions",
        configure=_configure_sessions,
        execute=_sessions,
    ),
    Command(name="show", help="print a session's log", configure=_configure_show, execute=_show),
)
