"""The benchmarks page, generated from a run: ``docs/benchmarks.md``, its SVG charts, and the
maintainers' goals page (``docs/internals/benchmark-goals.md``).

``python -m benchmarks.publish benchmarks/results/<stamp>.json`` reads the raw JSON a run wrote
(``python -m benchmarks`` does this itself when given ``--publish``), folds it into the page's
data (``docs/assets/benchmarks.json``: every table cell and every charted number, no samples)
and renders the pages and the charts from that data alone. ``--render`` writes the pages again
from the committed data (after a change to this generator); ``--check`` renders them and fails
when either differs, so they cannot drift from the run they name. The charts need matplotlib
(``pip install '.[bench]'``); the pages do not.

The benchmarks page speaks to readers: what to expect, when asyncsession is faster or slower
and why, how the run was made, what every column means. The goals the team holds itself to
are on the maintainers' page (``benchmarks._goals``).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._goals import (
    GOALS_PAGE,
    floor_section,
    integration_rows,
    measured_pairs,
    render_goals_page,
)
from ._page_data import history, is_ours, ok_rows
from ._reading import WHY, expectations, method, test_server_notes
from .report import COLUMNS, TABLES, merge_repeats
from .scenarios import Measurement

__all__ = [
    "COLUMNS",
    "GOALS_PAGE",
    "TABLES",
    "build_page_data",
    "check",
    "draw_charts",
    "main",
    "publish",
    "render",
    "render_page",
]

DOCS = Path(__file__).resolve().parent.parent / "docs"
DATA = "assets/benchmarks.json"
THROUGHPUT_CHART = "assets/benchmarks.svg"
WINDOW_CHART = "assets/benchmarks-window.svg"

INTRO = """\
# Benchmarks against the peers

