"""`compact`: compact one session now, or many (`--all`) chosen by user, age and size."""

from __future__ import annotations

import argparse
import re
from datetime import UTC, datetime, timedelta
from typing import Any

from ..compaction import (
    CompactionRequest,
    CompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from ..events import Session
from ..exceptions import SessionNotFound
from ..service import DefaultSessionService
from ._command import Command, Context, positive_int
from ._errors import EXIT_OK, EXIT_USAGE, Failure

__all__ = ["COMMANDS", "parse_duration"]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}
_LIMITS = {
    "sliding": ("--max-events", 20),
    "turns": ("--max-turns", 10),
    "tokens": ("--max-tokens", 4000),
}
"""Each strategy's limit flag and its default."""


def parse_duration(text: str) -> timedelta:
    """`90s`, `30m`, `12h`, `7d` or `2w` as a `timedelta`."""
    found = _DURATION.match(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"not a duration like 7d, 12h or 30m: {text!r}")
    return timedelta(**{_UNITS[found.group(2)]: float(found.group(1))})


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id", nargs="?", help="the session to compact (or use --all)")
    parser.add_argument(
        "--strategy",
        choices=list(_LIMITS),
        default="turns",
        help="what to keep: the newest events, turns or tokens (default: turns)",
    )
    for strategy, (flag, default) in _LIMITS.items():
        parser.add_argument(
            flag,
            type=positive_int,
            metavar="N",
            help=f"--strategy {strategy}: keep this many (default: {default})",
        )
    bulk = parser.add_argument_group("bulk compaction (--all)")
    bulk.add_argument("--all", action="store_true", help="compact every session that matches")
    bulk.add_argument(
        "--user",
        action="append",
        default=[],
        dest="users",
        metavar="USER",
        help="whose sessions (repeatable; the store lists sessions by user)",
    )
    bulk.add_argument(
        "--older-than",
        type=parse_duration,
        metavar="AGE",
        help="only sessions created at least AGE ago (7d, 12h, 30m)",
    )
    bulk.add_argument(
        "--min-events",
        type=int,
        default=0,
        metavar="N",
        help="only sessions with at least N active events",
    )


def _limit(args: argparse.Namespace) -> int:
    """The chosen strategy's limit; a limit flag of another strategy is a usage error."""
    for strategy, (flag, _) in _LIMITS.items():
        given = getattr(args, flag[2:].replace("-", "_"))
        if strategy != args.strategy and given is not None:
            message = f"{flag} is for --strategy {strategy}, not --strategy {args.strategy}"
            raise Failure(EXIT_USAGE, "usage", message)
    flag, default = _LIMITS[args.strategy]
    given = getattr(args, flag[2:].replace("-", "_"))
    return default if given is None else int(given)


def _strategy(args: argparse.Namespace) -> CompactionStrategy:
    limit = _limit(args)
    if args.strategy == "sliding":
        return SlidingWindowCompactionStrategy(max_events=limit)
    if args.strategy == "tokens":
        return TokenCountCompactionStrategy(max_tokens=limit)
    return TurnWindowCompactionStrategy(max_turns=limit)


async def _compact_one(
    ctx: Context, service: DefaultSessionService, session_id: str, min_events: int
) -> dict[str, Any]:
    def big_enough(request: CompactionRequest) -> bool:
        return request.current_event_count >= min_events

    result = await service.compact(session_id, big_enough, _strategy(ctx.args))
    return {
        "session_id": session_id,
        "applied": result.applied,
        "archived": result.archived_event_count,
        "active": len(result.compacted_events),
        "version": await ctx.repository.get_event_version(session_id),
    }


async def _compact(ctx: Context) -> int:
    args = ctx.args
    _limit(args)  # refuse a limit flag of another strategy before touching the store
    service = DefaultSessionService(ctx.repository, allow_system_messages=True)
    if args.all:
        return await _compact_all(ctx, service)
    if args.session_id is None:
        raise Failure(EXIT_USAGE, "usage", "compact needs a SESSION, or --all with --user")
    if args.users or args.older_than is not None or args.min_events:
        raise Failure(EXIT_USAGE, "usage", "--user, --older-than and --min-events need --all")
    if await ctx.repository.find_by_id(args.session_id) is None:
        raise SessionNotFound(args.session_id)
    summary = await _compact_one(ctx, service, args.session_id, 0)
    state = "applied" if summary["applied"] else "nothing to do (or another writer won)"
    counts = f"{summary['archived']} archived, {summary['active']} active"
    ctx.emit(summary, f"compaction {state}: {counts}, version {summary['version']}")
    return EXIT_OK


async def _matching(ctx: Context) -> list[Session]:
    args = ctx.args
    cutoff = datetime.now(UTC) - args.older_than if args.older_than is not None else None
    chosen: list[Session] = []
    for user_id in dict.fromkeys(args.users):
        for session in await ctx.repository.find_by_user_id(user_id):
            if cutoff is None or session.created_at <= cutoff:
                chosen.append(session)
    return chosen


async def _compact_all(ctx: Context, service: DefaultSessionService) -> int:
    args = ctx.args
    if args.session_id is not None:
        raise Failure(EXIT_USAGE, "usage", "compact takes a SESSION or --all, not both")
    if not args.users:
        raise Failure(EXIT_USAGE, "usage", "compact --all needs --user (repeatable)")
    sessions = await _matching(ctx)
    results: list[dict[str, Any]] = []
    with ctx.progress("compacting", len(sessions)) as bar:
        for session in sessions:
            results.append(await _compact_one(ctx, service, session.id, args.min_events))
            bar.advance()
    applied = [r for r in results if r["applied"]]
    archived = sum(r["archived"] for r in applied)
    text = f"compacted {len(applied)} of {len(results)} session(s): {archived} event(s) archived"
    counts = {"matched": len(results), "applied": len(applied), "archived": archived}
    ctx.emit({"sessions": results, **counts}, text)
    return EXIT_OK


COMMANDS = (
    Command(
        name="compact",
        help="compact a session now, or many with --all",
        configure=_configure,
        execute=_compact,
    ),
)
