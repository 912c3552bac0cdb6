"""``asyncsession``: an operator's command line over a MongoDB session store.

    asyncsession [--uri URI] [--db NAME] [--json] COMMAND ...

Commands: ``sessions USER`` lists a user's sessions; ``show SESSION`` prints a session's log
(``--active``, ``--archived``, ``--type``, ``--last``, ``--keyword``); ``export SESSION`` writes
it as JSON Lines; ``compact SESSION`` compacts it now with a chosen strategy; ``sweep`` deletes
expired sessions; ``ensure-indexes`` creates the indexes. The URI defaults to ``MONGODB_URI``.

Exit codes: 0 done; 1 failed; 2 bad usage; 3 unknown session; 4 MongoDB unreachable or the URI
is invalid.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

import anyio

from ..events import Session, SessionEvent
from ..exceptions import AsyncSessionError, SessionNotFound, StorageError
from ..filters import EventFilter
from ..messages import AssistantMessage, ToolResponseMessage
from ._worker import add_worker_command, run_worker_command

__all__ = ["main", "run"]

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_NOT_FOUND, EXIT_UNREACHABLE = 0, 1, 2, 3, 4
EXPORT_PAGE = 500


class _Unreachable(Exception):
    pass


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="asyncsession", description="Inspect and manage asyncsession sessions on MongoDB."
    )
    parser.add_argument(
        "--uri", default=os.environ.get("MONGODB_URI"), help="MongoDB URI (default: $MONGODB_URI)"
    )
    parser.add_argument(
        "--db", default=os.environ.get("ASYNCSESSION_DB", "asyncsession"), help="database name"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds to find the server")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    sessions = commands.add_parser("sessions", help="list a user's sessions")
    sessions.add_argument("user_id")

    show = commands.add_parser("show", help="print a session's log")
    show.add_argument("session_id")
    view = show.add_mutually_exclusive_group()
    view.add_argument("--active", action="store_true", help="only what the model sees")
    view.add_argument("--archived", action="store_true", help="only archived events")
    show.add_argument(
        "--type",
        action="append",
        default=[],
        dest="types",
        metavar="TYPE",
        help="event type (USER, ASSISTANT, TOOL, SYSTEM or a custom one); repeatable",
    )
    show.add_argument("--last", type=int, metavar="N", help="the newest N events")
    show.add_argument("--keyword", help="only events whose text contains this")

    export = commands.add_parser("export", help="write a session's log as JSON Lines")
    export.add_argument("session_id")
    export.add_argument("--output", "-o", help="file to write (default: standard output)")

    compact = commands.add_parser("compact", help="compact a session now")
    compact.add_argument("session_id")
    compact.add_argument("--strategy", choices=["sliding", "turns", "tokens"], default="turns")
    compact.add_argument("--max-events", type=int, default=20)
    compact.add_argument("--max-turns", type=int, default=10)
    compact.add_argument("--max-tokens", type=int, default=4000)

    sweep = commands.add_parser("sweep", help="delete expired sessions")
    sweep.add_argument("--before", help="ISO-8601 instant (default: now)")

    commands.add_parser("ensure-indexes", help="create the store's indexes (idempotent)")
    add_worker_command(commands)
    return parser


def _describe(event: SessionEvent) -> str:
    message = event.message
    if message is None:
        return json.dumps(event.payload, ensure_ascii=False)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return (f"{message.text} " if message.text else "") + f"-> {calls}"
    if isinstance(message, ToolResponseMessage):
        return ", ".join(f"{r.name or r.id} = {r.data}" for r in message.responses)
    return message.text or ""


def _table(rows: Sequence[Sequence[str]], out: TextIO) -> None:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row, widths, strict=True)]
        print("  ".join(cells).rstrip(), file=out)


def _session_json(session: Session) -> dict[str, Any]:
    return session.model_dump(mode="json")


async def _open(args: argparse.Namespace) -> Any:
    if not args.uri:
        raise _Unreachable("no MongoDB URI: pass --uri or set MONGODB_URI")
    from ..repository.mongo import MongoSessionRepository

    try:
        repository = MongoSessionRepository.from_uri(
            args.uri, args.db, serverSelectionTimeoutMS=int(args.timeout * 1000)
        )
    except Exception as exc:  # pymongo raises several types for a malformed URI
        raise _Unreachable(f"invalid MongoDB URI: {exc}") from exc
    return repository


async def _sessions(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    sessions: list[Session] = await repo.find_by_user_id(args.user_id)
    if args.json:
        print(json.dumps([_session_json(s) for s in sessions]), file=out)
        return EXIT_OK
    rows = [["SESSION", "CREATED", "EXPIRES", "VERSION"]]
    for session in sessions:
        version = await repo.get_event_version(session.id)
        expires = session.expires_at.isoformat() if session.expires_at else "never"
        rows.append([session.id, session.created_at.isoformat(), expires, str(version)])
    _table(rows, out)
    print(f"{len(sessions)} session(s) of {args.user_id}", file=out)
    return EXIT_OK


async def _require_session(repo: Any, session_id: str) -> Session:
    session: Session | None = await repo.find_by_id(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    return session


async def _show(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    filter = EventFilter(
        exclude_archived=args.active,
        active_view=args.active,
        event_types=args.types or None,
        last_n=None if args.archived else args.last,  # --last then counts archived events
        keyword=args.keyword,
    )
    snapshot = await repo.read_snapshot(args.session_id, filter)  # session, version, events
    if snapshot is None:
        raise SessionNotFound(args.session_id)
    events: list[SessionEvent] = list(snapshot.events)
    if args.archived:
        events = [e for e in events if e.archived]
        if args.last is not None:
            events = events[-args.last :] if args.last else []
    version = snapshot.version
    if args.json:
        print(
            json.dumps({"version": version, "events": [e.model_dump(mode="json") for e in events]}),
            file=out,
        )
        return EXIT_OK
    rows = [["#", "TIME", "TYPE", "FLAGS", "CONTENT"]]
    for number, event in enumerate(events, 1):
        flags = ",".join(
            f for f, on in (("archived", event.archived), ("synthetic", event.is_synthetic)) if on
        )
        rows.append(
            [
                str(number),
                event.timestamp.isoformat(),
                str(event.type),
                flags or "-",
                _describe(event),
            ]
        )
    _table(rows, out)
    print(f"{len(events)} event(s), version {version}", file=out)
    return EXIT_OK


async def _export(repo: Any, args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    await _require_session(repo, args.session_id)
    target = await anyio.open_file(args.output, "w", encoding="utf-8") if args.output else None
    written = 0
    try:
        page = 0
        while True:
            events = await repo.find_events(
                args.session_id, EventFilter(page=page, page_size=EXPORT_PAGE)
            )
            lines = "".join(event.model_dump_json() + "\n" for event in events)
            if target is None:
                out.write(lines)
            else:
                await target.write(lines)
            written += len(events)
            print(f"exported {written} event(s)...", file=err)
            if len(events) < EXPORT_PAGE:
                break
            page += 1
    finally:
        if target is not None:
            await target.aclose()
    if args.json:
        print(json.dumps({"session_id": args.session_id, "events": written}), file=err)
    return EXIT_OK


async def _compact(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    from ..compaction import (
        SlidingWindowCompactionStrategy,
        TokenCountCompactionStrategy,
        TurnWindowCompactionStrategy,
    )
    from ..service import DefaultSessionService

    strategy: Any
    if args.strategy == "sliding":
        strategy = SlidingWindowCompactionStrategy(max_events=args.max_events)
    elif args.strategy == "tokens":
        strategy = TokenCountCompactionStrategy(max_tokens=args.max_tokens)
    else:
        strategy = TurnWindowCompactionStrategy(max_turns=args.max_turns)
    service = DefaultSessionService(repo, allow_system_messages=True)
    result = await service.compact(args.session_id, lambda _: True, strategy)
    version = await repo.get_event_version(args.session_id)
    summary = {
        "session_id": args.session_id,
        "applied": result.applied,
        "archived": result.archived_event_count,
        "active": len(result.compacted_events),
        "version": version,
    }
    if args.json:
        print(json.dumps(summary), file=out)
    else:
        state = "applied" if result.applied else "nothing to do (or another writer won)"
        counts = f"{summary['archived']} archived, {summary['active']} active"
        print(f"compaction {state}: {counts}, version {version}", file=out)
    return EXIT_OK


async def _sweep(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    before = datetime.now(UTC)
    if args.before:
        before = datetime.fromisoformat(args.before.replace("Z", "+00:00"))
        if before.tzinfo is None:
            raise ValueError("--before needs a time zone, e.g. 2026-01-31T00:00:00Z")
    deleted = await repo.delete_expired_sessions(before)
    print(
        json.dumps({"deleted": deleted}) if args.json else f"deleted {deleted} expired session(s)",
        file=out,
    )
    return EXIT_OK


async def _ensure_indexes(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    await repo.ensure_indexes()
    print(json.dumps({"indexes": "ok"}) if args.json else "indexes are in place", file=out)
    return EXIT_OK


async def run(
    argv: Sequence[str] | None = None, *, out: TextIO | None = None, err: TextIO | None = None
) -> int:
    """Run the command line with ``argv``; returns the exit code."""
    out = out or sys.stdout
    err = err or sys.stderr
    try:
        args = _parser().parse_args(argv)
    except SystemExit as exit_:
        return int(exit_.code or 0) if exit_.code in (0, None) else EXIT_USAGE
    try:
        repo = await _open(args)
    except _Unreachable as exc:
        print(f"error: {exc}", file=err)
        return EXIT_UNREACHABLE
    try:
        if args.command == "sessions":
            return await _sessions(repo, args, out)
        if args.command == "show":
            return await _show(repo, args, out)
        if args.command == "export":
            return await _export(repo, args, out, err)
        if args.command == "compact":
            return await _compact(repo, args, out)
        if args.command == "sweep":
            return await _sweep(repo, args, out)
        if args.command == "worker":
            return await run_worker_command(repo, args, out)
        return await _ensure_indexes(repo, args, out)
    except SessionNotFound as exc:
        print(f"error: unknown session {exc.session_id!r}", file=err)
        return EXIT_NOT_FOUND
    except StorageError as exc:
        print(f"error: cannot reach MongoDB ({exc.__cause__ or exc})", file=err)
        return EXIT_UNREACHABLE
    except (AsyncSessionError, ValueError) as exc:
        print(f"error: {exc}", file=err)
        return EXIT_FAILED
    finally:
        await repo.aclose()


def main(argv: Sequence[str] | None = None) -> None:
    """The ``asyncsession`` console script."""
    sys.exit(asyncio.run(run(argv)))