asyncsession is measured side by side with the session stores people pick today for an async
Python agent on MongoDB: on the same server, in the same run, with the same write concern, each
store called the way its own documentation shows. Every figure on this page comes from one run,
described under [How it was run](#how-it-was-run); the page is generated from it
(`python -m benchmarks.publish`).
"""

SYSTEMS: tuple[tuple[str, str], ...] = (
    (
        "asyncsession",
        "the plain API as our docs show it: `service.get_events(id, EventFilter(last_n=20))`, "
        "then `append_message` for the question (stored before the model would be called) and "
        "for the reply",
    ),
    (
        "asyncsession-after-reply",
        "the plain API storing the turn after the reply, as the peers do: the same read, then "
        "one `append_messages([question, reply])`",
    ),
    (
        "asyncsession-question-first",
        "the question stored before the model call, under a lease, the reply after it: a "
        "snapshot read, the question's append at the version read, the reply's at the next",
    ),
    (
        "asyncsession-advisors",
        "one `ChatClient.call(question, session_id=...)` with session memory (a 20-message "
        "window), on a real `openai.AsyncOpenAI` client talking to an in-process stub model",
    ),
    (
        "asyncsession-advisors-after-reply",
        'the same `ChatClient.call` with `store_question="with_reply"`: '
        "the window read before the model call, one append of question and reply after it",
    ),
    (
        "asyncsession-langchain",
        "our `LangChainHistory` as a chain uses it: `aget_messages()` with `history_size=20`, "
        "then one `aadd_messages([human, ai])`",
    ),
    (
        "asyncsession-adk",
        "our `AdkSessionService` as ADK's Runner uses it: `get_session` with "
        "`num_recent_events=20`, then `append_event` of the user's event and of the model's",
    ),
    (
        "asyncsession-pydantic-ai",
        "our `PydanticAIHistory` as its guide shows it: `load(limit=20)` for "
        "`message_history=`, then one `store(result.new_messages())` (the request and the "
        "response)",
    ),
    (
        "floor",
        "the least a turn costs on MongoDB, with no guarantees: a range read of the window, "
        "then one insert of one document (PyMongo directly)",
    ),
    ("openai-agents", "the Agents SDK's `MongoDBSession`: `get_items(limit=20)`, then `add_items`"),
    ("google-adk", "ADK's `MongoDbSessionService`: `get_session`, then `append_event` per message"),
    (
        "langchain",
        "`MongoDBChatMessageHistory(history_size=20)`: `aget_messages()`, then "
        "`aadd_messages([human, ai])`",
    ),
    (
        "pydantic-ai",
        'Pydantic AI has no MongoDB store; the pattern of its docs ("Messages and chat '
        "history\") by hand on PyMongo's `AsyncMongoClient`: one document per message as "
        "`ModelMessagesTypeAdapter` dumps it, indexed on `(conversation_id, _id)`; a `find` of "
        "the newest 20 validated into `message_history=`, then "
        "`insert_many(result.new_messages())`",
    ),
    (
        "langchain-model",
        "the langchain turn with the same model call as the advisor turn between its read and "
        "its write: the peer the advisor turn is held against",
    ),
)
"""What each system's chat turn is, as the page's first table shows it."""


def _load_measurements(raw: Mapping[str, Any]) -> list[Measurement]:
    return [Measurement.from_json(row) for row in raw["measurements"]]


def _rows(scenario: str, rows: Sequence[Measurement]) -> dict[str, Any]:
    title, columns = TABLES[scenario]
    out: list[dict[str, Any]] = []
    for m in rows:
        if m.status == "ok":
            cells = [render(m) for _, render in columns]
        else:
            cells = [m.status.replace("|", "/")] + ["-"] * (len(columns) - 1)
        out.append(
            {
                "case": m.case or "-",
                "system": m.system,
                "status": m.status,
                "cells": cells,
                "median_ms": None if m.status != "ok" or not m.samples_ms else m.median_ms,
                "commands_per_op": m.commands_per_op,
                "extra": {k: v for k, v in m.extra.items() if isinstance(v, int | float | str)},
            }
        )
    return {"title": title, "header": ["case", "system", *(n for n, _ in columns)], "rows": out}


def build_page_data(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The page's data from a run's raw JSON: table cells and charted numbers, no samples."""
    measurements = _load_measurements(raw)
    tables: dict[str, Any] = {}
    for scenario in TABLES:
        rows = [m for m in measurements if m.scenario == scenario]
        if scenario == "throughput":
            rows = merge_repeats(rows)
        if rows:
            tables[scenario] = _rows(scenario, rows)
    return {"meta": dict(raw["meta"]), "config": dict(raw["config"]), "tables": tables}


def _systems(data: Mapping[str, Any]) -> list[str]:
    """The table of systems: every peer, and each of our turn shapes the run measured (a shape
    added since the run waits for the next one)."""
    measured = {
        str(row.get("system", "")).split(" (")[0]
        for table in data["tables"].values()
        for row in table.get("rows", ())
    }
    listed = [(n, d) for n, d in SYSTEMS if not is_ours(n) or n in measured]
    return [
        "## The systems",
        "",
        "| system | a chat turn is |",
        "|---|---|",
        *(f"| {name} | {what} |" for name, what in listed),
        "",
        "Systems named `asyncsession-<framework>` are our adapters for that framework (see the",
        "integration guides), measured beside the framework's own MongoDB store.",
        "",
    ]


INTEGRATIONS_INTRO = """\
## Our adapters beside the framework's own store

Each framework's turn run two ways on the same server: through our adapter, on asyncsession's
MongoDB store, and through the store the framework documents. Commands per turn are the mean
over the timed turns of table 1; a window read is the median time of table 2; the duplicates
are what table 4b found stored twice after the retried writes. `ours / theirs` below 1 means the
adapter needs less.
"""


def _integrations(data: Mapping[str, Any]) -> list[str]:
    """A table per framework whose adapter or store the run measured."""
    out: list[str] = []
    for framework, ours, theirs in measured_pairs(data):
        rows = [row[:-1] for row in integration_rows(data, ours, theirs)]
        out += [
            f"### {framework}: `{ours}` vs `{theirs}`",
            "",
            f"| measure | {ours} | {theirs} | ours / theirs |",
            "|---|---:|---:|---:|",
            *(f"| {' | '.join(row)} |" for row in rows),
            "",
        ]
    return [INTEGRATIONS_INTRO, *out] if out else []


_ALL_COLUMNS = {
    "case": "the case of the scenario",
    "system": "the system (see [The systems](#the-systems))",
}


def _table(scenario: str, table: Mapping[str, Any]) -> list[str]:
    header = table["header"]
    title = TABLES[scenario][0] if scenario in TABLES else table["title"]  # links name it so
    lines = [f"### {title}", "", "| " + " | ".join(header) + " |"]
    lines.append("|" + "|".join(["---"] * 2 + ["---:"] * (len(header) - 2)) + "|")
    for row in table["rows"]:
        lines.append("| " + " | ".join([row["case"], row["system"], *row["cells"]]) + " |")
    meanings = {**_ALL_COLUMNS, **COLUMNS.get(scenario, {})}
    lines += ["", "Columns:", ""]
    lines += [f"- **{name}**: {meanings.get(name, '-')}." for name in header]
    return lines


RUNNING = """\
## Running it

```bash
scripts/bench                  # every scenario and system at the full sizes
scripts/bench --quick          # every code path at tiny sizes, a few minutes
scripts/bench --systems asyncsession,langchain --scenarios turn,window
scripts/bench --publish ...    # and regenerate this page and its charts from the run
MONGODB_URI='mongodb://host/?w=majority&journal=true' scripts/bench   # another server
```

`scripts/bench` builds `.venv-bench` (the library plus the peers, which are never dependencies
of asyncsession) and writes `benchmarks/results/<UTC stamp>.md` and `.json`. Every system gets
the same URI options. `tests/benchmarks/test_smoke.py` runs every scenario at a tiny size in the
test suite, so the harness cannot rot.
"""


def render_page(data: Mapping[str, Any]) -> str:
    """The whole benchmarks page, from the page data alone."""
    out = [INTRO, *expectations(data), *floor_section(data), *test_server_notes(data), WHY]
    out += _systems(data)
    out += method(data)
    out += _integrations(data)
    if "throughput" in data["tables"]:
        out += [f"![Throughput by system and history length]({THROUGHPUT_CHART})", ""]
    if "window" in data["tables"]:
        out += [f"![Window read time by session size]({WINDOW_CHART})", ""]
    if data["tables"]:
        out += ["## The results", ""]
    for scenario in TABLES:
        table = data["tables"].get(scenario)
        if table is not None:
            out += [*_table(scenario, table), ""]
    out += [RUNNING]
    return "\n".join(out).rstrip() + "\n"


def _bars(
    ax: Any, groups: list[str], series: dict[str, list[float | None]], *, ylabel: str
) -> None:
    width = 0.8 / max(len(series), 1)
    for i, (system, values) in enumerate(series.items()):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [0.0 if v is None else v for v in values]
        hatch = None if is_ours(system) else "//"
        ax.bar(xs, heights, width, label=system, hatch=hatch)
    ax.set_xticks(range(len(groups)), groups)
    ax.set_yscale("log")
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=7, ncols=2)
    ax.grid(axis="y", alpha=0.3)


