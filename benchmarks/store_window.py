"""The MongoDB store's layout, measured: window reads at 100 and 10,000 messages, bytes per
message, and what one collection for sessions and commits would save.

- **The range and the sort.** A process that knows a session's newest commit (it read or wrote
  the session before) reads a window as a range of the ``(session, commit)`` index; one that
  does not, as a find sorted by ``commit``. MongoDB walks the index for both; a server that
  sorts in memory (the test server) sorts the whole session for the second. The per-process
  map of newest commits (``repository/mongo/_layout.py``, `Newest`) is kept for this. Goal: a
  window read at 10,000 messages as fast as at 100 when the newest commit is known.
- **Bytes per message.** ``collStats`` of the commits collection after the session of 400-byte
  messages (two a commit) is written: document bytes per message (goal: at most 600), and with
  the indexes.
- **One collection?** The snapshot is one aggregate: the commits' range with ``$unionWith`` of
  the session document. Keeping both kinds of document in one collection would make it one
  range ``find``. Measured here in the same run: after-reply turns (32 sessions at once, a
  window read and one append each) reading the window by the store's snapshot, by the
  snapshot's aggregate with the least client work, and by a plain range ``find`` of the
  commits with the same client work (the most one collection could save). The test server
  scans the whole sessions collection for each ``$unionWith`` (MongoDB serves its ``$match``
  on ``_id`` from the ``_id`` index), so the gap grows with the number of sessions stored.

Run ``python -m benchmarks.store_window`` (``--quick``: 100 and 1,000 messages, few repeats).
It uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD`` with ``w=majority&journal=true&retryWrites=false`` (the benchmarks'
options). It prints a Markdown table; nothing here is a timed test.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import time
import uuid
from typing import Any

from pymongo import AsyncMongoClient
from pymongo.asynchronous.collection import AsyncCollection

from asyncsession import (
    AssistantMessage,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.repository.mongo._layout import event_from_doc

if __package__:
    from ._server import bench_uri
else:  # run as a script: benchmarks/ is on sys.path
    from _server import bench_uri  # type: ignore[no-redef]

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


async def ranged(
    commits: AsyncCollection[dict[str, Any]], session_id: str, runs: int
) -> list[float]:
    """Milliseconds of ``runs`` plain range finds of the newest 16 commits (what one collection
    holding the session document with its commits would read in place of the aggregate)."""
    newest = await commits.count_documents({"session": session_id})  # layout: benchmark only
    spent: list[float] = []
    for _ in range(runs):
        started = time.perf_counter()
        found = await commits.find(
            {"session": session_id, "commit": {"$gt": newest - 16}}  # layout: benchmark only
        ).to_list(None)
        spent.append((time.perf_counter() - started) * 1000)
        assert len(found) == 16
    return spent


async def appended(repo: MongoSessionRepository, session_id: str, runs: int) -> list[float]:
    """Milliseconds of ``runs`` after-reply appends (a question and its reply, one commit)."""
    spent: list[float] = []
    for i in range(runs):
        snapshot = await repo.read_snapshot(session_id, WINDOW)
        assert snapshot is not None
        turn = [
            SessionEvent(session_id=session_id, message=UserMessage(text=f"q{i} {TEXT}")),
            SessionEvent(session_id=session_id, message=AssistantMessage(text=TEXT)),
        ]
        started = time.perf_counter()
        assert await repo.append_events(session_id, turn, snapshot.version)
        spent.append((time.perf_counter() - started) * 1000)
    return spent


async def _messages(commits: AsyncCollection[dict[str, Any]]) -> int:
    """How many events the commits collection holds."""
    pipeline = [{"$group": {"_id": None, "n": {"$sum": {"$size": "$events"}}}}]
    found = await (await commits.aggregate(pipeline)).to_list(None)
    return int(found[0]["n"])


async def throughput(
    repo: MongoSessionRepository,
    commits: AsyncCollection[dict[str, Any]],
    ids: list[str],
    turns: int,
    *,
    how: str,
) -> float:
    """After-reply turns per second of ``sessions`` sessions at once: a window read, then one
    append at the version read. The read is ``how``: ``snapshot`` (the store's), ``plain find``
    (a range ``find`` of the newest commits, decoding the newest 20 events: the read one
    collection of sessions and commits would make) or ``aggregate`` (the snapshot's aggregate,
    with the same client work as the plain find: what is the server's part of the gap)."""
    newest = dict.fromkeys(ids, 5)

    async def run(s: str) -> None:
        for i in range(turns):
            if how != "snapshot":
                match = {"session": s, "commit": {"$gt": newest[s] - 16}}  # layout: benchmark
                if how == "plain find":
                    docs = await commits.find(match).to_list(None)
                else:  # the snapshot's aggregate, the store's client work left out
                    union = {"coll": "sessions", "pipeline": [{"$match": {"_id": s}}]}
                    stages = [{"$match": match}, {"$unionWith": union}]
                    found = await (await commits.aggregate(stages)).to_list(None)
                    docs = [d for d in found if "commit" in d]  # layout: benchmark only
                docs.sort(key=lambda d: d["commit"])
                events = [e for d in docs for e in d["events"]][-20:]
                assert len([event_from_doc(e, s) for e in events]) >= 10
                version = docs[-1]["commit"]
            else:
                snapshot = await repo.read_snapshot(s, WINDOW)
                assert snapshot is not None
                version = snapshot.version
            turn = [
                SessionEvent(session_id=s, message=UserMessage(text=f"q{i} {TEXT}")),
                SessionEvent(session_id=s, message=AssistantMessage(text=TEXT)),
            ]
            assert await repo.append_events(s, turn, version)
            newest[s] = version + 1

    started = time.perf_counter()
    await asyncio.gather(*(run(s) for s in ids))
    return len(ids) * turns / (time.perf_counter() - started)


async def main(quick: bool = False) -> list[tuple[int, str, float, float]]:
    """Measure and print; returns the rows (messages, what, median ms, p90 ms)."""
    uri, stop_server = bench_uri(w="majority", journal="true", retryWrites="false")
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    name = f"bench_window_{uuid.uuid4().hex[:8]}"
    rows: list[tuple[int, str, float, float]] = []
    sizes: dict[int, tuple[float, float]] = {}
    rates: dict[str, list[float]] = {}
    runs = 5 if quick else 30
    try:
        writer = MongoSessionRepository(client[name])
        await writer.ensure_indexes()
        commits = client[name]["session_commits"]
        for messages in (100, 1_000) if quick else (100, 10_000):
            s = await session_of(writer, messages)
            if messages > 100:
                stats = await client[name].command("collStats", "session_commits")
                stored = await _messages(commits)
                sizes[messages] = (
                    stats["size"] / stored,
                    (stats["size"] + stats.get("totalIndexSize", 0)) / stored,
                )
            known = await timed(writer, s, runs)  # this process wrote it: it knows the newest
            unknown: list[float] = []
            for _ in range(runs):  # a fresh store each time: a process that never saw it
                unknown += await timed(MongoSessionRepository(client[name]), s, 1)
            plain = await ranged(commits, s, runs)
            inserts = await appended(writer, s, runs)
            for how, spent in (
                ("snapshot, range (newest known)", known),
                ("snapshot, sorted (newest unknown)", unknown),
                ("plain range find of the commits (one collection)", plain),
                ("after-reply append (one insert)", inserts),
            ):
                p90 = sorted(spent)[int(len(spent) * 0.9)]
                rows.append((messages, how, statistics.median(spent), p90))
        sessions, turns, repeats = (8, 10, 1) if quick else (32, 20, 3)
        kinds = ("snapshot", "plain find", "aggregate")
        # Every session made first: the test server scans the sessions collection for each
        # $unionWith, so every run must see the same number of sessions.
        fresh = [await session_of(writer, 10) for _ in range(sessions * repeats * len(kinds))]
        for _ in range(repeats):  # interleaved: the machine's load hits each alike
            for how in kinds:
                ids, fresh = fresh[:sessions], fresh[sessions:]
                rate = await throughput(writer, commits, ids, turns, how=how)
                rates.setdefault(how, []).append(rate)
    finally:
        await client.drop_database(name)
        await client.close()
        stop_server()
    print(f"URI: `{uri}`\n")
    print("| Messages | What | Median ms | p90 ms |")
    print("|---:|---|---:|---:|")
    for messages, how, median, p90 in rows:
        print(f"| {messages:,} | {how} | {median:.1f} | {p90:.1f} |")
    for messages, (plain, indexed) in sizes.items():
        print(
            f"\nBytes per 400-byte message at {messages:,} messages (collStats size): "
            f"{plain:.0f} (goal: at most 600); with the indexes {indexed:.0f}."
        )
    snap, plain_rate, raw = (
        statistics.median(rates[how]) for how in ("snapshot", "plain find", "aggregate")
    )
    print(
        f"\nAfter-reply turns/s, {sessions} sessions of 10 messages x {turns} turns at once "
        f"(median of {len(rates['snapshot'])} interleaved runs): {snap:.1f} reading the snapshot;"
        f" {raw:.1f} reading by the snapshot's aggregate ($unionWith) with the least client work;"
        f" {plain_rate:.1f} by a plain range find with the same client work. One collection "
        f"would gain the server's part, {plain_rate / raw - 1:.0%} (worth building at 15 % or "
        f"more); the rest, {raw / snap - 1:.0%}, is the store's client work, which one "
        "collection would not remove."
    )
    by = {(m, how): median for m, how, median, _ in rows}
    for messages in sorted({m for m, *_ in rows}):
        snapshot = by[messages, "snapshot, range (newest known)"]
        plain = by[messages, "plain range find of the commits (one collection)"]
        turn = snapshot + by[messages, "after-reply append (one insert)"]
        print(
            f"\nAt {messages:,} messages one collection could save at most {snapshot - plain:.2f}"
            f" ms of a {turn:.2f} ms after-reply turn's database time "
            f"({(snapshot - plain) / turn:.0%}; worth building at 15 % or more)."
        )
    return rows


if __name__ == "__main__":
    asyncio.run(main(quick="--quick" in sys.argv[1:]))
