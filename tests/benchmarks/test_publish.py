"""The benchmarks page is generated from a run, and the committed page is what its data renders."""

from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import publish  # noqa: E402
from benchmarks._counting import CommandTally  # noqa: E402
from benchmarks._goals import render_goals_page  # noqa: E402
from benchmarks.adapters import DISTRIBUTIONS, OURS, SYSTEMS  # noqa: E402
from benchmarks.report import write_results  # noqa: E402
from benchmarks.runner import run  # noqa: E402
from benchmarks.scenarios import SCENARIOS, BenchConfig, Measurement  # noqa: E402

TINY = dataclasses.replace(
    BenchConfig.quick(),
    turn_histories=(4,),
    turn_repeats=2,
    window_sizes=(30,),
    window_repeats=2,
    throughput_sessions=2,
    throughput_turns=2,
    throughput_histories=(4,),
    throughput_repeats=2,
    contention_writers=2,
    contention_appends=2,
    lost_ack_turns=2,
    storage_sessions=1,
    storage_turns=12,
)


def test_the_committed_page_is_what_its_data_renders() -> None:
    """docs/benchmarks.md cannot drift from the run recorded in docs/assets/benchmarks.json."""
    assert publish.check(), "regenerate them: python -m benchmarks.publish --render"
    data = json.loads((ROOT / "docs" / publish.DATA).read_text())
    for name in ("benchmarks.md", publish.GOALS_PAGE):
        page = (ROOT / "docs" / name).read_text()
        assert data["meta"]["command"] in page
        assert data["meta"]["started_at"] in page
    for chart in (publish.THROUGHPUT_CHART, publish.WINDOW_CHART):
        assert (ROOT / "docs" / chart).read_text().lstrip().startswith("<?xml")


def test_measurements_survive_the_raw_json() -> None:
    """A row read back from the raw JSON renders the same figures as the row itself."""
    m = Measurement(scenario="window", system="asyncsession", case="messages=30", unit="read")
    m.samples_ms = [1.0, 2.0, 4.0]
    m.per_op_commands = [1, 1, 2]
    m.extra = {"bytes": 10}
    back = Measurement.from_json(json.loads(json.dumps(m.as_json())))
    assert (back.median_ms, back.p95_ms, back.per_op_commands) == (2.0, m.p95_ms, [1, 1, 2])
    assert back.extra == {"bytes": 10}
    assert back.commands_per_op is None


async def test_a_run_publishes_a_page_with_every_table_goals_and_charts(tmp_path: Path) -> None:
    """A tiny in-memory run becomes the page data, the page, the goals page and two charts."""
    results = await run(list(OURS), SCENARIOS, TINY, None, log=lambda _line: None)
    meta = {
        "started_at": "2026-01-01 00:00:00 UTC",
        "command": "python -m benchmarks --quick",
        "server": {"server": "in memory", "uri_options": {"w": "majority"}},
        "versions": {"asyncsession": "0"},
    }
    _, raw_path = write_results(results, meta, TINY, tmp_path / "results", "stamp")
    docs = tmp_path / "docs"
    written = publish.publish(json.loads(raw_path.read_text()), docs)
    assert {p.name for p in written} == {
        "benchmarks.json",
        "benchmarks.md",
        "benchmark-goals.md",
        "benchmarks.svg",
        "benchmarks-window.svg",
    }
    page = (docs / "benchmarks.md").read_text()
    for title, _ in publish.TABLES.values():
        assert f"### {title}" in page
    assert "`python -m benchmarks --quick`" in page
    # no peer ran, so there is no throughput goal; the loss goals are computed from the run
    goals = (docs / publish.GOALS_PAGE).read_text()
    assert "Nothing lost or duplicated by retried writes | 0 lost, 0 duplicated | yes" in goals
    assert publish.check(docs)
    (docs / publish.GOALS_PAGE).write_text(goals.replace("0 lost", "1 lost"))
    assert not publish.check(docs)
    publish.render(docs)
    assert publish.check(docs)