def draw_charts(data: Mapping[str, Any], docs: Path) -> list[Path]:
    """The SVG charts of the page (needs matplotlib); returns the files written."""
    import matplotlib

    matplotlib.use("svg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "asyncsession"
    plt.rcParams["svg.fonttype"] = "none"
    written: list[Path] = []
    charts = (
        ("throughput", THROUGHPUT_CHART, "turns/s (log)", "Throughput: concurrent sessions"),
        ("window", WINDOW_CHART, "ms per read (log)", "Reading a 20-message window"),
    )
    for scenario, name, ylabel, title in charts:
        rows = ok_rows(data, scenario)
        if not rows:
            continue
        cases = sorted({r["case"] for r in rows}, key=history)
        systems = list(dict.fromkeys(r["system"] for r in rows))
        series: dict[str, list[float | None]] = {}
        for system in systems:
            values: list[float | None] = []
            for case in cases:
                row = next((r for r in rows if r["system"] == system and r["case"] == case), None)
                if row is None:
                    values.append(None)
                elif scenario == "throughput":
                    values.append(float(row["extra"]["turns_per_s"]))
                else:
                    values.append(row["median_ms"])
            series[system] = values
        fig, ax = plt.subplots(figsize=(8, 3.6))
        _bars(ax, cases, series, ylabel=ylabel)
        ax.set_title(title, fontsize=10)
        fig.tight_layout()
        path = docs / name
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, format="svg", metadata={"Date": None})
        plt.close(fig)
        written.append(path)
    return written


def _pages(data: Mapping[str, Any]) -> dict[str, str]:
    """Each generated page, by its path under ``docs``."""
    return {"benchmarks.md": render_page(data), GOALS_PAGE: render_goals_page(data)}


def render(docs: Path = DOCS) -> list[Path]:
    """Write the pages again from the committed page data (after the generator changed)."""
    data = json.loads((docs / DATA).read_text())
    written: list[Path] = []
    for name, text in _pages(data).items():
        (docs / name).parent.mkdir(parents=True, exist_ok=True)
        (docs / name).write_text(text)
        written.append(docs / name)
    return written


def publish(raw: Mapping[str, Any], docs: Path = DOCS, *, charts: bool = True) -> list[Path]:
    """Write the page data, the pages and (with ``charts``) the charts under ``docs``."""
    data = build_page_data(raw)
    (docs / DATA).parent.mkdir(parents=True, exist_ok=True)
    (docs / DATA).write_text(json.dumps(data, indent=1) + "\n")
    written = [docs / DATA, *render(docs)]
    if charts:
        written += draw_charts(data, docs)
    return written


def check(docs: Path = DOCS) -> bool:
    """Whether the pages are exactly what the committed page data renders."""
    data = json.loads((docs / DATA).read_text())
    return all(
        (docs / name).is_file() and (docs / name).read_text() == text
        for name, text in _pages(data).items()
    )


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.publish RESULTS.json``, ``--render`` or ``--check``."""
    parser = argparse.ArgumentParser(prog="python -m benchmarks.publish", description=__doc__)
    parser.add_argument("results", nargs="?", type=Path, help="a run's raw JSON")
    parser.add_argument("--docs", type=Path, default=DOCS, help="the docs folder")
    parser.add_argument("--check", action="store_true", help="fail if a page is stale")
    parser.add_argument(
        "--render", action="store_true", help="write the pages again from the committed data"
    )
    parser.add_argument("--no-charts", action="store_true", help="skip the SVG charts")
    args = parser.parse_args(argv)
    if args.check:
        if check(args.docs):
            return 0
        print(f"the pages are not what {args.docs / DATA} renders: run with --render")
        return 1
    if args.render:
        for path in render(args.docs):
            print(f"wrote {path}")
        return 0
    if args.results is None:
        parser.error("give a run's JSON, --render or --check")
    raw = json.loads(args.results.read_text())
    for path in publish(raw, args.docs, charts=not args.no_charts):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
