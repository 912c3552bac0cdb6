"""``python -m benchmarks``: run the scenarios and write ``benchmarks/results/<stamp>.{md,json}``.

Run it through ``scripts/bench``, which builds ``.venv-bench`` with the peers. The local test
server is used unless ``MONGODB_URI`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import importlib.metadata
import json
import os
import platform
import shlex
import signal
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import Any

from asyncsession.testing._mongo_server import find_server_executable

from .adapters import DISTRIBUTIONS
from .publish import publish
from .report import write_results
from .runner import ALL_SYSTEMS, DEFAULT_URI_OPTIONS, ServerPool, run
from .scenarios import SCENARIOS, BenchConfig


def _ints(text: str) -> tuple[int, ...]:
    return tuple(int(part.replace("_", "")) for part in text.split(",") if part)


def _names(text: str, allowed: tuple[str, ...]) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = [n for n in names if n not in allowed]
    if unknown:
        raise argparse.ArgumentTypeError(f"unknown {unknown}; choose from {', '.join(allowed)}")
    return names


def parse_args(argv: list[str]) -> argparse.Namespace:
    """The command line."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: checks every path")
    parser.add_argument(
        "--systems",
        type=lambda t: _names(t, ALL_SYSTEMS),
        default=ALL_SYSTEMS,
        help=f"comma-separated, default all: {','.join(ALL_SYSTEMS)}",
    )
    parser.add_argument(
        "--scenarios",
        type=lambda t: _names(t, SCENARIOS),
        default=SCENARIOS,
        help=f"comma-separated, default all: {','.join(SCENARIOS)}",
    )
    sizes = parser.add_argument_group("sizes and repeats (defaults: the full run)")
    for flag, field, kind in (
        ("--turn-histories", "turn_histories", _ints),
        ("--turn-repeats", "turn_repeats", int),
        ("--window-sizes", "window_sizes", _ints),
        ("--window-repeats", "window_repeats", int),
        ("--throughput-sessions", "throughput_sessions", int),
        ("--throughput-turns", "throughput_turns", int),
        ("--throughput-repeats", "throughput_repeats", int),
        ("--throughput-histories", "throughput_histories", _ints),
        ("--writers", "contention_writers", int),
        ("--appends-per-writer", "contention_appends", int),
        ("--lost-ack-turns", "lost_ack_turns", int),
        ("--storage-sessions", "storage_sessions", int),
        ("--storage-turns", "storage_turns", int),
        ("--warmup", "warmup", int),
        ("--case-budget", "case_budget_s", float),
        ("--min-repeats", "min_repeats", int),
        ("--seed-batch", "seed_batch", int),
    ):
        sizes.add_argument(flag, dest=field, type=kind, default=None)
    parser.add_argument(
        "--uri-options",
        default="&".join(f"{k}={v}" for k, v in DEFAULT_URI_OPTIONS.items()),
        help="URI options for the local test server (default: %(default)s)",
    )
    parser.add_argument("--server", default=None, help="test server launcher (secantusd-py)")
    parser.add_argument("--cell-timeout", type=float, default=900.0, help="seconds per cell")
    parser.add_argument("--output-dir", type=Path, default=Path("benchmarks/results"))
    parser.add_argument(
        "--publish",
        action="store_true",
        help="regenerate docs/benchmarks.md and its charts from this run (needs matplotlib)",
    )
    return parser.parse_args(argv)


def build_config(args: argparse.Namespace) -> BenchConfig:
    """The defaults (or ``--quick``) with every size flag that was given."""
    config = BenchConfig.quick() if args.quick else BenchConfig()
    changes = {
        f.name: getattr(args, f.name)
        for f in dataclasses.fields(BenchConfig)
        if getattr(args, f.name, None) is not None
    }
    return dataclasses.replace(config, **changes)


def versions(systems: tuple[str, ...]) -> dict[str, str]:
    """Package versions of the systems."""
    found: dict[str, str] = {}
    for system in systems:
        try:
            found[system] = importlib.metadata.version(DISTRIBUTIONS[system])
        except importlib.metadata.PackageNotFoundError:
            found[system] = "(not installed)"
    return found


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Run and write the results; the exit code is 1 if any cell failed."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    # A SIGTERM unwinds like Ctrl-C, so every test server this run started is stopped.
    signal.signal(signal.SIGTERM, _interrupt)
    warnings.filterwarnings("ignore")  # the peers warn about experimental features
    config = build_config(args)
    external = os.environ.get("MONGODB_URI")
    if external:
        pool = ServerPool(uri=external)
    else:
        executable = args.server or find_server_executable()
        if executable is None:
            print("no test server: set ASYNCSESSION_SECANTUSD, --server or MONGODB_URI")
            return 2
        options = dict(part.split("=", 1) for part in args.uri_options.split("&") if part)
        pool = ServerPool(executable=executable, options=options)
    started_at = datetime.now(UTC)
    meta: dict[str, Any] = {
        "started_at": started_at.strftime("%Y-%m-%d %H:%M:%S UTC"),
        "command": " ".join(shlex.quote(a) for a in ["python", "-m", "benchmarks", *sys.argv[1:]]),
        "server": pool.describe(),
        "machine": f"{platform.platform()}, {os.cpu_count()} CPUs, Python "
        f"{platform.python_version()}",
        "versions": versions(args.systems),
    }
    print(f"server: {meta['server']}")
    print(f"systems: {meta['versions']}")
    clock = time.perf_counter()
    results = asyncio.run(
        run(args.systems, args.scenarios, config, pool, cell_timeout=args.cell_timeout)
    )
    meta["wall_s"] = time.perf_counter() - clock
    stamp = started_at.strftime("%Y%m%dT%H%M%SZ")
    markdown, raw = write_results(results, meta, config, args.output_dir, stamp)
    print(markdown.read_text())
    print(f"wrote {markdown} and {raw}")
    if args.publish:
        for path in publish(json.loads(raw.read_text())):
            print(f"wrote {path}")
    return 1 if any(m.status.startswith("error") for m in results) else 0


if __name__ == "__main__":
    sys.exit(main())
