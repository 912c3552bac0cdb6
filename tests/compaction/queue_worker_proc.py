"""A compaction queue worker (or submitter) in a process of its own, for the process tests.

    python queue_worker_proc.py work URI DB --mode gate|archive|record [--lease S] ...
    python queue_worker_proc.py submit URI DB SESSION TIMES

It speaks JSON lines on stdout: ``{"state": "running"}`` once it is claiming, ``{"started":
sid}`` when a compaction starts, ``{"outcome": sid, ...}`` when one ends. ``gate`` compactions
wait for a line on stdin before they archive; ``record`` ones count, in the ``probe``
collection, how many run at once per session.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from typing import Any

from pymongo import AsyncMongoClient, ReturnDocument
from queue_support import ArchiveOldest, always

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession._compaction_pass import CompactionOutcome
from asyncsession.cli._worker import serve
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    MongoCompactionQueue,
    MongoCompactionWorker,
)


def say(**data: Any) -> None:
    print(json.dumps(data), flush=True)


class Gate(ArchiveOldest):
    """Says it started, then waits for a line on stdin."""

    def __init__(self, stdin: asyncio.StreamReader) -> None:
        super().__init__()
        self.stdin = stdin

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        say(started=request.session.id, pid=os.getpid())
        await self.stdin.readline()
        return await super().compact(request)


class Record(ArchiveOldest):
    """Counts concurrent runs per session in the ``probe`` collection."""

    def __init__(self, probe: Any) -> None:
        super().__init__()
        self.probe = probe

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        sid = request.session.id
        before = await self.probe.find_one_and_update(
            {"_id": sid},
            {"$inc": {"active": 1, "runs": 1}},
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        if before is not None and before.get("active", 0) > 0:
            await self.probe.update_one({"_id": sid}, {"$inc": {"overlaps": 1}})
        try:
            await asyncio.sleep(0.02)  # the work: long enough for a second runner to overlap
            return await super().compact(request)
        finally:
            await self.probe.update_one({"_id": sid}, {"$inc": {"active": -1}})


async def stdin_reader() -> asyncio.StreamReader:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    return reader


def report(outcome: CompactionOutcome) -> None:
    result = outcome.result
    say(
        outcome=outcome.session_id,
        ok=outcome.ok,
        applied=None if result is None else result.applied,
        error=None if outcome.error is None else str(outcome.error),
        pid=os.getpid(),
    )


async def work(args: argparse.Namespace) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    db = client[args.db]
    strategy: ArchiveOldest
    if args.mode == "gate":
        strategy = Gate(await stdin_reader())
    elif args.mode == "record":
        strategy = Record(db["probe"])
    else:
        strategy = ArchiveOldest()
    queue = MongoCompactionQueue(db)
    worker = MongoCompactionWorker(
        DefaultSessionService(MongoSessionRepository(db)),
        always,
        strategy,
        queue=queue,
        max_concurrency=args.concurrency,
        lease=args.lease,
        wake=args.wake,
        poll_interval=0.05,
        on_outcome=report,
        owner=args.owner,
    )
    try:
        await serve(worker, grace=args.grace, out=sys.stdout, as_json=True)
    finally:
        await client.close()


async def submit(args: argparse.Namespace) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(args.uri, tz_aware=True)
    try:
        queue = MongoCompactionQueue(client[args.db])
        say(state="ready")
        await asyncio.gather(*(queue.submit(args.session) for _ in range(args.times)))
        say(submitted=args.times)
    finally:
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("work")
    run.add_argument("uri")
    run.add_argument("db")
    run.add_argument("--mode", choices=["gate", "archive", "record"], default="archive")
    run.add_argument("--lease", type=float, default=30.0)
    run.add_argument("--concurrency", type=int, default=2)
    run.add_argument("--wake", default="auto")
    run.add_argument("--grace", type=float, default=30.0)
    run.add_argument("--owner", default=None)
    put = commands.add_parser("submit")
    put.add_argument("uri")
    put.add_argument("db")
    put.add_argument("session")
    put.add_argument("times", type=int)
    args = parser.parse_args()
    asyncio.run(work(args) if args.command == "work" else submit(args))


if __name__ == "__main__":
    main()
