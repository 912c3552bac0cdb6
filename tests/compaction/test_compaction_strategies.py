"""The four compaction strategies, called directly (no repository)."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime

import pytest
from compaction_support import (
    ScriptedSummarizer,
    WordCountEstimator,
    a,
    calls,
    check_invariants,
    custom,
    lbls,
    legacy_summary,
    request,
    results,
    s,
    summary_pair,
    u,
)

from asyncsession._compaction_pass import format_event
from asyncsession.compaction import (
    CompactionRequest,
    CompactionStrategy,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from asyncsession.compaction._strategies import (
    DEFAULT_SHADOW_PROMPT,
    DEFAULT_SUMMARIZER_SYSTEM_PROMPT,
)
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC, SessionEvent
from asyncsession.exceptions import CompactionError, UsageError
from asyncsession.messages import AssistantMessage, ToolCall, ToolResponse, ToolResponseMessage

# --- the worked examples of the spec (§5.5) -----------------------------------------------------


def worked_examples() -> list[object]:
    """(log, strategy, kept labels, archived labels) for every example of the spec's table."""
    return [
        pytest.param(
            [u("U1"), a("A1"), u("U2"), a("A2a"), a("A2b"), u("U3"), a("A3")],
            SlidingWindowCompactionStrategy(3),
            ["U3", "A3"],
            ["U1", "A1", "U2", "A2a", "A2b"],
            id="sliding-3-snaps-forward-to-a-turn-start",
        ),
        pytest.param(
            [u("U1"), a("A1"), u("U2"), a("A2"), a("A3"), a("A4")],
            SlidingWindowCompactionStrategy(2),
            ["U2", "A2", "A3", "A4"],
            ["U1", "A1"],
            id="sliding-2-keeps-the-newest-turn-whole",
        ),
        pytest.param(
            [u("U1"), a("A1"), a("A2"), a("A3")],
            SlidingWindowCompactionStrategy(2),
            ["U1", "A1", "A2", "A3"],
            [],
            id="sliding-2-one-turn-is-unchanged",
        ),
        pytest.param(
            [s("S:v1"), u("U1"), a("A1"), s("S:v2"), u("U2"), a("A2")],
            SlidingWindowCompactionStrategy(20),
            ["U1", "A1", "S:v2", "U2", "A2"],
            ["S:v1"],
            id="sliding-20-archives-a-superseded-system-message",
        ),
        pytest.param(
            [u("U1"), s("S"), a("A1"), u("U2"), a("A2"), u("U3"), a("A3")],
            SlidingWindowCompactionStrategy(2),
            ["S", "U3", "A3"],
            ["U1", "A1", "U2", "A2"],
            id="sliding-2-keeps-the-system-message-where-it-is",
        ),
        pytest.param(
            [*summary_pair("old"), u("U1"), a("A1"), u("U2"), a("A2"), u("U3"), a("A3")],
            RecursiveSummarizationCompactionStrategy(
                ScriptedSummarizer(["new"]), max_events_to_keep=2, overlap_size=1
            ),
            ["Σ?", "Σ:new", "U3", "A3"],
            ["Σ?", "Σ:old", "U1", "A1", "U2", "A2"],
            id="recursive-keep-2-overlap-1-folds-the-old-summary",
        ),
    ]


@pytest.mark.parametrize(("events", "strategy", "kept", "archived"), worked_examples())
async def test_worked_example(
    events: list[SessionEvent],
    strategy: CompactionStrategy,
    kept: list[str],
    archived: list[str],
) -> None:
    """Each worked example of the spec keeps and archives exactly what its table says."""
    result = await strategy.compact(request(events))
    assert lbls(result.compacted_events) == kept
    assert lbls(result.archived_events) == archived
    check_invariants(strategy, events, result)


# --- sliding window ---------------------------------------------------------------------------


async def test_sliding_window_leaves_a_short_log_alone() -> None:
    """At or under max_events nothing is archived and the result says it changed nothing."""
    events = [u("U1"), a("A1"), u("U2"), a("A2")]
    result = await SlidingWindowCompactionStrategy(4).compact(request(events))
    assert result.compacted_events == tuple(events)
    assert result.archived_events == ()
    assert not result.applied
    assert result.tokens_estimated_saved == 0


async def test_sliding_window_does_not_count_summaries_and_system_messages() -> None:
    """Synthetic events and the pinned system message neither use up max_events nor move."""
    events = [s("S"), *summary_pair("sum"), u("U1"), a("A1"), u("U2"), a("A2")]
    result = await SlidingWindowCompactionStrategy(4).compact(request(events))
    assert result.archived_events == ()
    squeezed = await SlidingWindowCompactionStrategy(2).compact(request(events))
    assert lbls(squeezed.compacted_events) == ["S", "Σ?", "Σ:sum", "U2", "A2"]


