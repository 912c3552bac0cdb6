"""The five scenarios, each a function of a started :class:`SessionStore` and a config.

Nothing here knows which system it drives: the smoke test runs the asyncsession adapter through
these same functions, and the full run every peer. Each function returns one
:class:`Measurement` (the contention scenario one per writer policy, see
:func:`contention_scenario`).
"""

from __future__ import annotations

import asyncio
import math
import os
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ._counting import CommandTally, measure, tally
from ._stats import median, percentile
from ._workload import Message, Turn, count_writes, message_text, parse_tag, seed_messages
from .adapters import SessionStore

__all__ = [
    "SCENARIOS",
    "BenchConfig",
    "Measurement",
    "SeedMismatch",
    "chat_turn_scenario",
    "contention_scenario",
    "lost_ack_scenario",
    "storage_scenario",
    "throughput_scenario",
    "window_scenario",
]

T = TypeVar("T")

SCENARIOS = ("turn", "window", "throughput", "contention", "lost-ack", "storage", "large-outputs")
"""Scenario names, in report order."""


class SeedMismatch(AssertionError):
    """A system did not read back what was seeded or written: its numbers would mean nothing."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BenchConfig:
    """Sizes and repeats of one run."""

    window: int = 20
    """Messages a turn loads (where the API allows a window)."""
    user_chars: int = 100
    """Length of every user message."""
    reply_chars: int = 300
    """Length of every assistant reply."""
    summary_chars: int = 1000
    """Length of the summary every compaction writes."""
    warmup: int = 2
    """Untimed operations before the timed ones, per cell."""
    case_budget_s: float = 25.0
    """Scenarios 1 and 2: stop repeating once the timed operations of a case took this long
    (but never before ``min_repeats``), so a system whose reads scan the log cannot stretch
    the run; the row's ``ops`` says how many were timed."""
    min_repeats: int = 3
    """Scenarios 1 and 2: timed operations per case, at least."""
    turn_histories: tuple[int, ...] = (10, 1_000, 10_000)
    """Scenario 1: history lengths."""
    turn_repeats: int = 20
    """Scenario 1: timed turns per history length."""
    window_sizes: tuple[int, ...] = (100, 10_000, 100_000)
    """Scenario 2: session sizes."""
    window_repeats: int = 10
    """Scenario 2: timed reads per session size."""
    throughput_sessions: int = 32
    """Scenario 3: concurrent sessions."""
    throughput_turns: int = 50
    """Scenario 3: turns per session."""
    throughput_histories: tuple[int, ...] = (10, 1_000, 10_000)
    """Scenario 3: messages every session holds before its timed turns."""
    throughput_repeats: int = 3
    """Scenario 3: repeated runs per history, interleaved across systems (each run is a cell
    of its own: a fresh server, fresh sessions)."""
    contention_writers: int = 16
    """Scenario 4: concurrent writers of one session."""
    contention_appends: int = 50
    """Scenario 4: messages each writer appends."""
    lost_ack_turns: int = 20
    """Scenario 4: turns whose acknowledgement is lost and retried."""
    storage_sessions: int = 8
    """Scenario 5: sessions written through the API."""
    storage_turns: int = 50
    """Scenario 5: turns per session."""
    large_outputs: int = 10
    """Scenario 6: tool turns of the session, each with one large output (``large_output_mib``)
    in one case and a 20-byte one in the other."""
    large_output_mib: float = 5.0
    """Scenario 6: MiB of each large tool output."""
    large_output_repeats: int = 20
    """Scenario 6: timed window reads per case."""
    compaction_keep: int = 20
    """Scenario 5: messages a compaction keeps (where the system's compaction keeps any)."""
    seed_batch: int = 200
    """Events per append when seeding asyncsession through its own API (the layout it ends
    with is the same as with one turn per append: the newest events in the session document,
    the rest one document each in the events collection)."""

    @classmethod
    def quick(cls) -> BenchConfig:
        """Tiny sizes: every code path in seconds (the smoke test, and ``--quick``)."""
        return cls(
            warmup=1,
            case_budget_s=5.0,
            turn_histories=(10, 60),
            turn_repeats=3,
            window_sizes=(30, 100),
            window_repeats=3,
            throughput_sessions=4,
            throughput_turns=3,
            throughput_histories=(10, 40),
            throughput_repeats=2,
            contention_writers=4,
            contention_appends=3,
            lost_ack_turns=3,
            storage_sessions=2,
            storage_turns=15,
            compaction_keep=6,
            large_outputs=3,
            large_output_mib=0.5,
            large_output_repeats=3,
            summary_chars=200,
            seed_batch=50,
        )


