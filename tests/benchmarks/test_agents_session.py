"""The Agents SDK session benchmark at a tiny size, so it cannot rot.

It runs ``AgentsSession`` always, and the SDK's ``MongoDBSession`` next to it when the peer is
importable here (it ships with ``openai-agents``, a test dependency).
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.agents_session import OURS, PEER, measure, peer_available, render  # noqa: E402


async def test_commands_per_turn_and_lost_ack(mongo_uri: str) -> None:
    """Our steady turn costs three commands and a lost-ack retry stores one copy; the peer's
    figures are measured beside them."""
    results = await measure(mongo_uri, turns=3)
    ours = results[OURS]
    # get_items' read; the input's commit; the output's commit (no turn start: the session
    # object appends its batches, with ids it chose itself). The first turn also creates the
    # session (one insert more).
    assert ours.steady_turns == [3, 3, 3], ours.steady_by_name
    assert ours.steady_by_name == {"aggregate": 3, "insert": 6}
    assert sum(ours.first_turn.values()) == 4
    assert ours.copies_after_lost_ack == 1
    if peer_available():
        theirs = results[PEER]
        assert len(theirs.steady_turns) == 3
        assert theirs.copies_after_lost_ack == 2
    report = render(results, mongo_uri)
    assert "| asyncsession AgentsSession | " in report
