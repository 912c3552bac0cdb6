"""The window read of a session holding large tool outputs, beside one without them.

Two sessions of the same turns (a question, a tool call, its result, a reply), on
``MongoSessionRepository`` with its default offloading: in one every tool result is a few
bytes, in the other each is ``--output-mib`` MiB (5 by default: ten turns hold 50 MiB), stored in
GridFS with a preview in the log. Timed, interleaved between the two sessions: the window read a
turn makes (``read_snapshot`` of the active view's newest 20 events) and the whole active view.
Also timed: one ``read_body`` of a whole output (what the paging tool pays per page).

The target (issue 44): the window read of the session with the outputs stays within 2x of the
one without. Two ways to run it, neither a timed test:

- in the peer run, as scenario 6 (``scripts/bench --scenarios large-outputs``, in every full
  run): the two sessions are two cells, each on a fresh server, for the ``asyncsession`` system
  only (no peer offloads a body), timed through the benchmark's own window read
  (`large_outputs_scenario`), so the benchmarks page shows them;
- alone, ``python -m benchmarks.large_outputs`` (``--quick``: fewer reads): both sessions on one
  server, their reads interleaved, also the whole active view and one ``read_body``. It uses
  ``MONGODB_URI`` when set, or else starts the test server named by ``ASYNCSESSION_SECANTUSD``
  with ``w=majority&journal=true&retryWrites=false``, and prints a Markdown table with the URI.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import MongoSessionRepository, Session, SessionEvent, SessionRepository
from asyncsession._offload import OffloadedBody
from asyncsession.filters import EventFilter
from asyncsession.messages import (
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.testing._mongo_server import find_server_executable

from .adapters import SessionStore
from .scenarios import BenchConfig, Measurement, new_session_id, timed

__all__ = [
    "PLAIN_SYSTEM",
    "Row",
    "large_outputs_case",
    "large_outputs_scenario",
    "main",
    "measure",
    "render",
]

PLAIN_SYSTEM = "asyncsession"
"""The one system scenario 6 runs for."""
SMALL_OUTPUT = 20
"""Bytes of a tool output in the session without large ones."""

WINDOW = EventFilter.active().merge(EventFilter.last_n(20))
ACTIVE = EventFilter.active()
URI_OPTIONS = {"w": "majority", "journal": "true", "retryWrites": "false"}
"""The peer run's URI options (``runner.DEFAULT_URI_OPTIONS``)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One read of both sessions: medians and p90s in milliseconds."""

    read: str
    plain_median: float
    plain_p90: float
    large_median: float
    large_p90: float

    @property
    def ratio(self) -> float:
        """The large session's median over the plain one's."""
        return self.large_median / self.plain_median