@dataclass(slots=True, kw_only=True)
class Measurement:
    """One row: a system in one case of one scenario."""

    scenario: str
    """One of :data:`SCENARIOS`."""
    system: str
    """The system (with the writer policy in the contention scenario)."""
    case: str
    """The case within the scenario, e.g. ``history=1000``."""
    unit: str
    """What one timed operation is."""
    samples_ms: list[float] = field(default_factory=list)
    """Wall time of every timed operation, in milliseconds."""
    ops: int = 0
    """Operations the command tally covers."""
    tally: CommandTally | None = None
    """Commands over those operations; ``None`` without a database."""
    per_op_commands: list[int] = field(default_factory=list)
    """Commands of each timed operation, where operations ran one at a time."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Scenario-specific results."""
    status: str = "ok"
    """``ok``, ``pending: ...`` (could not run here) or ``error: ...``."""

    @property
    def median_ms(self) -> float:
        """Median wall time per operation."""
        return median(self.samples_ms)

    @property
    def p95_ms(self) -> float:
        """95th-percentile wall time per operation."""
        return percentile(self.samples_ms, 95)

    @property
    def commands_per_op(self) -> float | None:
        """Mean commands per operation."""
        return None if self.tally is None or not self.ops else self.tally.commands / self.ops

    @property
    def round_trips_per_op(self) -> float | None:
        """Mean round trips (commands + cursor fetches) per operation."""
        return None if self.tally is None or not self.ops else self.tally.round_trips / self.ops

    def add(self, tally: CommandTally | None, ops: int) -> None:
        """Add ``ops`` operations that sent ``tally``."""
        self.ops += ops
        if tally is not None:
            self.tally = tally if self.tally is None else self.tally + tally

    def as_json(self) -> dict[str, Any]:
        """The raw row."""
        return {
            "scenario": self.scenario,
            "system": self.system,
            "case": self.case,
            "unit": self.unit,
            "status": self.status,
            "median_ms": _finite(self.median_ms),
            "p95_ms": _finite(self.p95_ms),
            "ops": self.ops,
            "commands_per_op": self.commands_per_op,
            "round_trips_per_op": self.round_trips_per_op,
            "commands_by_name": None if self.tally is None else self.tally.by_name,
            "per_op_commands": self.per_op_commands,
            "samples_ms": [round(s, 3) for s in self.samples_ms],
            "extra": self.extra,
        }

    @classmethod
    def from_json(cls, row: dict[str, Any]) -> Measurement:
        """The row :meth:`as_json` wrote (its command tally rebuilt from the counts by name)."""
        by_name = row.get("commands_by_name")
        return cls(
            scenario=row["scenario"],
            system=row["system"],
            case=row["case"],
            unit=row["unit"],
            samples_ms=list(row.get("samples_ms", [])),
            ops=row.get("ops", 0),
            tally=None if by_name is None else CommandTally(dict(by_name)),
            per_op_commands=list(row.get("per_op_commands", [])),
            extra=dict(row.get("extra", {})),
            status=row.get("status", "ok"),
        )


def _finite(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 3)


def new_session_id(kind: str) -> str:
    """A session id no other cell uses."""
    return f"{kind}-{uuid.uuid4().hex[:12]}"


async def timed(
    store: SessionStore, m: Measurement, op: Callable[[], Awaitable[T]], *, record: bool = True
) -> T:
    """Run ``op`` alone; record its wall time and commands in ``m`` when ``record``."""
    with measure(store.counter) as seen:
        start = time.perf_counter()
        result = await op()
        elapsed = (time.perf_counter() - start) * 1000
    if record:
        m.samples_ms.append(elapsed)
        counted = tally(seen)
        if counted is not None:
            m.per_op_commands.append(counted.commands)
        m.add(counted, 1)
    return result


