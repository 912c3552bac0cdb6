"""The offline token estimator."""

from __future__ import annotations

import json

import pytest

from asyncsession._compaction_pass import TokenCountEstimator
from asyncsession.compaction import HeuristicTokenCountEstimator

# Texts with their token counts under OpenAI's o200k_base encoding, measured offline once.
MEASURED = [
    pytest.param(
        "The assistant explained that the flight to Lisbon leaves at 9:40 on Tuesday, and the "
        "user asked whether a window seat could still be booked before the weekend.",
        33,
        id="prose",
    ),
    pytest.param(
        "async def compact(self, request: CompactionRequest) -> CompactionResult:\n"
        "    split = split_events(request.events)\n"
        "    if len(split.real) <= self.max_events:\n"
        "        return unchanged_except_superseded(split, self.estimator)\n",
        48,
        id="code",
    ),
    pytest.param(
        json.dumps(
            {
                "city": "Berlin",
                "unit": "celsius",
                "days": 3,
                "include": ["humidity", "wind_speed"],
                "user_id": "user_12345",
            }
        ),
        39,
        id="json",
    ),
    pytest.param(
        "会話の要約を作成してください。ユーザーは来週の東京出張について質問しました。",
        23,
        id="japanese",
    ),
    pytest.param(
        "Пользователь спросил, можно ли перенести встречу на следующую неделю, и ассистент "
        "предложил два варианта.",
        27,
        id="russian",
    ),
]


@pytest.mark.parametrize(("text", "measured"), MEASURED)
def test_estimate_is_within_a_quarter_of_the_real_tokenizer(text: str, measured: int) -> None:
    """Each sample's estimate is within 25 % of its measured o200k_base count."""
    estimate = HeuristicTokenCountEstimator().estimate(text)
    assert abs(estimate - measured) <= 0.25 * measured, estimate


def test_estimate_of_nothing_is_zero_and_of_anything_at_least_one() -> None:
    """Empty text costs nothing; any other text, whitespace included, at least one token."""
    estimator = HeuristicTokenCountEstimator()
    assert estimator.estimate("") == 0
    assert estimator.estimate("   ") == 1
    assert estimator.estimate("a") == 1
    assert estimator.estimate("?") == 1


def test_estimate_grows_with_the_text() -> None:
    """Repeating a text scales its estimate about linearly."""
    estimator = HeuristicTokenCountEstimator()
    one = estimator.estimate("The user asked about the weather in Paris. ")
    ten = estimator.estimate("The user asked about the weather in Paris. " * 10)
    assert 9 * one <= ten <= 10 * one


def test_dense_text_costs_more_per_character_than_prose() -> None:
    """JSON and CJK text get more tokens per character than English prose, unlike len/4."""
    estimator = HeuristicTokenCountEstimator()
    prose = "the quick brown fox jumps over the lazy dog and runs away " * 4
    dense = '{"a":1,"b":[2,3],"c":"x"}' * 8
    cjk = "東京出張について質問しました" * 8
    per_char = {t: estimator.estimate(t) / len(t) for t in (prose, dense, cjk)}
    assert per_char[dense] > per_char[prose]
    assert per_char[cjk] > 2 * per_char[prose]


def test_the_default_estimator_is_a_token_count_estimator() -> None:
    """The heuristic satisfies the protocol, and so does any object with estimate()."""

    class Words:
        def estimate(self, text: str) -> int:
            return len(text.split())

    assert isinstance(HeuristicTokenCountEstimator(), TokenCountEstimator)
    assert isinstance(Words(), TokenCountEstimator)
    assert repr(HeuristicTokenCountEstimator()) == "HeuristicTokenCountEstimator()"
