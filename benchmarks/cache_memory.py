"""Process memory of a long-running ``MongoSessionRepository`` that reads many large events.

Run ``python benchmarks/cache_memory.py`` (small by default: 20 sessions x 50 events of 200 KB;
``--full``: 1,000 sessions x 50 events, as in issue 15; ``--sessions``, ``--events``,
``--body-kb`` to choose). It uses ``MONGODB_URI`` when set, or else starts the test server named
by ``ASYNCSESSION_SECANTUSD``. Every session is written, then read whole twice by the same
repository; the script prints this process's RSS (current and peak) and what the store's caches
hold, for 200 KB bodies (over the inline limit: never cached) and for 8 KB bodies (cached up to
the byte budget). Nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import resource
import sys
import uuid
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import EventFilter, MongoSessionRepository, Session
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable
from asyncsession.testing.contract import user


def rss_mib() -> float:
    """This process's resident set size now, in MiB (Linux ``/proc``; peak elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return peak_mib()


def peak_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


async def run(
    repo: MongoSessionRepository, sessions: int, events: int, body_kb: int
) -> tuple[float, float, int, int]:
    """Write then read everything twice; RSS after, peak RSS, cache bytes and entries."""
    text = "z" * (body_kb * 1024)
    ids: list[str] = []
    for k in range(sessions):
        session = Session(user_id="u")
        await repo.save(session)
        ids.append(session.id)
        for i in range(events):
            await repo.append_event(user(session.id, f"{k}-{i} {text}"))
    for _ in range(2):
        for session_id in ids:
            found = await repo.find_events(session_id, EventFilter.all())
            assert len(found) == events
            del found
    gc.collect()
    cache = repo._store.cache
    return rss_mib(), peak_mib(), cache.bytes, len(cache)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="1,000 sessions x 50 events")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--body-kb", type=int, default=200)
    parser.add_argument("--cache-mib", type=int, default=32)
    args = parser.parse_args()
    sessions = 1_000 if args.full else args.sessions
    server: LocalMongoServer | None = None
    uri = os.environ.get("MONGODB_URI")
    if not uri:
        executable = find_server_executable()
        if executable is None:
            sys.exit("Set MONGODB_URI, or ASYNCSESSION_SECANTUSD to the test server's launcher.")
        server = LocalMongoServer(executable)
        server.start()
        uri = server.uri()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    name = f"bench_cache_{uuid.uuid4().hex[:8]}"
    baseline = rss_mib()
    rows: list[tuple[int, float, float, int, int]] = []
    try:
        for body_kb in (args.body_kb, 8):
            repo = MongoSessionRepository(
                client[f"{name}_{body_kb}"], cache_bytes=args.cache_mib * 2**20
            )
            await repo.ensure_indexes()
            rows.append((body_kb, *await run(repo, sessions, args.events, body_kb)))
            await client.drop_database(f"{name}_{body_kb}")
    finally:
        await client.close()
        if server is not None:
            server.stop()
    print(
        f"{sessions} sessions x {args.events} events, each read whole twice; cache budget "
        f"{args.cache_mib} MiB; RSS before: {baseline:.0f} MiB.\n"
    )
    print("| Body | Data read | RSS after (MiB) | Peak RSS (MiB) | Cache (MiB) | Cached events |")
    print("|---:|---:|---:|---:|---:|---:|")
    for body_kb, rss, peak, cached, entries in rows:
        data = sessions * args.events * body_kb / 1024
        print(
            f"| {body_kb} KB | {data:.0f} MiB | {rss:.0f} | {peak:.0f} "
            f"| {cached / 2**20:.1f} | {entries} |"
        )


if __name__ == "__main__":
    asyncio.run(main())
