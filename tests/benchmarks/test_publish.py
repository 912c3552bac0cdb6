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