async def test_sliding_window_never_separates_a_tool_call_from_its_results() -> None:
    """A cut inside a tool round moves forward to the next user message."""
    events = [
        u("U1"),
        calls("C1", "x", "y"),
        results("R1", "x"),
        results("R1b", "y"),
        a("A1"),
        u("U2"),
        a("A2"),
    ]
    result = await SlidingWindowCompactionStrategy(4).compact(request(events))
    assert lbls(result.compacted_events) == ["U2", "A2"]
    check_invariants(SlidingWindowCompactionStrategy(4), events, result)


async def test_sliding_window_saves_the_tokens_of_what_it_archives() -> None:
    """tokens_estimated_saved is the estimate of the archived events."""
    estimator = WordCountEstimator()
    events = [u("one two"), a("three"), u("four"), a("five")]
    result = await SlidingWindowCompactionStrategy(2, estimator=estimator).compact(request(events))
    assert result.tokens_estimated_saved == 3 + 2


async def test_sliding_window_without_any_user_message_archives_nothing() -> None:
    """With no turn start there is no whole turn to keep, so nothing is cut."""
    events = [a("A1"), a("A2"), a("A3")]
    result = await SlidingWindowCompactionStrategy(1).compact(request(events))
    assert result.archived_events == ()


@pytest.mark.parametrize(
    "factory",
    [
        pytest.param(lambda: SlidingWindowCompactionStrategy(0), id="sliding"),
        pytest.param(lambda: TurnWindowCompactionStrategy(0), id="turn"),
        pytest.param(lambda: TokenCountCompactionStrategy(-1), id="tokens"),
        pytest.param(
            lambda: RecursiveSummarizationCompactionStrategy(
                ScriptedSummarizer(), max_events_to_keep=0
            ),
            id="recursive",
        ),
    ],
)
def test_limits_must_be_positive(factory: object) -> None:
    """Every strategy refuses a limit that is not a positive int."""
    with pytest.raises(UsageError, match="positive int"):
        factory()  # type: ignore[operator]


# --- turn window -------------------------------------------------------------------------------


async def test_turn_window_keeps_the_newest_turns() -> None:
    """The oldest whole turns beyond max_turns are archived."""
    events = [u("U1"), a("A1"), u("U2"), calls("C2", "t"), results("R2", "t"), u("U3"), a("A3")]
    strategy = TurnWindowCompactionStrategy(2)
    result = await strategy.compact(request(events))
    assert lbls(result.compacted_events) == ["U2", "calls", "tool", "U3", "A3"]
    assert lbls(result.archived_events) == ["U1", "A1"]
    check_invariants(strategy, events, result)


async def test_turn_window_keeps_the_preamble_in_place() -> None:
    """Real events before the first user message are never archived by the turn window."""
    events = [a("Hello, how can I help?"), u("U1"), a("A1"), u("U2"), a("A2")]
    result = await TurnWindowCompactionStrategy(1).compact(request(events))
    assert lbls(result.compacted_events) == ["Hello, how can I help?", "U2", "A2"]


async def test_turn_window_does_not_count_summary_turns() -> None:
    """A summary pair is not one of the kept turns."""
    events = [*summary_pair("sum"), u("U1"), a("A1"), u("U2"), a("A2")]
    result = await TurnWindowCompactionStrategy(2).compact(request(events))
    assert result.archived_events == ()


# --- token count -------------------------------------------------------------------------------


def _words(n: int, prefix: str) -> str:
    """A text that, formatted with its role prefix, is ``n`` words long."""
    return " ".join(f"{prefix}{i}" for i in range(n - 1))


async def test_token_count_worked_example() -> None:
    """S(11) U(8) A(13) U(8) A(13) with 45 tokens keeps only the newest turn (21 tokens)."""
    events = [s(_words(11, "s")), u(_words(8, "u")), a(_words(13, "a")), u(_words(8, "v"))]
    events.append(a(_words(13, "b")))
    estimator = WordCountEstimator()
    assert [estimator.estimate(format_event(e)) for e in events] == [11, 8, 13, 8, 13]
    strategy = TokenCountCompactionStrategy(45, estimator=estimator)
    result = await strategy.compact(request(events))
    assert result.compacted_events == (events[0], events[3], events[4])
    assert result.archived_events == (events[1], events[2])
    assert result.tokens_estimated_saved == 21
    check_invariants(strategy, events, result, estimator=estimator.estimate)


