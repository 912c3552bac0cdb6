"""``find_events_by_user_id`` for a user with many sessions: commands, time and bytes.

Run ``python benchmarks/user_reads.py`` (``--sessions N``, default 5,000; ``--quick``: 300). It
uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD``. Each session holds three turns; one in 50 holds 120 events. The
store reads the user's sessions (without their metadata), then their commits 256 sessions at a
time. It prints a Markdown table; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import EventFilter, MongoSessionRepository, Session, SessionEvent
from asyncsession.testing._contract._support import assistant, user

if __package__:
    from ._commands import CommandCounter, Measured
    from ._server import bench_uri
else:  # run as a script: benchmarks/ is on sys.path
    from _commands import CommandCounter, Measured  # type: ignore[no-redef]
    from _server import bench_uri  # type: ignore[no-redef]

USER = "heavy-user"
TEXT = "The quick brown fox jumps over the lazy dog while the agent plans its next step."


async def fill(repo: MongoSessionRepository, sessions: int) -> None:
    """The user's sessions, 16 writers at a time."""
    gate = asyncio.Semaphore(16)

    async def one(k: int) -> None:
        async with gate:
            session = Session(user_id=USER, metadata={"title": f"conversation {k}", "tags": ["a"]})
            await repo.save(session)
            turns = 60 if k % 50 == 0 else 3
            events: list[SessionEvent] = []
            for t in range(turns):
                events += [user(session.id, f"{t} {TEXT}"), assistant(session.id, f"{t} {TEXT}")]
            for start in range(0, len(events), 20):
                await repo.append_events(session.id, events[start : start + 20])

    await asyncio.gather(*(one(k) for k in range(sessions)))


async def measure(
    counter: CommandCounter, read: Callable[[], Awaitable[list[SessionEvent]]], runs: int
) -> tuple[Measured, float, int]:
    """The commands of one read, its median time over ``runs``, and how many events it got."""
    with counter.measure() as seen:
        found = await read()
    counter.count_bytes = False
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        await read()
        times.append((time.perf_counter() - start) * 1000)
    counter.count_bytes = True
    return seen, statistics.median(times), len(found)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=5_000)
    parser.add_argument("--quick", action="store_true", help="300 sessions, one timed run")
    args = parser.parse_args()
    sessions = 300 if args.quick else args.sessions
    runs = 1 if args.quick else 3
    uri, stop_server = bench_uri(w="majority", journal="true")
    counter = CommandCounter(count_bytes=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter]
    )
    name = f"bench_users_{uuid.uuid4().hex[:8]}"
    rows: list[tuple[str, str, Measured, float, int]] = []
    try:
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        start = time.perf_counter()
        await fill(repo, sessions)
        filled = time.perf_counter() - start
        filters = {
            "last_n=20": EventFilter.last_n(20),
            "page 0 of 50": EventFilter(page=0, page_size=50),
            "keyword, last_n=10": EventFilter.keyword_search("fox").merge(EventFilter.last_n(10)),
            "everything": EventFilter.all(),
        }
        for label, filter in filters.items():
            read = lambda f=filter: repo.find_events_by_user_id(USER, f)  # noqa: E731
            seen, median, count = await measure(counter, read, runs)
            rows.append((label, "chunked", seen, median, count))
    finally:
        await client.drop_database(name)
        await client.close()
        stop_server()
    print(f"{sessions} sessions of one user (filled in {filled:.0f} s); median of {runs} runs.\n")
    print("| Read | How | Events | Commands | Round trips | Median ms | KiB received | KiB sent |")
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for label, how, seen, median, count in rows:
        print(
            f"| {label} | {how} | {count} | {seen.commands} | {seen.round_trips} "
            f"| {median:.0f} | {seen.bytes_received / 1024:.0f} | {seen.bytes_sent / 1024:.0f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
