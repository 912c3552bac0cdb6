"""The large-output benchmark at a tiny size, so it cannot rot, and its rows on the pages."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks import publish  # noqa: E402
from benchmarks._goals import render_goals_page  # noqa: E402
from benchmarks.large_outputs import measure, render  # noqa: E402
from benchmarks.scenarios import Measurement  # noqa: E402


async def test_the_standalone_run_reads_previews_in_both_reads(mongo_uri: str) -> None:
    """Both sessions are read (the window and the whole active view) and one body whole."""
    measured = await measure(mongo_uri, turns=2, output_mib=0.3, reads=2)
    rows, body_ms, seed_s = measured
    assert [row.read for row in rows] == ["window (newest 20)", "whole active view"]
    assert all(row.plain_median > 0 and row.large_median > 0 for row in rows)
    assert body_ms > 0
    assert seed_s > 0
    table = render(mongo_uri, 2, 0.3, measured)
    assert f"URI: `{mongo_uri}`" in table
    assert "| window (newest 20) |" in table


def _row(case: str, median: float, previews: int) -> dict[str, object]:
    m = Measurement(scenario="large-outputs", system="asyncsession", case=case, unit="read")
    m.samples_ms = [median]
    m.extra = {"offloaded_in_window": previews, "seed_s": 1.0}
    return m.as_json()


def test_the_pages_show_the_table_and_the_two_x_goal() -> None:
    """Scenario 6's rows make a table on the benchmarks page and a goal on the maintainers'."""
    rows = [_row("10 tool turns, 20 B outputs", 4.0, 0), _row("10 tool turns, 5 MiB", 9.0, 5)]
    raw = {"meta": {"command": "python -m benchmarks"}, "config": {}, "measurements": rows}
    data = publish.build_page_data(raw)
    page, goals = publish.render_page(data), render_goals_page(data)
    assert "### 6. Load a 20-message window of a session holding large tool outputs" in page
    assert "| 10 tool turns, 5 MiB | asyncsession | 9.00 |" in page
    assert "2.25 x (10 tool turns, 5 MiB: 9.00 ms; 10 tool turns, 20 B outputs: 4.00 ms)" in goals
    assert "| **no** |" in goals
