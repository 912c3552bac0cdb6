"""``asyncsession worker``: run one compaction queue worker until SIGTERM or SIGINT.

    asyncsession worker [--strategy turns] [--trigger always] [--concurrency 4] [--lease 30]

It claims jobs from the MongoDB compaction queue (``compaction_jobs``) that web processes fill
with ``MongoCompactionQueue.submit`` and compacts them with the chosen strategy, printing one
line per finished job (a JSON object per line under ``--json``). ``--status`` prints the queue's
job counts and its failed jobs instead, and exits.

On SIGTERM or SIGINT it stops claiming and finishes the jobs it holds for up to ``--grace``
seconds; then (or on a second signal) it cancels them and gives their jobs back to the queue,
due at once, and exits 0. A job is compacted whole or not at all. Killed outright (SIGKILL),
its leases expire after ``--lease`` seconds and other workers take the jobs over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from typing import Any, TextIO

from ..compaction import (
    CompactionOutcome,
    CompactionStrategy,
    MongoCompactionQueue,
    MongoCompactionWorker,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TokenCountTrigger,
    TriggerLike,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
)
from ..service import DefaultSessionService
from ._command import Command, Context

__all__ = ["COMMANDS", "HELP", "configure", "run_worker_command", "serve"]


HELP = "run a compaction queue worker until SIGTERM/SIGINT"
"""The command's line in ``asyncsession --help``."""


def configure(worker: argparse.ArgumentParser) -> None:
    """Add the ``worker`` command's own arguments to its parser."""
    worker.add_argument(
        "--strategy", choices=["sliding", "turns", "tokens"], default="turns", help="what to keep"
    )
    worker.add_argument("--max-events", type=int, default=20, help="sliding: events to keep")
    worker.add_argument("--max-turns", type=int, default=10, help="turns: turns to keep")
    worker.add_argument("--max-tokens", type=int, default=4000, help="tokens: tokens to keep")
    worker.add_argument(
        "--trigger",
        choices=["always", "turns", "tokens"],
        default="always",
        help="when a claimed session is compacted (always: the submitter decided)",
    )
    worker.add_argument("--trigger-turns", type=int, default=20, help="turns: more than N turns")
    worker.add_argument("--trigger-tokens", type=int, default=8000, help="tokens: over N tokens")
    worker.add_argument("--concurrency", type=int, default=4, help="jobs held at once")
    worker.add_argument("--lease", type=float, default=30.0, help="seconds a claim holds")
    worker.add_argument(
        "--wake", choices=["auto", "change_stream", "poll"], default="auto", help="how to wake"
    )
    worker.add_argument("--poll-interval", type=float, default=1.0, help="seconds, when polling")
    worker.add_argument("--max-attempts", type=int, default=5, help="runs before a job fails")
    worker.add_argument("--backoff", type=float, default=1.0, help="seconds before a retry")
    worker.add_argument(
        "--grace", type=float, default=30.0, help="seconds to finish held jobs on SIGTERM"
    )
    worker.add_argument("--queue-collection", default="compaction_jobs", help="jobs collection")
    worker.add_argument("--status", action="store_true", help="print the queue's state and exit")


def _strategy(args: argparse.Namespace) -> CompactionStrategy:
    if args.strategy == "sliding":
        return SlidingWindowCompactionStrategy(max_events=args.max_events)
    if args.strategy == "tokens":
        return TokenCountCompactionStrategy(max_tokens=args.max_tokens)
    return TurnWindowCompactionStrategy(max_turns=args.max_turns)


def _trigger(args: argparse.Namespace) -> TriggerLike:
    if args.trigger == "turns":
        return TurnCountTrigger(args.trigger_turns)
    if args.trigger == "tokens":
        return TokenCountTrigger(args.trigger_tokens)
    return lambda _: True