async def test_token_count_keeps_everything_that_fits() -> None:
    """When the whole log fits, nothing is archived."""
    events = [u("one"), a("two"), u("three"), a("four")]
    strategy = TokenCountCompactionStrategy(8, estimator=WordCountEstimator())
    assert (await strategy.compact(request(events))).archived_events == ()


async def test_token_count_over_budget_keeps_the_newest_turn() -> None:
    """When system message and summaries alone exceed the budget, only the newest turn stays."""
    events = [s("a long system prompt"), *summary_pair("sum"), u("U1"), a("A1"), u("U2")]
    strategy = TokenCountCompactionStrategy(3, estimator=WordCountEstimator())
    result = await strategy.compact(request(events))
    assert lbls(result.compacted_events) == ["a long system prompt", "Σ?", "Σ:sum", "U2"]


async def test_token_count_walks_a_contiguous_suffix() -> None:
    """A large old event stops the walk even if older small events would fit."""
    events = [u("x"), a("y"), u("big " * 20), a("z"), u("w"), a("v")]
    strategy = TokenCountCompactionStrategy(10, estimator=WordCountEstimator())
    result = await strategy.compact(request(events))
    assert lbls(result.compacted_events) == ["w", "v"]


# --- recursive summarization ----------------------------------------------------------------


def recursive(summarizer: ScriptedSummarizer, **options: object) -> CompactionStrategy:
    return RecursiveSummarizationCompactionStrategy(summarizer, **options)  # type: ignore[arg-type]


async def test_recursive_prompt_layout() -> None:
    """The prompt has the prior summary, the conversation, the upcoming context, then the ask."""
    summarizer = ScriptedSummarizer(["folded"])
    events = [
        *summary_pair("Earlier they met."),
        u("Book a table"),
        calls("C", "t1"),
        results("R", "t1"),
        a("Done."),
        u("Thanks"),
        a("Welcome"),
    ]
    result = await recursive(summarizer, max_events_to_keep=2, overlap_size=1).compact(
        request(events)
    )
    assert lbls(result.compacted_events) == ["Σ?", "Σ:folded", "Thanks", "Welcome"]
    assert summarizer.calls == [
        (
            DEFAULT_SUMMARIZER_SYSTEM_PROMPT,
            "=== PRIOR SUMMARY ===\n"
            "Earlier they met.\n"
            "\n"
            "=== CONVERSATION TO SUMMARIZE ===\n"
            "User: Book a table\n"
            "Assistant [tool calls: lookup({})]\n"
            "Tool [responses: lookup -> result t1]\n"
            "Assistant: Done.\n"
            "\n"
            "=== UPCOMING CONTEXT (do not summarize — for continuity only) ===\n"
            "User: Thanks\n"
            "\n"
            "Please write the summary now:",
        )
    ]


async def test_recursive_prompt_without_prior_summary_or_overlap() -> None:
    """Sections without content are left out; system messages are never sent."""
    summarizer = ScriptedSummarizer(["s"])
    events = [u("U1"), s("secret system prompt"), a("A1"), u("U2"), a("A2")]
    strategy = recursive(summarizer, max_events_to_keep=2, overlap_size=0, system_prompt="Be brief")
    result = await strategy.compact(request(events))
    assert summarizer.calls == [
        (
            "Be brief",
            "=== CONVERSATION TO SUMMARIZE ===\nUser: U1\nAssistant: A1\n\n"
            "Please write the summary now:",
        )
    ]
    assert lbls(result.compacted_events) == ["secret system prompt", "Σ?", "Σ:s", "U2", "A2"]


async def test_recursive_reads_a_legacy_system_summary_as_the_prior_summary() -> None:
    """A synthetic system message (the old summary format) is folded in and archived."""
    summarizer = ScriptedSummarizer(["new"])
    events = [legacy_summary("legacy text"), u("U1"), a("A1"), u("U2"), a("A2")]
    result = await recursive(summarizer, max_events_to_keep=2, overlap_size=0).compact(
        request(events)
    )
    assert summarizer.prompts[0].startswith("=== PRIOR SUMMARY ===\nlegacy text\n\n")
    assert lbls(result.archived_events) == ["Σ:legacy text", "U1", "A1"]