def _output(size: int, seed: int) -> str:
    unit = f"{seed:02d} search result line with some text in it 0123456789\n"
    return (unit * (size // len(unit) + 1))[:size]


async def _seed(
    repo: SessionRepository, turns: int, output_bytes: int, session_id: str | None = None
) -> str:
    session = (
        Session(user_id="bench") if session_id is None else Session(id=session_id, user_id="bench")
    )
    await repo.save(session)
    s = session.id
    for n in range(turns):
        call = ToolCall(id=f"call-{n}", name="search", arguments='{"q": "x"}')
        answer = ToolResponse(id=f"call-{n}", name="search", data=_output(output_bytes, n))
        turn = [
            SessionEvent(session_id=s, message=UserMessage(text=f"question {n}")),
            SessionEvent(session_id=s, message=AssistantMessage(tool_calls=(call,))),
            SessionEvent(session_id=s, message=ToolResponseMessage(responses=(answer,))),
            SessionEvent(session_id=s, message=AssistantMessage(text=f"answer {n}")),
        ]
        assert await repo.append_events(s, turn)
    return s


def _p90(spent: list[float]) -> float:
    return sorted(spent)[int(len(spent) * 0.9)]


async def _ms(call: Callable[[], Awaitable[object]]) -> float:
    started = time.perf_counter()
    await call()
    return (time.perf_counter() - started) * 1000


async def measure(uri: str, *, turns: int = 10, output_mib: float = 5.0, reads: int = 30) -> Any:
    """Seed both sessions, time the reads; returns (rows, body read ms, seed seconds)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    name = f"bench_large_{uuid.uuid4().hex[:8]}"
    try:
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        plain = await _seed(repo, turns, SMALL_OUTPUT)
        started = time.perf_counter()
        large = await _seed(repo, turns, int(output_mib * 1024 * 1024))
        seed_s = time.perf_counter() - started
        rows: list[Row] = []
        for label, read in (("window (newest 20)", WINDOW), ("whole active view", ACTIVE)):
            spent: dict[str, list[float]] = {plain: [], large: []}
            for index in range(reads + 2):  # two untimed reads first, then interleaved
                for s in (plain, large) if index % 2 else (large, plain):
                    took = await _ms(lambda s=s, read=read: repo.read_snapshot(s, read))
                    if index >= 2:
                        spent[s].append(took)
            newest = await repo.read_snapshot(large, read)
            assert newest is not None
            assert any(OffloadedBody.of(e) is not None for e in newest.events)
            rows.append(
                Row(
                    label,
                    statistics.median(spent[plain]),
                    _p90(spent[plain]),
                    statistics.median(spent[large]),
                    _p90(spent[large]),
                )
            )
        events = await repo.find_events(large, EventFilter.all())
        tool = events[2]
        body = [await _ms(lambda: repo.read_body(large, tool.id)) for _ in range(3)]
        return rows, statistics.median(body), seed_s
    finally:
        await client.drop_database(name)
        await client.close()


def large_outputs_case(config: BenchConfig, large: bool) -> str:
    """The case name of scenario 6's session with or without large outputs."""
    if not large:
        return f"{config.large_outputs} tool turns, {SMALL_OUTPUT} B outputs"
    return f"{config.large_outputs} tool turns, {config.large_output_mib:g} MiB outputs"


async def large_outputs_scenario(
    store: SessionStore, *, large: bool, config: BenchConfig
) -> Measurement:
    """Scenario 6: the window read (the newest ``config.window`` events of the active view) of a
    session of ``config.large_outputs`` tool turns, with large outputs or small ones."""
    m = Measurement(
        scenario="large-outputs",
        system=store.name,
        case=large_outputs_case(config, large),
        unit="read",
    )
    repository: SessionRepository = getattr(store, "repository")  # noqa: B009 - ours only
    size = int(config.large_output_mib * 1024 * 1024) if large else SMALL_OUTPUT
    started = time.perf_counter()
    session_id = await _seed(
        repository, config.large_outputs, size, new_session_id("large-outputs")
    )
    m.extra["seed_s"] = round(time.perf_counter() - started, 2)
    for index in range(config.warmup + config.large_output_repeats):
        texts = await timed(
            store,
            m,
            lambda: store.load_window(session_id, config.window),
            record=index >= config.warmup,
        )
        m.extra["returned"] = len(texts)
    window = await repository.find_events(
        session_id, EventFilter.active().merge(EventFilter.last_n(config.window))
    )
    m.extra["offloaded_in_window"] = sum(OffloadedBody.of(e) is not None for e in window)
    return m


def render(uri: str, turns: int, output_mib: float, measured: Any) -> str:
    """The Markdown table of a measurement."""
    rows, body_ms, seed_s = measured
    lines = [
        f"URI: `{uri}`",
        "",
        f"{turns} tool turns; large session: one {output_mib:g} MiB output per turn "
        f"({turns * output_mib:g} MiB, seeded in {seed_s:.1f} s)",
        "",
        "| Read | Plain median ms | Plain p90 ms | Large median ms | Large p90 ms | Ratio |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        lines.append(
            f"| {row.read} | {row.plain_median:.1f} | {row.plain_p90:.1f} | "
            f"{row.large_median:.1f} | {row.large_p90:.1f} | {row.ratio:.2f} x |"
        )
    lines += ["", f"`read_body` of one {output_mib:g} MiB output: {body_ms:.0f} ms (median)"]
    return "\n".join(lines)


async def main(argv: list[str] | None = None) -> str:
    """Run from the command line; returns the table it printed."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.large_outputs")
    parser.add_argument("--quick", action="store_true", help="10 timed reads instead of 30")
    parser.add_argument("--turns", type=int, default=10)
    parser.add_argument("--output-mib", type=float, default=5.0)
    args = parser.parse_args(argv)
    from .runner import ServerPool  # the runner imports this module: import it here

    uri = os.environ.get("MONGODB_URI")
    executable = None if uri else find_server_executable()
    if not uri and executable is None:
        sys.exit("Set MONGODB_URI, or ASYNCSESSION_SECANTUSD to the test server's launcher.")
    pool = ServerPool(uri=uri) if uri else ServerPool(executable=executable, options=URI_OPTIONS)
    async with pool.fresh() as target:
        uri = target.uri
        reads = 10 if args.quick else 30
        measured = await measure(uri, turns=args.turns, output_mib=args.output_mib, reads=reads)
    table = render(uri, args.turns, args.output_mib, measured)
    print(table)
    return table


if __name__ == "__main__":
    asyncio.run(main())