def _outcome_line(outcome: CompactionOutcome, *, as_json: bool) -> str:
    result = outcome.result
    if as_json:
        return json.dumps(
            {
                "session_id": outcome.session_id,
                "ok": outcome.ok,
                "applied": None if result is None else result.applied,
                "archived": None if result is None else result.archived_event_count,
                "error": None if outcome.error is None else str(outcome.error),
            }
        )
    if result is not None:
        state = "applied" if result.applied else "nothing to do (or another writer won)"
        return f"compacted {outcome.session_id}: {state}, {result.archived_event_count} archived"
    return f"compaction of {outcome.session_id} failed: {outcome.error}"


async def serve(
    worker: MongoCompactionWorker, *, grace: float, out: TextIO, as_json: bool = False
) -> None:
    """Run ``worker`` until SIGTERM or SIGINT, then stop it as the module docs describe."""
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    again = asyncio.Event()

    def on_signal() -> None:
        if signalled.is_set():
            again.set()
        signalled.set()

    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        async with worker:
            state = {"worker": worker.owner, "wake": worker.wake_mode, "state": "running"}
            _say(out, state, as_json, f"worker {worker.owner} running ({worker.wake_mode})")
            await signalled.wait()
            _say(out, {**state, "state": "stopping"}, as_json, "stopping: finishing held jobs")
            drain = asyncio.ensure_future(_drain(worker, grace))
            second = asyncio.ensure_future(again.wait())
            await asyncio.wait({drain, second}, return_when=asyncio.FIRST_COMPLETED)
            second.cancel()
            if not drain.done():  # a second signal: give the held jobs back now
                drain.cancel()
            await asyncio.wait({drain, second})
        _say(out, {**state, "state": "stopped"}, as_json, "stopped")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def _drain(worker: MongoCompactionWorker, grace: float) -> None:
    try:
        async with asyncio.timeout(grace):
            await worker.aclose(drain=True)
    except TimeoutError:
        pass  # the held jobs went back to the queue


def _say(out: TextIO, data: dict[str, Any], as_json: bool, text: str) -> None:
    print(json.dumps(data) if as_json else text, file=out, flush=True)


async def _status(queue: MongoCompactionQueue, args: argparse.Namespace, out: TextIO) -> int:
    counts = await queue.count_jobs()
    failed = await queue.list_jobs("failed")
    if args.json:
        jobs = [job.model_dump(mode="json") for job in failed]
        print(json.dumps({"counts": counts, "failed": jobs}), file=out)
        return 0
    print(", ".join(f"{n} {state}" for state, n in counts.items()), file=out)
    for job in failed:
        line = f"failed {job.session_id} after {job.attempts} attempt(s): {job.last_error}"
        print(line, file=out)
    return 0


async def run_worker_command(repo: Any, args: argparse.Namespace, out: TextIO) -> int:
    """Run the ``worker`` command over the opened session store ``repo``; the exit code."""
    queue = MongoCompactionQueue.from_uri(
        args.uri,
        args.db,
        collection=args.queue_collection,
        serverSelectionTimeoutMS=int(args.timeout * 1000),
    )
    async with queue:
        if args.status:
            return await _status(queue, args, out)
        await repo.ensure_indexes()
        await queue.ensure_indexes()
        worker = MongoCompactionWorker(
            DefaultSessionService(repo, allow_system_messages=True),
            _trigger(args),
            _strategy(args),
            queue=queue,
            max_concurrency=args.concurrency,
            lease=args.lease,
            wake=args.wake,
            poll_interval=args.poll_interval,
            max_attempts=args.max_attempts,
            backoff=args.backoff,
            on_outcome=lambda o: print(_outcome_line(o, as_json=args.json), file=out, flush=True),
        )
        await serve(worker, grace=args.grace, out=out, as_json=args.json)
    return 0


async def _execute(ctx: Context) -> int:
    return await run_worker_command(ctx.repository, ctx.args, ctx.out)


COMMANDS = (Command(name="worker", help=HELP, configure=configure, execute=_execute),)
"""The ``worker`` command, registered in `asyncsession.cli._registry`."""