async def test_recursive_summary_turn_shape() -> None:
    """The summary turn is a synthetic shadow prompt and summary with one timestamp and source."""
    moment = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
    strategy = recursive(
        ScriptedSummarizer(["  The user said hi.  "]),
        max_events_to_keep=2,
        overlap_size=0,
        shadow_prompt="What happened so far?",
        clock=lambda: moment,
    )
    events = [u("U1"), a("A1"), u("U2"), a("A2")]
    result = await strategy.compact(request(events))
    shadow, summary = result.compacted_events[:2]
    assert shadow.message is not None
    assert shadow.text == "What happened so far?"
    assert summary.text == "The user said hi."
    assert isinstance(summary.message, AssistantMessage)
    for event in (shadow, summary):
        assert event.session_id == "s-compaction"
        assert event.timestamp == moment
        assert event.metadata == {SYNTHETIC: True, COMPACTION_SOURCE: "recursive-summarization"}
    assert shadow.id != summary.id


async def test_recursive_uses_the_default_shadow_prompt() -> None:
    """Without a shadow prompt, the summary turn opens with the default one."""
    strategy = recursive(ScriptedSummarizer(["s"]), max_events_to_keep=2, overlap_size=0)
    result = await strategy.compact(request([u("U1"), a("A1"), u("U2"), a("A2")]))
    assert result.compacted_events[0].text == DEFAULT_SHADOW_PROMPT


async def test_recursive_does_not_call_the_model_when_nothing_is_cut() -> None:
    """Under the limit, or with one oversize turn, the summarizer is not called."""
    summarizer = ScriptedSummarizer()
    strategy = recursive(summarizer, max_events_to_keep=3, overlap_size=1)
    short = [u("U1"), a("A1")]
    one_turn = [u("U1"), a("A1"), a("A2"), a("A3"), a("A4")]
    assert (await strategy.compact(request(short))).archived_events == ()
    assert (await strategy.compact(request(one_turn))).archived_events == ()
    assert summarizer.calls == []


async def test_recursive_tokens_saved() -> None:
    """Saved = archived + prior summary - the new summary turn, floored at zero."""
    estimator = WordCountEstimator()
    events = [*summary_pair("old words here"), u("one two"), a("three"), u("U2"), a("A2")]
    strategy = recursive(
        ScriptedSummarizer(["tiny"]), max_events_to_keep=2, overlap_size=0, estimator=estimator
    )
    result = await strategy.compact(request(events))
    # archived real 3 + 2, prior pair 8 + 4, new pair 8 + 2
    assert result.tokens_estimated_saved == 5 + 12 - 10
    wordy = recursive(
        ScriptedSummarizer(["many " * 50]),
        max_events_to_keep=2,
        overlap_size=0,
        estimator=estimator,
    )
    assert (await wordy.compact(request(events))).tokens_estimated_saved == 0


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param("", id="empty"),
        pytest.param("   \n", id="blank"),
        pytest.param(RuntimeError("model down"), id="raises"),
        pytest.param(CompactionError("HTTP 500"), id="raises-compaction-error"),
    ],
)
async def test_a_failed_summary_leaves_the_log_untouched_and_reports_it(
    reply: str | BaseException, caplog: pytest.LogCaptureFixture
) -> None:
    """No summary means nothing archived but superseded system messages, a warning, on_failure,
    and an error on the result."""
    failures: list[tuple[CompactionRequest, CompactionError]] = []
    strategy = recursive(
        ScriptedSummarizer([reply]),
        max_events_to_keep=2,
        overlap_size=0,
        on_failure=lambda req, err: failures.append((req, err)),
    )
    events = [s("v1"), u("U1"), a("A1"), s("v2"), u("U2"), a("A2")]
    with caplog.at_level(logging.WARNING, "asyncsession.compaction"):
        result = await strategy.compact(request(events))
    assert lbls(result.compacted_events) == ["U1", "A1", "v2", "U2", "A2"]
    assert lbls(result.archived_events) == ["v1"]
    assert result.error is not None
    assert len(failures) == 1
    assert failures[0][0].events == tuple(events)
    assert str(failures[0][1]) == result.error
    if isinstance(reply, RuntimeError):
        assert failures[0][1].__cause__ is reply
    assert "left the log unchanged" in caplog.text