def server_cpu_s(store: SessionStore) -> float | None:
    """CPU seconds the local test server process has used (Linux); ``None`` if unknown."""
    pid = getattr(getattr(store, "target", None), "server_pid", None)
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tags(texts: list[str]) -> list[str | None]:
    """The tags of ``texts``."""
    return [parse_tag(t) for t in texts]


async def verify_window(
    store: SessionStore, session_id: str, expected: list[str], size: int
) -> None:
    """Read the window back through the system's API and compare it with ``expected``."""
    got = tags(await store.load_window(session_id, size))
    if got != expected:
        raise SeedMismatch(
            f"{store.name}: window of {session_id} reads {got[:3]}...{got[-3:]} "
            f"({len(got)}), expected {expected[:3]}...{expected[-3:]} ({len(expected)})"
        )


def _spent(m: Measurement, config: BenchConfig) -> bool:
    """Whether a case has used its time budget (and has its minimum of samples)."""
    return (
        len(m.samples_ms) >= config.min_repeats and sum(m.samples_ms) / 1000 >= config.case_budget_s
    )


def _seeds(config: BenchConfig, count: int) -> list[Message]:
    return seed_messages("h", count, user_chars=config.user_chars, reply_chars=config.reply_chars)


def _turn(config: BenchConfig, tag: str) -> Turn:
    return Turn.make(tag, user_chars=config.user_chars, reply_chars=config.reply_chars)


async def chat_turn_scenario(
    store: SessionStore, *, history: int, config: BenchConfig
) -> Measurement:
    """Scenario 1: one chat turn (load the window, persist user message and reply)."""
    m = Measurement(scenario="turn", system=store.name, case=f"history={history:,}", unit="turn")
    session_id = new_session_id("turn")
    seeds = _seeds(config, history)
    await store.seed(session_id, seeds)
    await verify_window(store, session_id, [s.tag for s in seeds[-config.window :]], config.window)
    retries = 0
    index = 0
    if store.counter is not None:
        store.counter.count_bytes = True  # sequential turns: the encoding does not skew others
    while index < config.warmup + config.turn_repeats and not _spent(m, config):
        turn = _turn(config, f"t{index:05d}")
        retries += await timed(
            store,
            m,
            lambda turn=turn: store.chat_turn(session_id, turn, config.window),  # type: ignore[misc]
            record=index >= config.warmup,
        )
        index += 1
    if store.counter is not None:
        store.counter.count_bytes = False
    if m.tally is not None and m.ops:
        m.extra["bytes_sent_per_turn"] = round(m.tally.bytes_sent / m.ops)
        m.extra["bytes_received_per_turn"] = round(m.tally.bytes_received / m.ops)
    last = _turn(config, f"t{index - 1:05d}")
    window = tags(await store.load_window(session_id, config.window))
    if window[-2:] != [last.user.tag, last.reply.tag]:
        raise SeedMismatch(f"{store.name}: the last turn does not end the window: {window[-2:]}")
    m.extra["retries"] = retries
    return m


async def window_scenario(store: SessionStore, *, size: int, config: BenchConfig) -> Measurement:
    """Scenario 2: load the newest ``config.window`` messages of a session of ``size``."""
    m = Measurement(scenario="window", system=store.name, case=f"messages={size:,}", unit="read")
    session_id = new_session_id("window")
    seeds = _seeds(config, size)
    started = time.perf_counter()
    await store.seed(session_id, seeds)
    m.extra["seed_s"] = round(time.perf_counter() - started, 2)
    expected = [s.tag for s in seeds[-config.window :]]
    await verify_window(store, session_id, expected, config.window)
    for index in range(config.warmup + config.window_repeats):
        if _spent(m, config):
            break
        texts = await timed(
            store,
            m,
            lambda: store.load_window(session_id, config.window),
            record=index >= config.warmup,
        )
        m.extra["returned"] = len(texts)
    return m