def _row(scenario: str, system: str, case: str, **fields: object) -> dict[str, object]:
    m = Measurement(scenario=scenario, system=system, case=case, unit="op")
    m.samples_ms = list(fields.pop("samples", [1.0]))  # type: ignore[call-overload]
    commands = fields.pop("commands", None)
    if commands is not None:
        m.add(CommandTally({"find": int(commands)}), 1)  # type: ignore[call-overload]
    m.extra = dict(fields)
    return m.as_json()


def test_the_pages_hold_each_framework_pair_and_the_goals_page_says_a_missed_goal() -> None:
    """The integrations: a table per framework with the adapter's figures beside the framework
    store's and their ratio, computed from the run, on the benchmarks page; the goal of each
    row, and a miss, only on the maintainers' page."""
    rows = [
        _row("turn", "asyncsession-pydantic-ai", "history=10", commands=3),
        _row("turn", "pydantic-ai", "history=10", commands=2),
        _row("window", "asyncsession-pydantic-ai", "messages=100", samples=[2.0]),
        _row("window", "pydantic-ai", "messages=100", samples=[8.0]),
        _row("lost-ack", "asyncsession-pydantic-ai", "5 turns", retried_writes=5, duplicated=0),
        _row("lost-ack", "pydantic-ai", "5 turns", retried_writes=5, duplicated=10),
        _row("window", "asyncsession-langchain", "messages=100", samples=[2.0]),
    ]
    raw = {"meta": {"command": "python -m benchmarks"}, "config": {}, "measurements": rows}
    data = publish.build_page_data(raw)
    page, goals = publish.render_page(data), render_goals_page(data)

    assert "### Pydantic AI: `asyncsession-pydantic-ai` vs `pydantic-ai`" in page
    assert "| commands per turn, history=10 | 3 | 2 | 1.50 |" in page
    assert "| window read ms, messages=100 | 2.00 | 8.00 | 0.25 |" in page
    assert "| duplicates after lost acks (5 retried turns) | 0 | 10 | - |" in page
    assert "### Pydantic AI: `asyncsession-pydantic-ai` vs `pydantic-ai`" in goals
    assert "| commands per turn, history=10 | 3 | 2 | 1.50 | **no** |" in goals
    assert "| window read ms, messages=100 | 2.00 | 8.00 | 0.25 | yes |" in goals
    assert "Missed in this run: 1 of 3 goals: commands per turn, history=10 (3 against 2)." in goals
    # a pair the run measured only one side of says so; a framework it never ran is left out
    assert "### LangChain: `asyncsession-langchain` vs `langchain`" in page
    assert "| window read ms, messages=100 | 2.00 | - | - |" in page
    assert "No goal measured: this run did not measure both sides." in goals
    assert "Google ADK" not in page + goals


BOOKKEEPING = re.compile(r"goals? met|met\?|\*\*no\*\*|goal", re.IGNORECASE)


def _committed() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ROOT / "docs" / publish.DATA).read_text())
    return data


def test_the_readers_page_keeps_no_goal_bookkeeping() -> None:
    """ "6 of 9 goals met", "met? no" and the like live on the maintainers' page only, but for
    the store's throughput against the floor, which the readers' page states with each missed
    goal said plainly (issue 40)."""
    data = _committed()
    page, goals = publish.render_page(data), render_goals_page(data)
    floor = page.index("## Our turns against the floor")
    rest = page[:floor] + page[page.index("\n## ", floor + 1) :]

    assert BOOKKEEPING.search(rest) is None, BOOKKEEPING.search(rest)
    assert "| goal | measured | met? |" in page[floor:]
    assert re.search(r"\d+ of \d+ goals met in this run", goals)
    assert "| goal | measured | met? |" in goals


def test_every_column_of_every_table_is_explained_under_it() -> None:
    """No column goes unexplained: each table of the page is followed by a line per column."""
    data = _committed()
    page = publish.render_page(data)
    for scenario, (title, columns) in publish.TABLES.items():
        assert {name for name, _ in columns} <= set(publish.COLUMNS[scenario]), scenario
        if scenario not in data["tables"]:
            continue
        section = page.split(f"### {title}", 1)[1].split("\n### ", 1)[0]
        for name in data["tables"][scenario]["header"]:
            assert f"- **{name}**: " in section, (scenario, name)
            assert f"- **{name}**: -." not in section, (scenario, name)


