"""The benchmarks page is generated from a run, and the committed page is what its data renders."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import publish  # noqa: E402
from benchmarks._counting import CommandTally  # noqa: E402
from benchmarks.adapters import OURS  # noqa: E402
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
    assert publish.check(), "regenerate it: python -m benchmarks.publish RESULTS.json"
    data = json.loads((ROOT / "docs" / publish.DATA).read_text())
    page = (ROOT / "docs" / "benchmarks.md").read_text()
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
    """A tiny in-memory run becomes the page data, the page and two SVG charts."""
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
        "benchmarks.svg",
        "benchmarks-window.svg",
    }
    page = (docs / "benchmarks.md").read_text()
    for title, _ in publish.TABLES.values():
        assert f"### {title}" in page
    assert "`python -m benchmarks --quick`" in page
    # no peer ran, so there is no throughput goal; the loss goals are computed from the run
    assert "Nothing lost or duplicated by retried writes | 0 lost, 0 duplicated | yes" in page
    assert publish.check(docs)
    (docs / "benchmarks.md").write_text(page.replace("0 lost", "1 lost"))
    assert not publish.check(docs)


def _row(scenario: str, system: str, case: str, **fields: object) -> dict[str, object]:
    m = Measurement(scenario=scenario, system=system, case=case, unit="op")
    m.samples_ms = list(fields.pop("samples", [1.0]))  # type: ignore[call-overload]
    commands = fields.pop("commands", None)
    if commands is not None:
        m.add(CommandTally({"find": int(commands)}), 1)  # type: ignore[call-overload]
    m.extra = dict(fields)
    return m.as_json()


def test_the_page_holds_each_framework_pair_and_says_a_missed_goal() -> None:
    """The integrations section: a table per framework with the adapter's figures beside the
    framework store's, their ratio and the goal, computed from the run; a miss is said."""
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
    page = publish.render_page(publish.build_page_data(raw))
    assert "#### Pydantic AI: `asyncsession-pydantic-ai` vs `pydantic-ai`" in page
    assert "| commands per turn, history=10 | 3 | 2 | 1.50 | **no** |" in page
    assert "| window read ms, messages=100 | 2.00 | 8.00 | 0.25 | yes |" in page
    assert "| duplicates after lost acks (5 retried turns) | 0 | 10 | - | yes |" in page
    assert "Missed in this run: 1 of 3 goals: commands per turn, history=10 (3 against 2)." in page
    # a pair the run measured only one side of says so; a framework it never ran is left out
    assert "#### LangChain: `asyncsession-langchain` vs `langchain`" in page
    assert "| window read ms, messages=100 | 2.00 | - | - | not measured |" in page
    assert "No goal measured: this run did not measure both sides." in page
    assert "Google ADK" not in page