async def throughput_scenario(
    store: SessionStore, *, history: int, repeat: int, config: BenchConfig
) -> Measurement:
    """Scenario 3: ``throughput_sessions`` sessions of ``history`` messages, all at once, each
    running ``throughput_turns`` turns; one repeat (the runner interleaves the repeats)."""
    sessions, turns = config.throughput_sessions, config.throughput_turns
    m = Measurement(
        scenario="throughput",
        system=store.name,
        case=f"history={history:,}",
        unit="turn",
    )
    session_ids = [new_session_id(f"tp{repeat}") for _ in range(sessions)]
    seeds = _seeds(config, history)
    for session_id in session_ids:
        await store.seed(session_id, seeds)

    async def run(session_id: str) -> int:
        done = 0
        for index in range(turns):
            turn = _turn(config, f"t{index:05d}")
            start = time.perf_counter()
            done += await store.chat_turn(session_id, turn, config.window)
            m.samples_ms.append((time.perf_counter() - start) * 1000)
        return done

    server_before = server_cpu_s(store)
    client_before = time.process_time()
    with measure(store.counter) as seen:
        start = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(run(session_id)) for session_id in session_ids]
        wall = time.perf_counter() - start
    client_cpu = time.process_time() - client_before
    server_after = server_cpu_s(store)
    server_cpu = (
        None if server_before is None or server_after is None else server_after - server_before
    )
    m.add(tally(seen), sessions * turns)
    expected = [tag for i in range(turns) for tag in (f"t{i:05d}-u", f"t{i:05d}-a")]
    lost = duplicated = 0
    for session_id in session_ids:
        texts = await store.read_all(session_id)
        counted = count_writes(texts, expected)
        lost += counted.lost
        duplicated += counted.duplicated
    total = sessions * turns
    m.extra.update(
        repeat=repeat,
        wall_s=round(wall, 3),
        turns_per_s=round(total / wall, 1),
        lost=lost,
        duplicated=duplicated,
        retries=sum(task.result() for task in tasks),
        client_cpu_s=round(client_cpu, 2),
        server_cpu_s=None if server_cpu is None else round(server_cpu, 2),
        client_cpu_ms_per_turn=round(client_cpu * 1000 / total, 3),
        server_cpu_ms_per_turn=None if server_cpu is None else round(server_cpu * 1000 / total, 3),
    )
    model_call = getattr(store, "model_call_cpu_ms", None)
    if model_call is not None:
        cpu = await model_call()
        if cpu is not None:
            m.extra["model_call_cpu_ms"] = round(cpu, 3)
    return m


async def contention_scenario(
    store: SessionStore, *, policy: str, config: BenchConfig
) -> Measurement:
    """Scenario 4a: ``contention_writers`` writers append to one session at once.

    Every writer first loads the session (as an agent would), then appends
    ``contention_appends`` messages one by one, all writers concurrently. The log is then read
    back through the system's API: messages the writers were told were stored but are missing
    are lost silently; messages missing after the writer got an error are rejected.
    """
    writers, appends = config.contention_writers, config.contention_appends
    m = Measurement(
        scenario="contention",
        system=f"{store.name} ({policy})",
        case=f"{writers} writers x {appends}",
        unit="append",
    )
    session_id = new_session_id("contention")
    await store.seed(session_id, [])
    handles = [await store.open_writer(session_id, policy, config.window) for _ in range(writers)]
    errors: Counter[str] = Counter()
    conflicts = 0
    told_stored: set[str] = set()

    async def write(number: int) -> None:
        nonlocal conflicts
        for index in range(appends):
            tag = f"w{number:02d}-m{index:03d}"
            message = Message(
                role="user" if index % 2 == 0 else "assistant",
                tag=tag,
                text=message_text(tag, config.user_chars),
            )
            start = time.perf_counter()
            outcome = await handles[number].append(message)
            m.samples_ms.append((time.perf_counter() - start) * 1000)
            conflicts += outcome.conflicts
            if outcome.stored:
                told_stored.add(tag)
            elif outcome.error is not None:
                errors[outcome.error] += 1

    with measure(store.counter) as seen:
        start = time.perf_counter()
        async with asyncio.TaskGroup() as group:
            for number in range(writers):
                group.create_task(write(number))
        wall = time.perf_counter() - start
    m.add(tally(seen), writers * appends)

    texts = await store.read_all(session_id)
    expected = [f"w{w:02d}-m{i:03d}" for w in range(writers) for i in range(appends)]
    counted = count_writes(texts, expected)
    found = {tag for tag in tags(texts) if tag is not None}
    positions: dict[int, list[int]] = {}
    for tag in tags(texts):
        if tag is not None and tag.startswith("w"):
            positions.setdefault(int(tag[1:3]), []).append(int(tag[5:]))
    out_of_order = sum(1 for seen in positions.values() if seen != sorted(seen))
    m.extra.update(
        attempted=len(expected),
        stored=len(found & set(expected)),
        lost_silently=len(told_stored - found),
        rejected=sum(errors.values()),
        errors=dict(errors),
        duplicated=counted.duplicated,
        conflicts_retried=conflicts,
        writers_out_of_order=out_of_order,
        wall_s=round(wall, 3),
    )
    return m