def test_messages_readable_after_compaction_is_explained_for_the_adapters() -> None:
    """The adapters' "20/100": they read what the model is sent; the rest is archived, still
    stored and readable through asyncsession's own API."""
    page = publish.render_page(_committed())
    explained = page.split("- **messages readable after**: ", 1)[1].split("\n", 1)[0]
    for words in ("framework's history API", "what the model is sent", "archived messages are"):
        assert words in explained
    assert "`asyncsession show SESSION --archived`" in explained


def _with(data: dict[str, Any], **config: object) -> dict[str, Any]:
    return {**data, "config": {**data["config"], **config}}


def test_the_method_says_how_many_repeats_ran() -> None:
    """One repeat is called one repeat, never "repeated and interleaved"; several are
    interleaved, as the runner orders them."""
    data = _committed()
    once = publish.render_page(_with(data, throughput_repeats=1))
    thrice = publish.render_page(_with(data, throughput_repeats=3))

    assert "one repeat: each figure comes from a single run" in once
    assert "interleaved" not in once
    assert "3 repeats, interleaved: every system once, then every system again" in thrice


def test_versions_name_each_package_as_pypi_does() -> None:
    data = _committed()
    data["meta"]["versions"] = {
        "asyncsession": "0.1.0",
        "asyncsession-langchain": "0.1.0",
        "langchain": "0.12.1",
        "langchain-model": "0.12.1",
        "pydantic-ai": "2.68.0",
    }
    packages = publish.render_page(data).split("- **Packages**: ", 1)[1].split("\n", 1)[0]

    assert packages == "asyncsession 0.1.0, langchain-mongodb 0.12.1, pydantic-ai-slim 2.68.0."


def test_every_system_the_benchmark_runs_is_described_with_its_package() -> None:
    """A system added to the benchmark must say what its turn is and which package it is."""
    described = {name for name, _ in publish.SYSTEMS}
    assert set(SYSTEMS) <= described
    assert set(SYSTEMS) <= set(DISTRIBUTIONS)


def test_the_test_servers_limits_are_said_when_the_run_used_it() -> None:
    """On the test server the page says it never serves a sort from an index and which peer
    figures that changes; a run against another server says nothing of the kind."""
    data = _committed()
    local = dict(data["meta"]["server"], server="secantusdb 0.7.0b3 (local)")
    remote = dict(data["meta"]["server"], server="MONGODB_URI (db.example)")
    on_test = publish.render_page({**data, "meta": {**data["meta"], "server": local}})
    elsewhere = publish.render_page({**data, "meta": {**data["meta"], "server": remote}})

    section = on_test.split("## What the test server cannot do", 1)[1].split("\n## ", 1)[0]
    assert "never\nserves a sort from an index" in section
    assert "about 200 ms" in section
    for peer in ("openai-agents", "google-adk", "pydantic-ai", "langchain"):
        assert f"**{peer}**" in section
    assert "What the test server cannot do" not in elsewhere


def _throughput(ours: float, peer: float) -> dict[str, Any]:
    rows = []
    for system, rate in (("asyncsession", ours), ("pydantic-ai", peer)):
        m = Measurement(scenario="throughput", system=system, case="history=10", unit="turn")
        m.samples_ms = [1.0]
        m.extra = {"turns_per_s": rate, "lost": 0, "duplicated": 0, "client_cpu_ms_per_turn": 1.0}
        m.extra["server_cpu_ms_per_turn"] = None
        rows.append(m.as_json())
    return {"meta": {}, "config": {}, "measurements": rows}


def test_what_to_expect_follows_the_figures() -> None:
    """ "Faster" and "slower" are chosen by the run's figures, never written in advance."""
    faster = publish.render_page(publish.build_page_data(_throughput(300.0, 100.0)))
    slower = publish.render_page(publish.build_page_data(_throughput(50.0, 100.0)))

    assert "against 100.0 for pydantic-ai, the fastest peer: faster (3.00 x)" in faster
    assert "against 100.0 for pydantic-ai, the fastest peer: slower (0.50 x)" in slower
