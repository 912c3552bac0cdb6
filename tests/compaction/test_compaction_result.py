"""What a compaction result says happened: covered, pinned, preserved and summary events,
whether anything changed, the tokens saved and the record it left (Spring AI 2.1's
``CompactionResult``), on both stores."""

from __future__ import annotations

import pytest
from compaction_support import ScriptedSummarizer, conversation

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    EventType,
    SessionEvent,
    SystemMessage,
    UserMessage,
)
from asyncsession.compaction import (
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
    WindowCompactionStrategy,
)
from asyncsession.compaction_protocols import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
)
from asyncsession.events import COMPACTION_ID


async def test_the_window_example_of_the_reference(service: DefaultSessionService) -> None:
    """``compact(id, TurnCountTrigger(20), WindowCompactionStrategy.lastTurns(10))``: what left,
    what is pinned, what is kept verbatim, no summary, tokens saved, and the record."""
    session_id = await conversation(service, 25)
    result = await service.compact(
        session_id, TurnCountTrigger(20), WindowCompactionStrategy(last_turns=10)
    )
    assert not result.is_unchanged
    assert [e.text for e in result.archived_events] == [
        text for n in range(15) for text in (f"question {n}", f"answer {n}")
    ]
    assert [e.text for e in result.pinned_events] == ["You are a support agent."]
    assert [e.text for e in result.preserved_events] == [
        text for n in range(15, 25) for text in (f"question {n}", f"answer {n}")
    ]
    assert result.summary_events == ()
    assert result.tokens_estimated_saved > 0
    assert result.record is not None
    assert result.record.covered == tuple(e.id for e in result.archived_events)
    log = await service.get_events(session_id)
    assert log[-1].type == EventType.COMPACTION
    assert result.record.kept == tuple(
        e.id for e in (*result.pinned_events, *result.preserved_events)
    )


async def test_a_summary_is_reported_as_stored(service: DefaultSessionService) -> None:
    """The summary turn a strategy wrote comes back as stored: tagged with the record's id."""
    session_id = await conversation(service, 6, preamble=True)
    strategy = RecursiveSummarizationCompactionStrategy(
        ScriptedSummarizer(["the summary"]), max_events_to_keep=2, overlap_size=0
    )
    result = await service.compact(session_id, TurnCountTrigger(3), strategy)
    assert result.applied
    assert [e.text for e in result.summary_events][1] == "the summary"
    log = await service.get_events(session_id)
    record_id = log[-1].id
    assert all(e.metadata[COMPACTION_ID] == record_id for e in result.summary_events)
    stored = {e.id: e for e in log}
    assert all(stored[e.id] == e for e in result.compacted_events)
    assert [e.text for e in result.pinned_events] == ["You are a support agent."]
    assert [e.text for e in result.preserved_events] == ["question 5", "answer 5"]
    active = await service.get_events(session_id, EventFilter.active())
    assert active == list(result.compacted_events)


async def test_a_quiet_trigger_or_a_lost_race_is_unchanged(service: DefaultSessionService) -> None:
    """Nothing left and nothing written: ``is_unchanged``, no record."""
    session_id = await conversation(service, 3)
    result = await service.compact(session_id, TurnCountTrigger(20), WindowCompactionStrategy())
    assert result.is_unchanged
    assert result.record is None
    assert not result.applied
    assert all(e.type != EventType.COMPACTION for e in await service.get_events(session_id))


def _strategies() -> list[CompactionStrategy]:
    return [
        SlidingWindowCompactionStrategy(max_events=2),
        TurnWindowCompactionStrategy(max_turns=1),
        TokenCountCompactionStrategy(max_tokens=8),
        WindowCompactionStrategy(last_turns=1),
        WindowCompactionStrategy(last_events=2),
        RecursiveSummarizationCompactionStrategy(
            ScriptedSummarizer(default="summary"), max_events_to_keep=2, overlap_size=0
        ),
    ]


@pytest.mark.parametrize("index", range(len(_strategies())))
async def test_every_strategy_pins_the_latest_stored_system_message(
    service: DefaultSessionService, index: int
) -> None:
    """An older system message leaves; the latest stays in the window and is reported pinned."""
    strategy = _strategies()[index]
    session_id = await conversation(service, 3)
    await service.append_message(session_id, SystemMessage(text="Now answer in French."))
    for n in range(3, 6):
        await service.append_message(session_id, UserMessage(text=f"question {n}"))
        await service.append_message(session_id, AssistantMessage(text=f"answer {n}"))
    result: CompactionResult = await service.compact(session_id, TurnCountTrigger(1), strategy)
    assert result.applied
    assert "Now answer in French." in [e.text for e in result.pinned_events]
    assert "You are a support agent." in [e.text for e in result.archived_events]
    active = [e.text for e in await service.get_events(session_id, EventFilter.active())]
    assert "Now answer in French." in active
    assert "You are a support agent." not in active


class _WritesArchived:
    """Archives every message but the system prompt and writes a question already archived
    (it is covered as soon as it is stored), then an answer that stays active."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        session_id = request.session.id
        question = SessionEvent(session_id=session_id, message=UserMessage(text="new question"))
        answer = SessionEvent(session_id=session_id, message=AssistantMessage(text="new answer"))
        kept = [e for e in request.events if e.type == EventType.SYSTEM]
        archived = tuple(e for e in request.events if e.type != EventType.SYSTEM)
        return CompactionResult(
            compacted_events=(*kept, question.as_archived(), answer), archived_events=archived
        )


async def test_a_new_event_written_archived_is_covered_not_a_summary(
    service: DefaultSessionService,
) -> None:
    """The record counts a new event the plan writes archived among the covered events (after
    the existing ones) and not among its summaries; it carries no record id and is not in the
    new window."""
    session_id = await conversation(service, 2)
    result = await service.compact(session_id, TurnCountTrigger(1), _WritesArchived())

    assert result.applied
    assert result.record is not None
    log = await service.get_events(session_id)
    by_text = {e.text: e for e in log if e.is_message}
    question, answer = by_text["new question"], by_text["new answer"]
    assert (question.archived, answer.archived) == (True, False)
    assert result.record.covered == (
        *(by_text[t].id for t in ("question 0", "answer 0", "question 1", "answer 1")),
        question.id,
    )
    assert result.record.summaries == (answer.id,)
    assert COMPACTION_ID not in question.metadata
    assert answer.metadata[COMPACTION_ID] == log[-1].id
    assert [e.text for e in result.summary_events] == ["new answer"]
    assert [e.text for e in result.compacted_events] == ["You are a support agent.", "new answer"]
    active = await service.get_events(session_id, EventFilter.active())
    assert [e.text for e in active] == ["You are a support agent.", "new answer"]
