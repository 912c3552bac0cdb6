"""``find_by_metadata`` for a user with many sessions: commands, round trips, time and bytes.

Run ``python benchmarks/metadata_lookup.py`` (``--sessions N``, default 5,000; ``--quick``:
300). It uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD``. Every session of the user has the agent name ``support-bot`` and a
declared ``tenant`` key; one in 50 has the tenant ``rare``. The rows look sessions up by the
principal (the ``user_id``), by the agent name and by the tenant, with the default limit (100)
and with a limit as big as the user; ``find_by_user_id`` (every session, unbounded) is the row
to compare with. It prints a Markdown table; nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import MongoSessionRepository, Session
from asyncsession.events import AGENT_NAME, PRINCIPAL_NAME

if __package__:
    from ._commands import CommandCounter, Measured
    from ._server import bench_uri
else:  # run as a script: benchmarks/ is on sys.path
    from _commands import CommandCounter, Measured  # type: ignore[no-redef]
    from _server import bench_uri  # type: ignore[no-redef]

USER = "heavy-user"
T0 = datetime(2026, 1, 1, tzinfo=UTC)


async def fill(repo: MongoSessionRepository, sessions: int) -> None:
    """The user's sessions (documents only: a lookup never reads a log), 16 writers at a time."""
    gate = asyncio.Semaphore(16)

    async def one(k: int) -> None:
        async with gate:
            metadata = {
                AGENT_NAME: "support-bot",
                "tenant": "rare" if k % 50 == 0 else "acme",
                "title": f"conversation {k}",
            }
            created = T0 + timedelta(seconds=k)
            await repo.save(Session(user_id=USER, created_at=created, metadata=metadata))

    await asyncio.gather(*(one(k) for k in range(sessions)))


async def measure(
    counter: CommandCounter, read: Callable[[], Awaitable[list[Session]]], runs: int
) -> tuple[Measured, float, int]:
    """The commands of one lookup, its median time over ``runs``, and how many it found."""
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
    runs = 1 if args.quick else 5
    uri, stop_server = bench_uri(w="majority", journal="true")
    counter = CommandCounter(count_bytes=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter]
    )
    name = f"bench_meta_{uuid.uuid4().hex[:8]}"
    rows: list[tuple[str, Measured, float, int]] = []
    try:
        repo = MongoSessionRepository(client[name], indexed_metadata_keys=["tenant"])
        await repo.ensure_indexes()
        start = time.perf_counter()
        await fill(repo, sessions)
        filled = time.perf_counter() - start
        principal, agent = PRINCIPAL_NAME, AGENT_NAME
        lookups: dict[str, Callable[[], Awaitable[list[Session]]]] = {
            "principal, limit 100": lambda: repo.find_by_metadata(principal, USER),
            f"principal, limit {sessions}": lambda: repo.find_by_metadata(
                principal, USER, limit=sessions
            ),
            "agent name, limit 100": lambda: repo.find_by_metadata(agent, "support-bot"),
            f"agent name, limit {sessions}": lambda: repo.find_by_metadata(
                agent, "support-bot", limit=sessions
            ),
            "tenant `rare` (1 in 50), limit 100": lambda: repo.find_by_metadata("tenant", "rare"),
            "find_by_user_id (every session)": lambda: repo.find_by_user_id(USER),
        }
        for label, read in lookups.items():
            seen, median, count = await measure(counter, read, runs)
            rows.append((label, seen, median, count))
    finally:
        await client.drop_database(name)
        await client.close()
        stop_server()
    print(f"{sessions} sessions of one user (filled in {filled:.0f} s); median of {runs} runs.\n")
    print("| Lookup | Sessions | Commands | Round trips | Median ms | KiB received |")
    print("|---|---:|---:|---:|---:|---:|")
    for label, seen, median, count in rows:
        print(
            f"| {label} | {count} | {seen.commands} | {seen.round_trips} "
            f"| {median:.1f} | {seen.bytes_received / 1024:.0f} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
