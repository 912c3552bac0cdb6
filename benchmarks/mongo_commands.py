"""Database commands and round trips per operation of ``MongoSessionRepository``, and how the
time of a ``last_n=20`` read changes with the length of the log.

Run ``python benchmarks/mongo_commands.py`` (``--quick``: everything at tiny sizes, a smoke
run whose numbers mean nothing). It uses ``MONGODB_URI`` when set (its options are
used as given; the store's own writes are journaled-majority whatever they say), or else starts
the test server named by ``ASYNCSESSION_SECANTUSD`` on a free port with
``w=majority&journal=true``. It prints Markdown tables; nothing here is a timed test.
"""

from __future__ import annotations

import asyncio
import os
import platform
import statistics
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import bson
from pymongo import AsyncMongoClient, monitoring

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventType,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC
from asyncsession.repository import Lease

if __package__:
    from ._commands import CommandCounter, Measured
    from ._server import bench_uri
else:  # run as a script: benchmarks/ is on sys.path
    from _commands import CommandCounter, Measured  # type: ignore[no-redef]
    from _server import bench_uri  # type: ignore[no-redef]

WINDOW = EventFilter.active().merge(EventFilter.last_n(20))
TEXT = "The quick brown fox jumps over the lazy dog while the agent plans its next step. " * 3
TEXT_400 = (
    "The quick brown fox jumps over the lazy dog while the agent plans its next step. " * 5
)[:400]


