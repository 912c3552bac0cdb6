"""``benchmarks.responses_pipeline`` at a tiny size, so it cannot rot; its counts are checked."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))


async def test_the_responses_pipeline_script_runs_at_three_commands_a_turn(
    mongo_uri: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m benchmarks.responses_pipeline --runs 3 --warmup 1 --mongo``: every path is
    timed, and a Responses turn costs what a Chat Completions turn does in ``chat_pipeline``
    (3 commands: the read, the question's commit and the reply's; 4 for a two-round tool turn,
    whose round is one more commit; as many as the repository calls in memory)."""
    from benchmarks import responses_pipeline

    monkeypatch.setenv("MONGODB_URI", mongo_uri)
    await responses_pipeline.main(3, True, warmup=1)
    out = capsys.readouterr().out
    rows = {
        (cells[1], cells[2]): cells[3]
        for line in out.splitlines()
        if (cells := [cell.strip() for cell in line.split("|")]) and len(cells) == 5
    }
    assert rows[("MongoDB (commands)", "plain turn, existing session")] == "3"
    assert rows[("MongoDB (commands)", "two-round tool turn with a reasoning item")] == "4"
    assert rows[("in-memory (repository calls)", "plain turn, existing session")] == "3"
    memory_tools = ("in-memory (repository calls)", "two-round tool turn with a reasoning item")
    assert rows[memory_tools] == "4"
    assert "| full chain, MongoDB |" in out
    assert "| bare openai responses stream, the chain's request |" in out
