"""A window read of the MongoDB store at 100 and at 10,000 messages: the range and the sort.

A process that knows a session's newest commit (it read or wrote the session before) reads a
window as a range of the ``(session, commit)`` index; one that does not, as a find sorted by
``commit``. MongoDB walks the index for both; a server that sorts in memory (the test server)
sorts the whole session for the second. This measures both, so the per-process map of newest
commits (``repository/mongo/_newest.py``) is kept for a measured reason.

Run ``python -m benchmarks.store_window`` (``--quick``: 100 and 1,000 messages, few repeats).
It uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD`` with ``w=majority&journal=true``. It prints a Markdown table;
nothing here is a timed test.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

WINDOW = EventFilter.active().merge(EventFilter.last_n(20))
TEXT = ("The quick brown fox jumps over the lazy dog while the agent plans its next step. " * 5)[
    :400
]


async def session_of(repo: MongoSessionRepository, messages: int) -> str:
    """A session of ``messages`` 400-byte messages, a turn (two messages) per commit."""
    session = Session(user_id="bench")
    await repo.save(session)
    s = session.id
    for i in range(0, messages, 2):
        turn = [
            SessionEvent(session_id=s, message=UserMessage(text=f"{i} {TEXT}")),
            SessionEvent(session_id=s, message=AssistantMessage(text=TEXT)),
        ]
        await repo.append_events(s, turn)
    return s


async def timed(repo: MongoSessionRepository, session_id: str, runs: int) -> list[float]:
    """Milliseconds of ``runs`` window reads."""
    spent: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        snapshot = await repo.read_snapshot(session_id, WINDOW)
        spent.append((time.perf_counter() - started) * 1000)
        assert snapshot is not None
        assert len(snapshot.events) >= 20
    return spent


async def main(quick: bool = False) -> list[tuple[int, str, float, float]]:
    """Measure and print; returns the rows (messages, how, median ms, p90 ms)."""
    server: LocalMongoServer | None = None
    uri = os.environ.get("MONGODB_URI")
    if not uri:
        executable = find_server_executable()
        if executable is None:
            sys.exit("Set MONGODB_URI, or ASYNCSESSION_SECANTUSD to the test server's launcher.")
        server = LocalMongoServer(executable)
        server.start()
        uri = server.uri(w="majority", journal="true")
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    name = f"bench_window_{uuid.uuid4().hex[:8]}"
    rows: list[tuple[int, str, float, float]] = []
    runs = 5 if quick else 30
    try:
        writer = MongoSessionRepository(client[name])
        await writer.ensure_indexes()
        for messages in (100, 1_000) if quick else (100, 10_000):
            s = await session_of(writer, messages)
            known = await timed(writer, s, runs)  # this process wrote it: it knows the newest
            unknown: list[float] = []
            for _ in range(runs):  # a fresh store each time: a process that never saw it
                unknown += await timed(MongoSessionRepository(client[name]), s, 1)
            for how, spent in (
                ("range (newest known)", known),
                ("sorted (newest unknown)", unknown),
            ):
                p90 = sorted(spent)[int(len(spent) * 0.9)]
                rows.append((messages, how, statistics.median(spent), p90))
    finally:
        await client.drop_database(name)
        await client.close()
        if server is not None:
            server.stop()
    print(f"URI: `{uri}`\n")
    print("| Messages | Read | Median ms | p90 ms |")
    print("|---:|---|---:|---:|")
    for messages, how, median, p90 in rows:
        print(f"| {messages:,} | {how} | {median:.1f} | {p90:.1f} |")
    return rows


if __name__ == "__main__":
    asyncio.run(main(quick="--quick" in sys.argv[1:]))