async def test_an_async_on_failure_is_awaited_and_its_errors_are_swallowed(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """on_failure may be async; if it raises, the error is logged and compaction goes on."""
    seen: list[str] = []

    async def on_failure(req: CompactionRequest, err: CompactionError) -> None:
        seen.append(str(err))
        raise ValueError("callback bug")

    strategy = recursive(
        ScriptedSummarizer([""]), max_events_to_keep=2, overlap_size=0, on_failure=on_failure
    )
    with caplog.at_level(logging.WARNING, "asyncsession.compaction"):
        result = await strategy.compact(request([u("U1"), a("A1"), u("U2"), a("A2")]))
    assert seen == [result.error]
    assert not result.applied
    assert "callback bug" in caplog.text


async def test_a_cancelled_summary_is_not_swallowed() -> None:
    """Cancellation of the summarizer call propagates; it is not a summarization failure."""
    started = asyncio.Event()

    class Hanging:
        async def summarize(self, system_prompt: str, prompt: str) -> str:
            started.set()
            await asyncio.Event().wait()
            raise AssertionError("unreachable")

    failures: list[object] = []
    strategy = RecursiveSummarizationCompactionStrategy(
        Hanging(),
        max_events_to_keep=2,
        overlap_size=0,
        on_failure=lambda r, e: failures.append(e),
    )
    task = asyncio.create_task(strategy.compact(request([u("U1"), a("A1"), u("U2"), a("A2")])))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert failures == []


@pytest.mark.parametrize(
    ("options", "match"),
    [
        pytest.param({"overlap_size": 3, "max_events_to_keep": 3}, "smaller than", id="overlap"),
        pytest.param({"overlap_size": -1}, "overlap_size", id="negative-overlap"),
        pytest.param({"shadow_prompt": " "}, "shadow_prompt", id="shadow"),
        pytest.param({"system_prompt": ""}, "system_prompt", id="system"),
    ],
)
def test_recursive_validates_its_options(options: dict[str, object], match: str) -> None:
    """Bad options are refused at construction."""
    with pytest.raises(UsageError, match=match):
        recursive(ScriptedSummarizer(), **options)


def test_recursive_needs_a_summarizer() -> None:
    """Something without summarize() is refused."""
    with pytest.raises(UsageError, match="summarize"):
        RecursiveSummarizationCompactionStrategy(object())  # type: ignore[arg-type]


async def test_custom_events_are_left_alone_by_every_strategy() -> None:
    """A custom event inside archived turns stays in the window, in place."""
    events = [u("U1"), custom("audit"), a("A1"), u("U2"), a("A2")]
    strategies: list[CompactionStrategy] = [
        SlidingWindowCompactionStrategy(1),
        TurnWindowCompactionStrategy(1),
        TokenCountCompactionStrategy(4, estimator=WordCountEstimator()),
        recursive(ScriptedSummarizer(["sum"]), max_events_to_keep=1, overlap_size=0),
    ]
    for strategy in strategies:
        result = await strategy.compact(request(events))
        assert "custom:audit" in lbls(result.compacted_events)
        assert lbls(result.archived_events) == ["U1", "A1"]
        check_invariants(strategy, events, result, estimator=WordCountEstimator().estimate)


async def test_strategies_do_not_change_their_input() -> None:
    """The request's events are left as they were."""
    events = [u("U1"), a("A1"), u("U2"), a("A2")]
    snapshot = [e.model_copy() for e in events]
    await SlidingWindowCompactionStrategy(1).compact(request(events))
    assert events == snapshot
    assert not any(e.archived for e in events)


def test_format_event_renders_every_kind_of_event() -> None:
    """The formatter follows the spec's line shapes."""
    tool_calls = (ToolCall(id="1", name="f", arguments='{"x":1}'), ToolCall(id="2", name="g"))
    with_text = SessionEvent(
        session_id="s", message=AssistantMessage(text="Let me check", tool_calls=tool_calls)
    )
    tool = SessionEvent(
        session_id="s",
        message=ToolResponseMessage(
            responses=(ToolResponse(id="1", name="f", data="42"), ToolResponse(id="2", data="ok"))
        ),
    )
    assert format_event(u("hi")) == "User: hi"
    assert format_event(s("rules")) == "System: rules"
    assert format_event(a("")) == "Assistant: [no text content]"
    assert format_event(calls("c", "1")) == "Assistant [tool calls: lookup({})]"
    assert format_event(with_text) == 'Assistant: Let me check [tool calls: f({"x":1}), g({})]'
    assert format_event(tool) == "Tool [responses: f -> 42,  -> ok]"
    assert format_event(custom("x")) == 'ACME.AUDIT: {"l": "x"}'


def test_strategies_have_readable_reprs() -> None:
    """A strategy's repr shows its limits."""
    assert (
        repr(SlidingWindowCompactionStrategy(5)) == "SlidingWindowCompactionStrategy(max_events=5)"
    )
    assert repr(TurnWindowCompactionStrategy()) == "TurnWindowCompactionStrategy(max_turns=10)"
    assert "max_tokens=4000" in repr(TokenCountCompactionStrategy())
    assert "max_events_to_keep=10, overlap_size=2" in repr(recursive(ScriptedSummarizer()))