async def lost_ack_scenario(store: SessionStore, *, config: BenchConfig) -> Measurement:
    """Scenario 4b: writes whose acknowledgement is lost, retried as an application would."""
    turns = config.lost_ack_turns
    m = Measurement(scenario="lost-ack", system=store.name, case=f"{turns} turns", unit="turn")
    session_id = new_session_id("lostack")
    await store.seed(session_id, [])
    errors: Counter[str] = Counter()
    expected: list[str] = []
    for index in range(turns):
        turn = _turn(config, f"t{index:05d}")
        expected += [turn.user.tag, turn.reply.tag]
        with measure(store.counter) as seen:
            start = time.perf_counter()
            for error in await store.lost_ack_turn(session_id, turn):
                errors[error] += 1
            m.samples_ms.append((time.perf_counter() - start) * 1000)
        m.add(tally(seen), 1)
    counted = count_writes(await store.read_all(session_id), expected)
    m.extra.update(
        retried_writes=turns,
        duplicated=counted.duplicated,
        lost=counted.lost,
        errors=dict(errors),
    )
    return m


async def storage_scenario(store: SessionStore, *, config: BenchConfig) -> Measurement:
    """Scenario 5: bytes per stored message, and per session before and after compaction."""
    sessions, turns = config.storage_sessions, config.storage_turns
    m = Measurement(
        scenario="storage",
        system=store.name,
        case=f"{sessions} sessions x {turns * 2} messages",
        unit="compaction",
    )
    session_ids = [new_session_id("storage") for _ in range(sessions)]
    for session_id in session_ids:
        await store.seed(session_id, [])

    async def fill(session_id: str) -> None:
        for index in range(turns):
            await store.chat_turn(session_id, _turn(config, f"t{index:05d}"), config.window)

    async with asyncio.TaskGroup() as group:
        for session_id in session_ids:
            group.create_task(fill(session_id))
    before = await store.storage()
    messages = sessions * turns * 2
    summary = message_text("summary", config.summary_chars)
    kind: str | None = None
    for session_id in session_ids:
        kind = await timed(
            store,
            m,
            lambda session_id=session_id: store.compact(  # type: ignore[misc]
                session_id, config.compaction_keep, summary
            ),
        )
    after = await store.storage()
    expected = [tag for i in range(turns) for tag in (f"t{i:05d}-u", f"t{i:05d}-a")]
    kept = count_writes(await store.read_all(session_ids[0]), expected)
    m.extra["compaction"] = kind or "n/a"
    m.extra["messages"] = messages
    m.extra["readable_after_compaction"] = f"{kept.expected - kept.lost}/{kept.expected}"
    if before is not None and after is not None:
        m.extra.update(
            bytes_per_message=round(before.data_bytes / messages, 1),
            bytes_per_message_with_indexes=round(
                (before.data_bytes + before.index_bytes) / messages, 1
            ),
            documents_per_message=round(before.documents / messages, 3),
            bytes_per_session=round(before.data_bytes / sessions),
            bytes_per_session_after=None if kind is None else round(after.data_bytes / sessions),
            collections_before=before.collections,
            collections_after=after.collections,
        )
    if kind is None:
        m.samples_ms.clear()
        m.per_op_commands.clear()
        m.ops, m.tally = 0, None
    return m
