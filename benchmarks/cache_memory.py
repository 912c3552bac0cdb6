"""Process memory of a long-running ``MongoSessionRepository`` that reads many large events.

Run ``python benchmarks/cache_memory.py`` (small by default: 20 sessions x 50 events of 200 KB;
``--full``: 1,000 sessions x 50 events, as in issue 15; ``--sessions``, ``--events``,
``--body-kb`` to choose). It uses ``MONGODB_URI`` when set, or else starts the test server named
by ``ASYNCSESSION_SECANTUSD``.

The sessions are written first by a writer of their own: another OS process with its own client
and repository, ``--concurrency`` sessions at a time, ``--batch`` events per ``append_events``.
The measured thing is what an application runs: ONE long-running repository in this process
(which wrote nothing) reads every session whole, one after another, twice; then the script
prints this process's RSS (current and peak) and what the store's event cache holds, for
200 KB bodies (over the inline limit: never cached) and for 8 KB bodies (cached up to the byte
budget), with the URI, the server's version and the wall time of each phase. Nothing here is a
timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import os
import resource
import sys
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from multiprocessing import get_context
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import EventFilter, MongoSessionRepository, Session
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable
from asyncsession.testing.contract import user

CLIENT_OPTIONS: dict[str, Any] = {"tz_aware": True}


def rss_mib() -> float:
    """This process's resident set size now, in MiB (Linux ``/proc``; peak elsewhere)."""
    try:
        with open("/proc/self/statm", encoding="ascii") as statm:
            pages = int(statm.read().split()[1])
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        return peak_mib()


def peak_mib() -> float:
    """This process's peak resident set size so far, in MiB."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / 2**20 if sys.platform == "darwin" else peak / 1024


def process_peak_mib(pid: int | None) -> float | None:
    """Another process's peak resident set size in MiB (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


@dataclass(frozen=True)
class Row:
    """One body size: what was written and read, the memory after, and the phases' wall times."""

    body_kb: int
    rss: float
    peak: float
    cache_bytes: int
    cache_entries: int
    write_s: float
    read_s: tuple[float, float]


async def write(
    uri: str, db_name: str, ids: list[str], events: int, body_kb: int, batch: int, concurrency: int
) -> None:
    """Write every session with a repository of its own, ``concurrency`` sessions at a time."""
    text = base64.b64encode(os.urandom(body_kb * 768)).decode("ascii")  # incompressible
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, **CLIENT_OPTIONS)
    repo = MongoSessionRepository(client[db_name], cache_bytes=0)
    pending = iter(enumerate(ids))

    async def writer() -> None:
        for k, session_id in pending:
            await repo.save(Session(id=session_id, user_id="u"))
            for start in range(0, events, batch):
                stop = min(start + batch, events)
                batch_events = [user(session_id, f"{k}-{i} {text}") for i in range(start, stop)]
                await repo.append_events(session_id, batch_events)

    try:
        async with asyncio.TaskGroup() as group:
            for _ in range(min(concurrency, len(ids))):
                group.create_task(writer())
    finally:
        await client.close()


def write_in_process(
    uri: str, db_name: str, ids: list[str], events: int, body_kb: int, batch: int, concurrency: int
) -> float:
    """`write` on an event loop of its own (the writer process); its peak RSS in MiB."""
    asyncio.run(write(uri, db_name, ids, events, body_kb, batch, concurrency))
    return peak_mib()


async def read(repo: MongoSessionRepository, ids: list[str], events: int) -> float:
    """Read every session whole, one after another; the wall time in seconds."""
    start = time.perf_counter()
    for session_id in ids:
        found = await repo.find_events(session_id, EventFilter.all())
        assert len(found) == events, (session_id, len(found))
        del found
    return time.perf_counter() - start


