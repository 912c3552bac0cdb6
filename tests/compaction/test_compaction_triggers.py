"""Compaction triggers: turn count, token count, and their composition."""

from __future__ import annotations

import pytest
from compaction_support import (
    WordCountEstimator,
    a,
    calls,
    custom,
    request,
    results,
    s,
    summary_pair,
    u,
)

from asyncsession._compaction_pass import should_compact
from asyncsession.compaction import (
    CompactionRequest,
    CompactionTrigger,
    TokenCountTrigger,
    TurnCountTrigger,
    all_of,
    any_of,
)
from asyncsession.exceptions import UsageError


async def test_turn_count_trigger_fires_only_above_max_turns() -> None:
    """TurnCountTrigger(2) is quiet at two real turns and fires at three."""
    trigger = TurnCountTrigger(2)
    two = [u("u1"), a("a1"), u("u2"), a("a2")]
    assert not await trigger.should_compact(request(two))
    assert await trigger.should_compact(request([*two, u("u3")]))


async def test_turn_count_ignores_the_shadow_prompt_of_a_summary_turn() -> None:
    """The synthetic user message of a summary pair is not a turn."""
    events = [*summary_pair("earlier"), u("u1"), a("a1"), u("u2"), a("a2")]
    assert request(events).current_turn_count == 2
    assert not await TurnCountTrigger(2).should_compact(request(events))


@pytest.mark.parametrize(
    "value",
    [pytest.param(0, id="zero"), pytest.param(-3, id="negative"), pytest.param(True, id="bool")],
)
def test_turn_count_trigger_rejects_a_non_positive_limit(value: int) -> None:
    """max_turns must be a positive int."""
    with pytest.raises(UsageError, match="max_turns"):
        TurnCountTrigger(value)


async def test_token_count_trigger_fires_at_the_threshold() -> None:
    """The trigger fires when the estimate reaches the threshold, not only above it."""
    events = [u("one two"), a("three four five")]  # "User: one two" 3 + "Assistant: ..." 4
    estimator = WordCountEstimator()
    assert await TokenCountTrigger(7, estimator=estimator).should_compact(request(events))
    assert not await TokenCountTrigger(8, estimator=estimator).should_compact(request(events))


async def test_token_count_trigger_counts_only_budgeted_events() -> None:
    """The latest system message, summaries and real events count; superseded system messages
    and custom events do not."""
    events = [
        s("old system prompt with many many words in it"),
        custom("audit"),
        *summary_pair("sum"),  # "User: Summarize the ... far." 8 + "Assistant: sum" 2
        s("new"),  # 2
        u("hi"),  # 2
        calls("c", "x"),  # "Assistant [tool calls: lookup({})]" 4
        results("r", "x"),  # "Tool [responses: lookup -> result x]" 6
    ]
    estimator = WordCountEstimator()
    assert await TokenCountTrigger(24, estimator=estimator).should_compact(request(events))
    assert not await TokenCountTrigger(25, estimator=estimator).should_compact(request(events))


async def test_token_count_trigger_uses_the_default_estimator() -> None:
    """Without an estimator the offline heuristic is used."""
    events = [u("hello " * 400)]
    assert await TokenCountTrigger(300).should_compact(request(events))
    assert not await TokenCountTrigger(10_000).should_compact(request(events))


def test_token_count_trigger_rejects_a_non_positive_threshold() -> None:
    """threshold must be a positive int."""
    with pytest.raises(UsageError, match="threshold"):
        TokenCountTrigger(0)


async def test_any_of_fires_when_one_fires_and_stops_asking() -> None:
    """any_of is an OR evaluated in order that stops at the first trigger that fires."""
    asked: list[str] = []

    def quiet(req: CompactionRequest) -> bool:
        asked.append("quiet")
        return False

    async def loud(req: CompactionRequest) -> bool:
        asked.append("loud")
        return True

    def never(req: CompactionRequest) -> bool:
        raise AssertionError("asked after a trigger fired")

    assert await any_of(quiet, loud, never).should_compact(request([u("x")]))
    assert asked == ["quiet", "loud"]
    assert not await any_of(quiet, lambda r: False).should_compact(request([u("x")]))


async def test_all_of_needs_every_trigger_and_stops_at_the_first_no() -> None:
    """all_of is an AND evaluated in order that stops at the first quiet trigger."""

    def never(req: CompactionRequest) -> bool:
        raise AssertionError("asked after a trigger said no")

    events = [u("u1"), a("a1"), u("u2"), a("a2"), u("u3")]
    both = all_of(TurnCountTrigger(2), TokenCountTrigger(5, estimator=WordCountEstimator()))
    assert await both.should_compact(request(events))
    assert not await all_of(TurnCountTrigger(3), never).should_compact(request(events))


async def test_composites_nest_and_are_triggers() -> None:
    """A composite is a CompactionTrigger and can be combined again."""
    nested = any_of(
        all_of(lambda r: True, TurnCountTrigger(10)), lambda r: r.current_turn_count > 0
    )
    assert isinstance(nested, CompactionTrigger)
    assert await should_compact(nested, request([u("x")]))
    assert "TurnCountTrigger(max_turns=10)" in repr(nested)


@pytest.mark.parametrize("combine", [any_of, all_of])
def test_composition_needs_at_least_one_trigger(combine: object) -> None:
    """An empty composition is a usage error."""
    with pytest.raises(UsageError, match="at least one trigger"):
        combine()  # type: ignore[operator]


def test_composition_rejects_things_that_are_not_triggers() -> None:
    """A value that is neither a trigger nor callable is refused at construction."""
    with pytest.raises(UsageError, match="not 42"):
        any_of(TurnCountTrigger(1), 42)  # type: ignore[arg-type]


async def test_should_compact_accepts_sync_and_async_functions() -> None:
    """Plain functions, sync or async, work as triggers."""

    async def async_yes(req: CompactionRequest) -> bool:
        return True

    assert await should_compact(lambda r: True, request([]))
    assert await should_compact(async_yes, request([]))
    assert not await should_compact(lambda r: 0, request([]))