class ByteCounter(monitoring.CommandListener):
    """Bytes of the replies (BSON-encoded, as the server sent them) and of the commands."""

    def __init__(self) -> None:
        self.received = 0
        self.sent = 0

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent += len(bson.encode(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        self.received += len(bson.encode(event.reply))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


def typical(seen: list[Measured]) -> str:
    """The commands of the most common case, e.g. ``insert + findAndModify``."""
    shapes = statistics.mode(tuple(sorted(m.by_name.items())) for m in seen)
    return " + ".join(f"{n} {name}" if n > 1 else name for name, n in shapes)


def message(session_id: str, role: str, n: int) -> SessionEvent:
    body = UserMessage(text=f"{n} {TEXT}") if role == "user" else AssistantMessage(text=TEXT)
    return SessionEvent(session_id=session_id, message=body)


def summary(session_id: str, n: int) -> SessionEvent:
    return SessionEvent(
        session_id=session_id,
        message=AssistantMessage(text=f"summary {n}: {TEXT}"),
        metadata={SYNTHETIC: True, COMPACTION_SOURCE: "benchmark"},
    )


class Bench:
    def __init__(
        self,
        repo: MongoSessionRepository,
        counter: CommandCounter,
        wire: ByteCounter,
        *,
        scale: float = 1.0,
    ) -> None:
        self.repo = repo
        self.counter = counter
        self.wire = wire
        self.scale = scale
        """Repeats and session sizes are multiplied by this (``--quick``: a smoke run)."""
        self.rows: list[tuple[str, float, float, float, int, str, float, float]] = []

    def n(self, full: int) -> int:
        """``full`` repeats (or events), scaled."""
        return max(2, int(full * self.scale))

    async def session(self, events: int) -> str:
        session = Session(user_id="bench")
        await self.repo.save(session)
        s = session.id
        for start in range(0, events, 1000):
            batch = [
                message(s, "user" if i % 2 == 0 else "assistant", i)
                for i in range(start, min(events, start + 1000))
            ]
            await self.repo.append_events(s, batch)
        return s

    async def measure(
        self, label: str, times: int, operation: Callable[[int], Awaitable[Any]]
    ) -> list[Measured]:
        seen: list[Measured] = []
        spent: list[float] = []
        received, sent = self.wire.received, self.wire.sent
        for i in range(self.n(times)):
            with self.counter.measure() as measured:
                started = time.perf_counter()
                await operation(i)
                spent.append(time.perf_counter() - started)
            seen.append(measured)
        count = len(seen)
        self.rows.append(
            (
                label,
                statistics.fmean(m.commands for m in seen),
                statistics.fmean(m.round_trips for m in seen),
                statistics.median(spent) * 1000,
                max(m.commands for m in seen),
                typical(seen),
                (self.wire.received - received) / count / 1024,
                (self.wire.sent - sent) / count / 1024,
            )
        )
        return seen

    async def compact(self, s: str, n: int, keep: int) -> bool:
        """A compaction as the service appends it: read the view, append the summary and the
        boundary at the version read."""
        snapshot = await self.repo.read_snapshot(s, EventFilter.active())
        assert snapshot is not None
        active = snapshot.events
        written = summary(s, n)
        view = [written, *active[-keep:]]
        record = CompactionRecord(
            covered=tuple(e.id for e in active[:-keep]),
            kept=tuple(e.id for e in active[-keep:]),
            summaries=(written.id,),
            view=tuple(e.id for e in view),
        )
        boundary = SessionEvent(
            session_id=s, type=EventType.COMPACTION, payload=record.to_payload()
        )
        return await self.repo.append_events(s, [written, boundary], snapshot.version)


async def operations(bench: Bench) -> None:
    repo = bench.repo
    s = await bench.session(bench.n(1000))

    await bench.measure("append one event", 200, lambda i: repo.append_event(message(s, "user", i)))

    async def versioned(i: int) -> None:
        assert await repo.append_events(s, [message(s, "user", i)], versions[0] + i)

    versions = [await repo.get_event_version(s)]
    await bench.measure("append one event with `expected_version`", 100, versioned)
    await bench.measure(
        "`last_n=20` read (turn-aware)", 100, lambda i: repo.find_events(s, EventFilter.last_n(20))
    )
    await bench.measure(
        "`read_snapshot`, `last_n=20`", 100, lambda i: repo.read_snapshot(s, EventFilter.last_n(20))
    )
    await bench.measure(
        "active-view read, never compacted (1,300 events)",
        20,
        lambda i: repo.find_events(s, EventFilter.active()),
    )

    c = await bench.session(200)  # past the tail even when scaled down
    await bench.compact(c, 0, 10)
    await bench.measure(
        "active-view read, compacted session",
        100,
        lambda i: repo.find_events(c, EventFilter.active()),
    )

    async def compaction_round(i: int) -> None:
        for j in range(5):  # five turns between compactions, outside the measurement
            await repo.append_events(c, [message(c, "user", j), message(c, "assistant", j)])
        with bench.counter.measure() as seen:
            assert await bench.compact(c, i + 1, 10)
        compaction_costs.append(seen)

    compaction_costs: list[Measured] = []
    for i in range(bench.n(20)):
        await compaction_round(i)
    bench.rows.append(
        (
            "compaction (keep 10, append a summary; every 5 turns)",
            statistics.fmean(m.commands for m in compaction_costs),
            statistics.fmean(m.round_trips for m in compaction_costs),
            float("nan"),
            max(m.commands for m in compaction_costs),
            typical(compaction_costs),
            float("nan"),
            float("nan"),
        )
    )

    t = await bench.session(bench.n(2000))
    await bench.compact(t, 0, 10)

    async def turn(i: int) -> None:
        snapshot = await repo.read_snapshot(t, WINDOW)
        assert snapshot is not None
        lease = Lease(holder="bench", expires_at=datetime.now(UTC) + timedelta(seconds=10))
        question = message(t, "user", i)
        assert await repo.append_events(t, [question], snapshot.version, lease=lease)
        reply = message(t, "assistant", i)
        assert await repo.append_events(t, [reply], snapshot.version + 1)

    await bench.measure(
        "question-first turn: `read_snapshot`, question (leased), reply at +1", 100, turn
    )

    async def after_reply(i: int) -> None:
        snapshot = await repo.read_snapshot(t, WINDOW)
        assert snapshot is not None
        turn = [message(t, "user", i), message(t, "assistant", i)]
        assert await repo.append_events(t, turn, snapshot.version)

    await bench.measure("after-reply turn: `read_snapshot`, one commit of both", 100, after_reply)

    async def first_turn(i: int) -> None:
        new = Session(user_id="bench")
        assert await repo.read_snapshot(new.id, WINDOW) is None
        assert await repo.save_if_absent(new)
        turn = [message(new.id, "user", i), message(new.id, "assistant", i)]
        assert await repo.append_events(new.id, turn, 0)

    await bench.measure(
        "first turn of a new session: read, `save_if_absent`, one commit", 100, first_turn
    )

    async def plain_turn(i: int) -> None:
        snapshot = await repo.read_snapshot(t, WINDOW)
        assert snapshot is not None
        await repo.append_event(message(t, "user", i))
        await repo.append_event(message(t, "assistant", i))

    await bench.measure("chat turn: `read_snapshot` + 2 `append_event`s", 100, plain_turn)

    service = DefaultSessionService(repo)
    p = await bench.session(bench.n(1000))

    async def api_turn(i: int) -> None:
        await service.get_events(p, WINDOW)
        await service.append_message(p, UserMessage(text=TEXT_400))
        await service.append_message(p, AssistantMessage(text=TEXT_400))

    for i in range(40):  # the window fills with 400-byte messages first
        await api_turn(i)
    await bench.measure(
        "plain API turn: `get_events` (window) + 2 `append_message`s, 400 B each", 100, api_turn
    )

    async def after_reply_turn(i: int) -> None:
        await service.get_events(p, WINDOW)
        turn = [UserMessage(text=TEXT_400), AssistantMessage(text=TEXT_400)]
        await service.append_messages(p, turn)

    await bench.measure(
        "turn stored after the reply: `get_events` (window) + `append_messages`, 400 B each",
        100,
        after_reply_turn,
    )


async def storage(bench: Bench, database: Any, sessions: int, turns: int) -> tuple[float, float]:
    """Stored bytes per message (documents, and documents plus indexes, per ``collStats``) after
    ``sessions`` x ``turns`` plain API turns of two 400-byte messages."""
    service = DefaultSessionService(bench.repo)
    for _ in range(sessions):
        session = await service.create(CreateSessionRequest(user_id="bench"))
        for _ in range(turns):
            await service.get_events(session.id, WINDOW)
            await service.append_message(session.id, UserMessage(text=TEXT_400))
            await service.append_message(session.id, AssistantMessage(text=TEXT_400))
    documents = indexes = 0
    for name in ("sessions", "session_commits"):
        stats = await database.command("collStats", name)
        documents += int(stats.get("size", 0))
        indexes += int(stats.get("totalIndexSize", 0))
    messages = sessions * turns * 2
    return documents / messages, (documents + indexes) / messages


async def scaling(
    bench: Bench, sizes: tuple[int, ...] = (100, 10_000, 100_000)
) -> list[tuple[int, str, float, float, float]]:
    repo = bench.repo
    rows: list[tuple[int, str, float, float, float]] = []
    for size in sizes:
        started = time.perf_counter()
        s = await bench.session(size)
        print(f"  built {size:,} events in {time.perf_counter() - started:.1f}s", file=sys.stderr)
        reads = {
            "`last_n=20`": EventFilter.last_n(20),
            "`last_n=200`": EventFilter.last_n(200),
            "`keyword_search`, page 0, a common word": EventFilter.keyword_search("brown fox"),
            "`keyword_search`, page 0, a word in no event": EventFilter.keyword_search("zebra"),
        }
        for label, read in reads.items():
            spent: list[float] = []
            commands: list[int] = []
            for _ in range(
                bench.n(30) if size < 100_000 or "zebra" not in str(read.keyword) else 3
            ):
                with bench.counter.measure() as seen:
                    started = time.perf_counter()
                    await repo.find_events(s, read)
                    spent.append(time.perf_counter() - started)
                commands.append(seen.round_trips)
            rows.append(
                (
                    size,
                    label,
                    statistics.median(spent) * 1000,
                    sorted(spent)[int(len(spent) * 0.9)] * 1000,
                    statistics.fmean(commands),
                )
            )
    return rows


async def main(quick: bool = False) -> None:
    """Run every measurement and print the tables; ``quick`` runs them tiny (a smoke run)."""
    uri, stop_server = bench_uri(w="majority", journal="true")
    counter = CommandCounter()
    wire = ByteCounter()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter, wire]
    )
    name = f"bench_{uuid.uuid4().hex[:8]}"
    try:
        build = await client.admin.command("buildInfo")
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        bench = Bench(repo, counter, wire, scale=0.02 if quick else 1.0)
        await operations(bench)
        store = MongoSessionRepository(client[f"{name}_storage"])
        await store.ensure_indexes()
        stored = await storage(
            Bench(store, counter, wire),
            client[f"{name}_storage"],
            2 if quick else 8,
            5 if quick else 50,
        )
        scale: list[tuple[int, str, float, float, float]] = []
        if "--no-scaling" not in sys.argv[1:]:
            scale = await scaling(bench, (100, 1_000) if quick else (100, 10_000, 100_000))
    finally:
        await client.drop_database(name)
        await client.drop_database(f"{name}_storage")
        await client.close()
        stop_server()

    options = uri.split("?", 1)[1] if "?" in uri else "(none)"
    host = uri.split("://", 1)[-1].split("@")[-1].split("/")[0]
    print(f"Server: {build.get('version', '?')} at `{host}`, ")
    print(f"URI options: `{options}` (retryable writes on, the driver's default); ")
    print(f"Python {platform.python_version()}, {platform.machine()}, {os.cpu_count()} CPUs.\n")
    print(
        "| Operation | Commands | Round trips | Max | Usual commands | Median ms "
        "| KiB received | KiB sent |"
    )
    print("|---|---:|---:|---:|---|---:|---:|---:|")
    for label, commands, trips, median, most, usual, got, put in bench.rows:
        median_text = "n/a" if median != median else f"{median:.1f}"
        got_text = "n/a" if got != got else f"{got:.1f}"
        put_text = "n/a" if put != put else f"{put:.1f}"
        print(
            f"| {label} | {commands:.2f} | {trips:.2f} | {most} | {usual} | {median_text} "
            f"| {got_text} | {put_text} |"
        )
    print()
    print(
        f"Stored per 400-byte message (plain API turns): {stored[0]:.0f} B of documents, "
        f"{stored[1]:.0f} B with indexes (collStats)."
    )
    print()
    print("| Events in the session | Read | Median (ms) | p90 (ms) | Round trips |")
    print("|---:|---|---:|---:|---:|")
    for size, label, median, p90, trips in scale:
        print(f"| {size:,} | {label} | {median:.1f} | {p90:.1f} | {trips:.1f} |")


if __name__ == "__main__":
    asyncio.run(main(quick="--quick" in sys.argv[1:]))
