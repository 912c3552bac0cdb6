"""The tokens a compaction record counts: with the strategy's declared estimator, or at four
characters a token for a strategy that declares none, on both stores."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from compaction_support import conversation

from asyncsession import DefaultSessionService, SessionEvent
from asyncsession._compaction_pass import counts_tokens
from asyncsession.compaction import TurnCountTrigger, TurnWindowCompactionStrategy
from asyncsession.compaction_protocols import CompactionRequest, CompactionResult


class _WordCounter:
    """Ten tokens a word: far from the heuristic, so the test tells the two apart."""

    def estimate(self, text: str) -> int:
        return 10 * len(text.split())


class _NoEstimator:
    """A strategy of one's own that declares no estimator (it delegates the work)."""

    def __init__(self) -> None:
        self._window = TurnWindowCompactionStrategy(2)

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        return await self._window.compact(request)


class _EstimatorNone(_NoEstimator):
    """An ``estimator`` attribute that estimates nothing does not count as one."""

    estimator = None


def _counted(events: Sequence[SessionEvent], estimate: Callable[[str], int]) -> int:
    return sum(estimate(e.text) for e in events if e.is_message and e.text)


def _quarter(text: str) -> int:
    return (len(text) + 3) // 4


async def test_the_record_counts_with_the_strategys_estimator(
    service: DefaultSessionService,
) -> None:
    """A strategy with an estimator: the record's tokens are that estimator's, before and after."""
    session_id = await conversation(service, 6)
    before = await service.get_events(session_id)
    words = _WordCounter()
    result = await service.compact(
        session_id, TurnCountTrigger(4), TurnWindowCompactionStrategy(2, estimator=words)
    )
    assert result.record is not None
    assert result.record.tokens_before == _counted(before, words.estimate)
    assert result.record.tokens_after == _counted(result.compacted_events, words.estimate)
    assert result.record.tokens_before != _counted(before, _quarter)


async def test_a_strategy_without_an_estimator_is_counted_at_four_characters_a_token(
    service: DefaultSessionService,
) -> None:
    """No estimator, or one that is ``None``: the record counts a token per four characters."""
    for strategy in (_NoEstimator(), _EstimatorNone()):
        session_id = await conversation(service, 6)
        before = await service.get_events(session_id)
        result = await service.compact(session_id, TurnCountTrigger(4), strategy)
        assert result.record is not None
        assert result.record.tokens_before == _counted(before, _quarter)
        assert result.record.tokens_after == _counted(result.compacted_events, _quarter)


def test_the_capability_is_declared_by_an_estimator_that_estimates() -> None:
    """The type guard: a strategy with an estimator that has ``estimate``, and nothing else."""
    assert counts_tokens(TurnWindowCompactionStrategy(2))
    assert counts_tokens(TurnWindowCompactionStrategy(2, estimator=_WordCounter()))
    assert not counts_tokens(_NoEstimator())
    assert not counts_tokens(_EstimatorNone())
    assert not counts_tokens(object())
