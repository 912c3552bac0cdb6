"""The encryption benchmark at a tiny size, so it cannot rot; and its command counts, which
are the target "no extra command on the warm path"."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:  # `benchmarks` is a top-level folder, not an installed package
    sys.path.insert(0, str(ROOT))

from benchmarks.encryption import STORES, TURNS, measure, render, with_uri_options  # noqa: E402


async def test_an_encrypted_warm_turn_sends_the_commands_of_a_plain_one(mongo_uri: str) -> None:
    """Both turns (the store's, and the chat client's with a stub model), warm: the snapshot
    and one commit, encrypted or not; encryption makes bodies larger, not more numerous."""
    result = await measure(mongo_uri, rounds=2, sessions=2, turns=2, history=4)
    for turn in TURNS:
        plain, encrypted = (result.commands[(turn, store)] for store in STORES)
        assert plain == {"aggregate": 1, "insert": 1}, (turn, plain)
        assert encrypted == plain, (turn, encrypted)
        assert all(len(result.rates[(turn, store)]) == 2 for store in STORES)
    plain_bytes, encrypted_bytes = (result.bytes_per_message[store] for store in STORES)
    assert encrypted_bytes[1] > plain_bytes[1]
    assert result.crypto_us["encrypt"] > 0
    report = render(result)
    assert "| store turn | " in report
    assert "retryWrites=false" in report


def test_the_uri_gets_the_benchmarks_write_concern() -> None:
    """Options the URI does not set are added; the ones it sets are kept."""
    assert with_uri_options("mongodb://h/?w=1") == (
        "mongodb://h/?w=1&journal=true&retryWrites=false"
    )
