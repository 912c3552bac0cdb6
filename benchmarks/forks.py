"""Forks and rewinds on ``MongoSessionRepository``: commands per fork and per rewind at any
parent length, the bytes a fork writes, and a fork's window read against a plain session's.

Run ``python benchmarks/forks.py`` (``--quick``: tiny sizes, a smoke run whose numbers mean
nothing). It uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD`` on a free port with ``w=majority&journal=true``. It prints Markdown
tables; nothing here is a timed test.

- **Fork**: commands and BSON bytes sent by ``fork`` of a session of N events (the parent
  read, then one write), and the bytes the sessions collection grew by per fork (no commit
  is written).
- **Window**: the median time of a ``last_n=20`` read of the active view of a fork at the end
  of a session of N events, after 1 and after 12 turns of its own, against the same read of a
  plain session as long, in the same process, interleaved. While the window reaches into the
  parent's commits, the read's query has one ``$or`` branch per session: MongoDB serves each
  from the ``{session, commit}`` index, the test server scans the collection for it.
- **Rewind**: commands of ``SessionService.rewind`` (a locate read, then one insert).
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)

if __package__:
    from ._commands import CommandCounter
    from ._server import bench_uri
else:  # run as a script: benchmarks/ is on sys.path
    from _commands import CommandCounter  # type: ignore[no-redef]
    from _server import bench_uri  # type: ignore[no-redef]

WINDOW = EventFilter.active().merge(EventFilter.last_n(20))
TEXT = ("The quick brown fox jumps over the lazy dog while the agent plans its next step. " * 5)[
    :400
]


def _turn(session_id: str, n: int) -> list[SessionEvent]:
    return [
        SessionEvent(session_id=session_id, message=UserMessage(text=f"{n} {TEXT}")),
        SessionEvent(session_id=session_id, message=AssistantMessage(text=TEXT)),
    ]


async def _session(repo: MongoSessionRepository, events: int) -> str:
    """A session of ``events`` events, two a commit, appended in batches of commits."""
    sid = f"s-{uuid.uuid4().hex[:12]}"
    await repo.save(Session(id=sid, user_id="alice"))
    for n in range(events // 2):
        await repo.append_events(sid, _turn(sid, n))
    return sid


async def _size(client: AsyncMongoClient[dict[str, Any]], db: str, collection: str) -> int:
    stats = await client[db].command("collStats", collection)
    return int(stats.get("size", 0))


async def _timed(repo: MongoSessionRepository, session_id: str) -> float:
    """Milliseconds of one window read."""
    start = time.perf_counter()
    await repo.read_snapshot(session_id, WINDOW)
    return (time.perf_counter() - start) * 1000


async def main(quick: bool = False) -> None:
    """Run the measurements and print the tables."""
    uri, stop_server = bench_uri(w="majority", journal="true")
    counter = CommandCounter(count_bytes=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter]
    )
    name = f"bench_{uuid.uuid4().hex[:8]}"
    sizes = (10, 1_000) if quick else (10, 1_000, 10_000)
    rounds = 5 if quick else 41
    forks: list[tuple[int, int, int, int, int]] = []
    windows: list[tuple[int, int, float, float]] = []
    rewinds: list[tuple[int, int]] = []
    try:
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        service = DefaultSessionService(repo)
        for events in sizes:
            parent = await _session(repo, events)
            plain = await _session(repo, events)
            before = await _size(client, name, "sessions")
            commits_before = await _size(client, name, "session_commits")
            made = []
            for _ in range(5):
                with counter.measure() as seen:
                    made.append(
                        await repo.fork(
                            parent, Session(id=f"f-{uuid.uuid4().hex}", user_id="alice")
                        )
                    )
                forks.append((events, seen.commands, seen.bytes_sent, 0, 0))
            grown = (await _size(client, name, "sessions") - before) // len(made)
            commits_grown = await _size(client, name, "session_commits") - commits_before
            forks[-1] = (*forks[-1][:3], grown, commits_grown)
            child = made[0].id
            for own in (1, 12):  # the window reaches into the parent's commits, then not
                while await repo.get_event_version(child) < events // 2 + own:
                    await repo.append_events(child, _turn(child, -1))
                    await repo.append_events(plain, _turn(plain, -1))
                for _ in range(3):  # warm both
                    await repo.read_snapshot(child, WINDOW)
                    await repo.read_snapshot(plain, WINDOW)
                fork_ms: list[float] = []
                plain_ms: list[float] = []
                for _ in range(rounds):  # interleaved
                    fork_ms.append(await _timed(repo, child))
                    plain_ms.append(await _timed(repo, plain))
                windows.append(
                    (events, own, statistics.median(fork_ms), statistics.median(plain_ms))
                )
            with counter.measure() as seen:
                await service.rewind(parent, to=max(1, events // 4))
            rewinds.append((events, seen.commands))
    finally:
        await client.drop_database(name)
        await client.close()
        stop_server()

    host = uri.split("://", 1)[-1].split("@")[-1].split("/")[0]
    options = uri.split("?", 1)[1] if "?" in uri else "(none)"
    print(f"Server at `{host}`, URI options `{options}`.\n")
    print("| Parent events | Commands per fork | Bytes sent | Sessions bytes per fork "
          "| Commit bytes written |")  # fmt: skip
    print("|---:|---:|---:|---:|---:|")
    by_size: dict[int, list[tuple[int, int, int, int, int]]] = {}
    for row in forks:
        by_size.setdefault(row[0], []).append(row)
    for events, rows in by_size.items():
        print(
            f"| {events:,} | {max(r[1] for r in rows)} | {max(r[2] for r in rows):,} "
            f"| {rows[-1][3]:,} | {rows[-1][4]:,} |"
        )
    print(
        "\n| Parent events | Fork's own turns | Fork window ms | Plain window ms | Fork / plain |"
    )
    print("|---:|---:|---:|---:|---:|")
    for events, own, fork_ms, plain_ms in windows:
        print(f"| {events:,} | {own} | {fork_ms:.2f} | {plain_ms:.2f} | {fork_ms / plain_ms:.2f} |")
    print("\n| Session events | Commands per rewind |")
    print("|---:|---:|")
    for events, commands in rewinds:
        print(f"| {events:,} | {commands} |")


if __name__ == "__main__":
    asyncio.run(main(quick="--quick" in sys.argv[1:]))
