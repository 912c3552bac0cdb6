"""``asyncsession worker``: run one compaction queue worker until SIGTERM or SIGINT.

    asyncsession worker [--strategy turns] [--trigger always] [--concurrency 4] [--lease 30]

It claims jobs from the MongoDB compaction queue (``compaction_jobs``) that web processes fill
with ``MongoCompactionQueue.submit`` and compacts them with the chosen strategy, printing one
line per finished job (a JSON object per line under ``--json``). ``--status`` prints the queue's
job counts and its failed jobs instead, and exits.

On SIGTERM or SIGINT it stops claiming and finishes the jobs it holds for up to ``--grace``
seconds; then (or on a second signal) it cancels them and gives their jobs back to the queue,
due at once, and exits 0. A reader of its output that goes away (``worker | head -3``) stops it
the same way. A job is compacted whole or not at all. Killed outright (SIGKILL), its leases
expire after ``--lease`` seconds and other workers take the jobs over.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
from collections.abc import Callable
from typing import Any, TextIO

from ..compaction import (
    CompactionOutcome,
    CompactionStrategy,
    MongoCompactionQueue,
    MongoCompactionWorker,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
)
from ..compaction_protocols import TriggerLike
from ..service import DefaultSessionService
from ._command import Command, Context
from ._errors import is_closed_pipe

__all__ = ["COMMANDS", "HELP", "Lines", "configure", "run_worker_command", "serve"]


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


def _outcome(outcome: CompactionOutcome) -> tuple[dict[str, Any], str]:
    """A finished job as JSON data and as a line for people."""
    result = outcome.result
    data = {
        "session_id": outcome.session_id,
        "ok": outcome.ok,
        "applied": None if result is None else result.applied,
        "archived": None if result is None else result.archived_event_count,
        "error": None if outcome.error is None else str(outcome.error),
    }
    if result is not None:
        state = "applied" if result.applied else "nothing to do (or another writer won)"
        text = f"compacted {outcome.session_id}: {state}, {result.archived_event_count} archived"
    else:
        text = f"compaction of {outcome.session_id} failed: {outcome.error}"
    return data, text


class Lines:
    """The worker's output, a line at a time (a JSON object each under ``as_json``).

    A reader that goes away (a closed pipe) is not an error: the lines stop, and ``on_closed``
    (set by `serve`) stops the worker as a signal would.
    """

    def __init__(self, out: TextIO, *, as_json: bool = False) -> None:
        self.out = out
        self.as_json = as_json
        self.closed = False
        """Whether the reader has gone; nothing is written after that."""
        self.on_closed: Callable[[], None] = lambda: None

    def say(self, data: dict[str, Any], text: str) -> None:
        """Write ``data`` as JSON under ``as_json``, else ``text``, and flush it."""
        if self.closed:
            return
        try:
            print(json.dumps(data) if self.as_json else text, file=self.out, flush=True)
        except OSError as exc:
            if not is_closed_pipe(exc):
                raise
            self.closed = True
            self.on_closed()

    def outcome(self, outcome: CompactionOutcome) -> None:
        """One finished job (the worker's ``on_outcome``)."""
        self.say(*_outcome(outcome))


async def serve(
    worker: MongoCompactionWorker,
    *,
    grace: float,
    out: TextIO,
    as_json: bool = False,
    lines: Lines | None = None,
) -> None:
    """Run ``worker`` until SIGTERM or SIGINT (or until the reader of ``lines`` goes away),
    then stop it as the module docs describe. ``lines`` defaults to lines on ``out``."""
    lines = lines if lines is not None else Lines(out, as_json=as_json)
    loop = asyncio.get_running_loop()
    signalled = asyncio.Event()
    again = asyncio.Event()

    def on_signal() -> None:
        if signalled.is_set():
            again.set()
        signalled.set()

    lines.on_closed = signalled.set  # a polite stop, never the second signal's cancellation
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, on_signal)
    try:
        async with worker:
            state = {"worker": worker.owner, "wake": worker.wake_mode, "state": "running"}
            lines.say(state, f"worker {worker.owner} running ({worker.wake_mode})")
            await signalled.wait()
            lines.say({**state, "state": "stopping"}, "stopping: finishing held jobs")
            drain = asyncio.ensure_future(_drain(worker, grace))
            second = asyncio.ensure_future(again.wait())
            await asyncio.wait({drain, second}, return_when=asyncio.FIRST_COMPLETED)
            second.cancel()
            if not drain.done():  # a second signal: give the held jobs back now
                drain.cancel()
            await asyncio.wait({drain, second})
        lines.say({**state, "state": "stopped"}, "stopped")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)


async def _drain(worker: MongoCompactionWorker, grace: float) -> None:
    try:
        async with asyncio.timeout(grace):
            await worker.aclose(drain=True)
    except TimeoutError:
        pass  # the held jobs went back to the queue


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
    lines = Lines(out, as_json=args.json)
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
            on_outcome=lines.outcome,
        )
        await serve(worker, grace=args.grace, out=out, lines=lines)
    return 0


async def _execute(ctx: Context) -> int:
    return await run_worker_command(ctx.repository, ctx.args, ctx.out)


COMMANDS = (Command(name="worker", help=HELP, configure=configure, execute=_execute),)
"""The ``worker`` command, registered in `asyncsession.cli._app`."""