async def run(
    client: AsyncMongoClient[dict[str, Any]],
    uri: str,
    db_name: str,
    args: argparse.Namespace,
    sessions: int,
    body_kb: int,
) -> Row:
    """Write ``sessions`` in a writer process, then read them all twice with one repository."""
    ids = [str(uuid.uuid4()) for _ in range(sessions)]
    repo = MongoSessionRepository(client[db_name], cache_bytes=args.cache_mib * 2**20)
    await repo.ensure_indexes()
    loop = asyncio.get_running_loop()
    start = time.perf_counter()
    with ProcessPoolExecutor(1, mp_context=get_context("spawn")) as pool:
        job = (uri, db_name, ids, args.events, body_kb, args.batch, args.concurrency)
        writer_peak = await loop.run_in_executor(pool, write_in_process, *job)
    write_s = time.perf_counter() - start
    print(
        f"{body_kb} KB: wrote {sessions} x {args.events} in {write_s:.1f} s "
        f"(writer process peak RSS {writer_peak:.0f} MiB)",
        flush=True,
    )
    first = await read(repo, ids, args.events)
    print(f"{body_kb} KB: first read in {first:.1f} s", flush=True)
    second = await read(repo, ids, args.events)
    print(f"{body_kb} KB: second read in {second:.1f} s", flush=True)
    gc.collect()
    cache = repo._store.cache  # pyright: ignore[reportPrivateUsage]
    return Row(body_kb, rss_mib(), peak_mib(), cache.bytes, len(cache), write_s, (first, second))


async def server_version(client: AsyncMongoClient[dict[str, Any]]) -> str:
    """The server's ``buildInfo`` version (and the test server's own version, when it is one)."""
    info = await client.server_info()
    own = info.get("secantusVersion")
    return f"{info.get('version')}" + (f" (SecantusDB {own})" if own else "")


async def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--full", action="store_true", help="1,000 sessions x 50 events")
    parser.add_argument("--sessions", type=int, default=20)
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--body-kb", type=int, default=200)
    parser.add_argument("--cache-mib", type=int, default=32)
    parser.add_argument("--batch", type=int, default=5, help="events per append_events")
    parser.add_argument("--concurrency", type=int, default=4, help="sessions written at once")
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
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, **CLIENT_OPTIONS)
    name = f"bench_cache_{uuid.uuid4().hex[:8]}"
    baseline = rss_mib()
    rows: list[Row] = []
    server_peak: float | None = None
    try:
        version = await server_version(client)
        print(f"URI: {uri} (client options: {CLIENT_OPTIONS}); server: {version}", flush=True)
        for body_kb in (args.body_kb, 8):
            db_name = f"{name}_{body_kb}"
            try:
                rows.append(await run(client, uri, db_name, args, sessions, body_kb))
            finally:
                await client.drop_database(db_name)
    finally:
        await client.close()
        if server is not None:
            server_peak = process_peak_mib(server.pid)
            server.stop()
    print(
        f"\n{sessions} sessions x {args.events} events, each read whole twice by one repository; "
        f"cache budget {args.cache_mib} MiB; written {args.batch} events per append, "
        f"{args.concurrency} sessions at a time, by another process; RSS before: "
        f"{baseline:.0f} MiB.\n"
    )
    print(
        "| Body | Bodies per read | RSS after (MiB) | Peak RSS (MiB) | Cache (MiB) | Cached events "
        "| Write (s) | Read 1 (s) | Read 2 (s) |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        data = sessions * args.events * row.body_kb / 1024
        print(
            f"| {row.body_kb} KB | {data:,.0f} MiB | {row.rss:.0f} | {row.peak:.0f} "
            f"| {row.cache_bytes / 2**20:.1f} | {row.cache_entries:,} | {row.write_s:,.1f} "
            f"| {row.read_s[0]:,.1f} | {row.read_s[1]:,.1f} |"
        )
    if server_peak is not None:
        print(f"\nThe test server's own peak RSS (another process): {server_peak:,.0f} MiB.")


if __name__ == "__main__":
    asyncio.run(main())
