"""Property-based tests: every strategy keeps every compaction rule on random logs."""

from __future__ import annotations

from compaction_support import (
    SID,
    CountingSummarizer,
    ScriptedSummarizer,
    WordCountEstimator,
    active_view,
    check_invariants,
    is_real,
    lbls,
    logs,
    request,
    strategies_for_properties,
    unanswered_calls,
)
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
)
from asyncsession.compaction import (
    CompactionStrategy,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
)
from asyncsession.events import EventType, SessionEvent

PROPERTY_SETTINGS = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)


@PROPERTY_SETTINGS
@given(events=logs(), strategy=strategies_for_properties(CountingSummarizer()))
async def test_every_strategy_keeps_every_rule(
    events: list[SessionEvent], strategy: CompactionStrategy
) -> None:
    """On any log, a strategy's result and the log after its plan keep every compaction rule."""
    result = await strategy.compact(request(events))
    check_invariants(strategy, events, result, estimator=WordCountEstimator().estimate)


@PROPERTY_SETTINGS
@given(
    events=logs(),
    keep=st.integers(1, 8),
    reply=st.sampled_from(["", "  ", "boom"]),
)
async def test_a_failed_summary_only_ever_archives_superseded_system_messages(
    events: list[SessionEvent], keep: int, reply: str
) -> None:
    """Whatever the log, a failed summary archives nothing but superseded system messages."""
    failure: str | BaseException = RuntimeError(reply) if reply == "boom" else reply
    strategy = RecursiveSummarizationCompactionStrategy(
        ScriptedSummarizer([failure]), max_events_to_keep=keep, overlap_size=0
    )
    result = await strategy.compact(request(events))
    stored_system = [e for e in events if e.type == EventType.SYSTEM and not e.is_synthetic]
    assert result.archived_events == tuple(stored_system[:-1])
    check_invariants(strategy, events, result)


@PROPERTY_SETTINGS
@given(events=logs(), strategy=strategies_for_properties(CountingSummarizer()))
async def test_compaction_is_stable_once_applied(
    events: list[SessionEvent], strategy: CompactionStrategy
) -> None:
    """A window strategy applied to its own active view archives nothing more."""
    assume(isinstance(strategy, SlidingWindowCompactionStrategy | TokenCountCompactionStrategy))
    result = await strategy.compact(request(events))
    again = await strategy.compact(request(result.compacted_events))
    assert again.archived_events == ()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batches=st.lists(logs(custom_events=True), min_size=1, max_size=4),
    strategy=strategies_for_properties(CountingSummarizer()),
)
async def test_repeated_compaction_through_the_service_keeps_the_log(
    batches: list[list[SessionEvent]], strategy: CompactionStrategy
) -> None:
    """Appending batches and compacting after each never loses, moves or duplicates an event,
    and the stored active view stays well formed."""
    service = DefaultSessionService(InMemorySessionRepository(), allow_system_messages=True)
    session = await service.create(CreateSessionRequest(id=SID, user_id="alice"))
    appended: list[str] = []
    applied = 0
    for batch in batches:
        await service.append_events(session.id, batch)
        appended += [e.id for e in batch]
        applied += (await service.compact(session.id, lambda r: True, strategy)).applied
        everything = await service.get_events(session.id)
        records = [e for e in everything if e.type == EventType.COMPACTION]
        assert len(records) == applied  # one record per applied compaction, never archived
        assert not any(e.archived for e in records)
        log = [e for e in everything if e.type != EventType.COMPACTION]
        originals = [e.id for e in log if not e.is_synthetic or e.id in appended]
        assert originals == appended
        assert len({e.id for e in log}) == len(log)
        view = await service.get_events(session.id, EventFilter.active())
        assert len({e.id for e in view}) == len(view)
        assert {e.id for e in view} == {e.id for e in active_view(log) if e.is_message}
        assert unanswered_calls(view) <= unanswered_calls([e for e in log if e.id in appended])
        opening = [e for e in view if is_real(e)]
        if opening and opening[0].type == EventType.TOOL:
            raise AssertionError(f"active view opens with a tool result: {lbls(view)}")
