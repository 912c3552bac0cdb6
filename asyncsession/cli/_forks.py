"""Forks and rewinds from the shell: `lineage SESSION` shows where a session came from, its
forks and its rewinds; `fork SESSION` and `rewind SESSION` make them."""

from __future__ import annotations

import argparse

from ..events import EventType
from ..exceptions import SessionNotFound
from ..filters import EventFilter
from ..rewinds import RewindRecord
from ..service import DefaultSessionService
from ._command import Command, Context, point
from ._errors import EXIT_OK

__all__ = ["COMMANDS"]


def _configure_lineage(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")


async def _lineage(ctx: Context) -> int:
    repo, session_id = ctx.repository, ctx.args.session_id
    session = await repo.find_by_id(session_id)
    if session is None:
        raise SessionNotFound(session_id)
    forks = await repo.find_forks(session_id)
    rewinds = [
        (RewindRecord.from_event(event), event)
        for event in await repo.find_events(session_id, EventFilter(event_types=[EventType.REWIND]))
    ]
    origin = session.forked_from
    if ctx.is_json:
        ctx.emit(
            {
                "forked_from": None if origin is None else origin.model_dump(mode="json"),
                "forks": [f.model_dump(mode="json") for f in forks],
                "rewinds": [
                    {
                        "event_id": event.id,
                        "from_version": record.from_version,
                        "to_version": record.to.version,
                        "to_event_id": record.to.event_id,
                    }
                    for record, event in rewinds
                ],
            }
        )
        return EXIT_OK
    if origin is None:
        print(f"{session_id} is no fork", file=ctx.out)
    else:
        after = "" if origin.event_id is None else f", after event {origin.event_id}"
        print(
            f"{session_id} was forked from {origin.session_id} at version {origin.version}{after}",
            file=ctx.out,
        )
    rows = [["FORK", "CREATED", "AT VERSION"]]
    for fork in forks:
        at = "?" if fork.forked_from is None else str(fork.forked_from.version)
        rows.append([fork.id, fork.created_at.isoformat(), at])
    ctx.table(rows)
    print(f"{len(forks)} fork(s)", file=ctx.out)
    rows = [["REWIND", "MADE AT", "TO VERSION", "TO EVENT"]]
    for record, event in rewinds:
        to_event = record.to.event_id or "-"
        rows.append([event.id, str(record.from_version), str(record.to.version), to_event])
    ctx.table(rows)
    print(f"{len(rewinds)} rewind(s)", file=ctx.out)
    return EXIT_OK


def _configure_fork(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--at", type=point, metavar="POINT", help="a version, or the event to fork just after"
    )
    where.add_argument("--before", metavar="EVENT", help="the event to fork just before")
    parser.add_argument("--id", dest="fork_id", metavar="ID", help="the fork's id (default: new)")


async def _fork(ctx: Context) -> int:
    args = ctx.args
    service = DefaultSessionService(ctx.repository)
    fork = await service.fork(args.session_id, at=args.at, before=args.before, fork_id=args.fork_id)
    origin = fork.forked_from
    assert origin is not None
    ctx.emit(
        {"session_id": fork.id, "forked_from": origin.model_dump(mode="json")},
        f"forked {args.session_id!r} at version {origin.version} into {fork.id!r}",
    )
    return EXIT_OK


def _configure_rewind(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("session_id")
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument(
        "--to", type=point, metavar="POINT", help="a version, or the event to rewind to"
    )
    where.add_argument("--before", metavar="EVENT", help="the event to rewind to just before")


async def _rewind(ctx: Context) -> int:
    args = ctx.args
    service = DefaultSessionService(ctx.repository)
    record = await service.rewind(args.session_id, to=args.to, before=args.before)
    ctx.emit(
        {
            "from_version": record.from_version,
            "to_version": record.to.version,
            "to_event_id": record.to.event_id,
        },
        f"rewound {args.session_id!r} to version {record.to.version} "
        f"(undo: rewind --to {record.from_version})",
    )
    return EXIT_OK


COMMANDS = (
    Command(
        name="lineage",
        help="where a session was forked from, its forks and its rewinds",
        configure=_configure_lineage,
        execute=_lineage,
    ),
    Command(name="fork", help="fork a session", configure=_configure_fork, execute=_fork),
    Command(
        name="rewind",
        help="rewind a session's active view to a point (nothing is deleted)",
        configure=_configure_rewind,
        execute=_rewind,
    ),
)
