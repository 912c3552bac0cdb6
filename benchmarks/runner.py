"""Runs the scenarios for every system, one fresh database per measurement cell.

A cell is one system in one case of one scenario. With the local test server every cell gets a
new server process with an empty data directory: the test server's own costs (retryable-write
and transaction records that slow later writes, collection scans that grow with a collection)
then never carry over from one system or case to the next. Against ``MONGODB_URI`` every cell
gets a new database on that server instead, dropped afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import traceback
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from pymongo import AsyncMongoClient

from asyncsession.testing._mongo_server import LocalMongoServer

from .adapters import (
    ADAPTERS,
    OURS,
    PEERS,
    SHAPES_ONLY,
    SessionStore,
    StoreUnavailable,
    Target,
    make_store,
    store_class,
)
from .large_outputs import PLAIN_SYSTEM, large_outputs_case, large_outputs_scenario
from .scenarios import (
    SCENARIOS,
    BenchConfig,
    Measurement,
    chat_turn_scenario,
    contention_scenario,
    lost_ack_scenario,
    storage_scenario,
    throughput_scenario,
    window_scenario,
)

__all__ = ["ALL_SYSTEMS", "DEFAULT_URI_OPTIONS", "ServerPool", "run"]

ALL_SYSTEMS = (*OURS, *ADAPTERS, *PEERS)
"""Every system, in report order."""

SHAPE_SCENARIOS = frozenset({"turn", "throughput", "storage"})
"""The scenarios whose work depends on the turn shape: the systems in ``SHAPES_ONLY`` run only
these (their reads, contended appends and retries are the base system's)."""

DEFAULT_URI_OPTIONS = {"w": "majority", "journal": "true", "retryWrites": "false"}
"""Journaled majority writes, as the tests use. ``retryWrites=false`` because the test server
keeps a record per retryable write and every later write gets slower as they pile up; the
benchmark measures the stores, not that. Override with ``--uri-options``."""


class ServerPool:
    """Hands out an empty database per cell (see the module docs)."""

    def __init__(
        self,
        *,
        executable: str | None = None,
        uri: str | None = None,
        options: dict[str, str] | None = None,
    ) -> None:
        if (executable is None) == (uri is None):
            raise ValueError("give exactly one of executable (local test server) or uri")
        self.executable = executable
        self.uri = uri
        self.options = dict(DEFAULT_URI_OPTIONS if options is None else options)

    @contextlib.asynccontextmanager
    async def fresh(self) -> AsyncIterator[Target]:
        """An empty database for one cell."""
        if self.uri is not None:
            name = f"bench_{uuid.uuid4().hex[:12]}"
            try:
                yield Target(uri=self.uri, db_name=name)
            finally:
                client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(self.uri)
                try:
                    await client.drop_database(name)
                finally:
                    await client.close()
            return
        assert self.executable is not None
        server = LocalMongoServer(self.executable)
        # Started and stopped on the loop's thread (nothing else runs meanwhile), so an
        # interrupt can never leave a server running that no `finally` knows about.
        try:
            server.start()
            yield Target(uri=server.uri(**self.options), db_name="bench", server_pid=server.pid)
        finally:
            server.stop()

    def describe(self) -> dict[str, Any]:
        """The server and the URI options every cell used."""
        if self.uri is not None:
            parts = urlsplit(self.uri)
            return {
                "server": f"MONGODB_URI ({parts.hostname})",
                "uri_options": dict(parse_qsl(parts.query)),
                "isolation": "fresh database per cell",
            }
        assert self.executable is not None
        return {
            "server": f"secantusdb {_secantus_version(self.executable)} (local, single-node "
            "replica set 'secantus', loopback)",
            "uri_options": {"replicaSet": "secantus", **self.options},
            "isolation": "fresh server process and data directory per cell",
        }


def _secantus_version(executable: str) -> str:
    python = Path(executable).parent / "python"
    try:
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.metadata as m; print(m.version('secantusdb'))",
            ],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return "(version unknown)"
    return out.stdout.strip()


Job = Callable[[SessionStore], Awaitable[Measurement]]


@dataclass(frozen=True, slots=True)
class Cell:
    """One system in one case of one scenario."""

    scenario: str
    system: str
    case: str
    job: Job
    label: str


def plan_cells(systems: Sequence[str], scenarios: Sequence[str], config: BenchConfig) -> list[Cell]:
    """Every cell of a run, scenario by scenario, case by case, system by system."""
    cells: list[Cell] = []

    def add(scenario: str, case: str, make: Callable[[str], Job], label: str | None = None) -> None:
        for system in systems:
            if system in SHAPES_ONLY and scenario not in SHAPE_SCENARIOS:
                continue
            cells.append(Cell(scenario, system, case, make(system), label or system))

    for scenario in scenarios:
        if scenario == "turn":
            for history in config.turn_histories:
                add(
                    scenario,
                    f"history={history:,}",
                    lambda _s, h=history: (
                        lambda store: chat_turn_scenario(  # type: ignore[misc]
                            store, history=h, config=config
                        )
                    ),
                )
        elif scenario == "window":
            for size in config.window_sizes:
                add(
                    scenario,
                    f"messages={size:,}",
                    lambda _s, n=size: (
                        lambda store: window_scenario(  # type: ignore[misc]
                            store, size=n, config=config
                        )
                    ),
                )
        elif scenario == "throughput":
            # Repeats interleaved: every system once, then every system again, so drift in the
            # machine's load hits every system alike.
            for history in config.throughput_histories:
                for repeat in range(config.throughput_repeats):
                    add(
                        scenario,
                        f"history={history:,}",
                        lambda _s, h=history, r=repeat: (
                            lambda store: throughput_scenario(  # type: ignore[misc]
                                store, history=h, repeat=r, config=config
                            )
                        ),
                    )
        elif scenario == "contention":
            for system in systems:
                if system in SHAPES_ONLY:
                    continue
                try:
                    policies: tuple[str, ...] = store_class(system).writer_policies
                except StoreUnavailable:
                    policies = ("unavailable",)
                for policy in policies:
                    cells.append(
                        Cell(
                            scenario,
                            system,
                            f"{config.contention_writers} writers x {config.contention_appends}",
                            lambda store, p=policy: contention_scenario(  # type: ignore[misc]
                                store, policy=p, config=config
                            ),
                            f"{system} ({policy})",
                        )
                    )
        elif scenario == "lost-ack":
            add(scenario, "", lambda _s: lambda store: lost_ack_scenario(store, config=config))
        elif scenario == "storage":
            add(scenario, "", lambda _s: lambda store: storage_scenario(store, config=config))
        elif scenario == "large-outputs":  # ours against ours: the plain API only
            for large in (False, True) if PLAIN_SYSTEM in systems else ():
                cells.append(
                    Cell(
                        scenario,
                        PLAIN_SYSTEM,
                        large_outputs_case(config, large),
                        lambda store, big=large: large_outputs_scenario(  # type: ignore[misc]
                            store, large=big, config=config
                        ),
                        PLAIN_SYSTEM,
                    )
                )
        else:
            raise ValueError(f"unknown scenario {scenario!r}; choose from {SCENARIOS}")
    return cells


async def run_cell(
    cell: Cell, pool: ServerPool | None, config: BenchConfig, *, cell_timeout: float | None
) -> Measurement:
    """Run one cell on a fresh database; a failure becomes a row, not an abort."""
    try:
        async with contextlib.AsyncExitStack() as stack:
            target = None if pool is None else await stack.enter_async_context(pool.fresh())
            store = make_store(cell.system, target, seed_batch=config.seed_batch)
            try:
                await store.start()
                async with asyncio.timeout(cell_timeout):
                    result = await cell.job(store)
                result.extra.setdefault("adapter", store.describe())
                return result
            finally:
                await store.aclose()
    except StoreUnavailable as exc:
        status = f"pending: {exc}"
    except Exception as exc:
        traceback.print_exc()
        status = f"error: {type(exc).__name__}: {exc}"[:300]
    return Measurement(
        scenario=cell.scenario, system=cell.label, case=cell.case, unit="-", status=status
    )


async def run(
    systems: Sequence[str],
    scenarios: Sequence[str],
    config: BenchConfig,
    pool: ServerPool | None,
    *,
    cell_timeout: float | None = None,
    log: Callable[[str], None] = print,
) -> list[Measurement]:
    """Every cell of the run, in order."""
    cells = plan_cells(systems, scenarios, config)
    results: list[Measurement] = []
    for number, cell in enumerate(cells, 1):
        started = asyncio.get_running_loop().time()
        result = await run_cell(cell, pool, config, cell_timeout=cell_timeout)
        took = asyncio.get_running_loop().time() - started
        log(
            f"[{number}/{len(cells)}] {cell.scenario} {cell.case or ''} {cell.label}: "
            f"{result.status} median={result.median_ms:.2f}ms "
            f"commands/op={result.commands_per_op} ({took:.1f}s)"
        )
        results.append(result)
    return results
