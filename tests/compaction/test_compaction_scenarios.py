"""Compaction through ``SessionService.compact``: the spec's worked examples and multi-pass
summarization, written once and run against every store.

``CompactionScenarios`` is not collected itself (no ``Test`` prefix); each subclass provides a
``service`` fixture over one store.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import pytest
from compaction_support import (
    ScriptedSummarizer,
    WordCountEstimator,
    lbl,
    lbls,
    unanswered_calls,
)
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    SessionEvent,
    SessionNotFound,
    SystemMessage,
    UserMessage,
)
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
)
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.events import COMPACTION_ID, COMPACTION_SOURCE, SYNTHETIC, EventType
from asyncsession.messages import Message
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import SHADOW_PROMPT


def always(request: CompactionRequest) -> bool:
    return True


def spec_events(session_id: str, spec: Sequence[str]) -> list[SessionEvent]:
    """Events from labels, by first letter in any case: ``U`` user, ``A`` assistant, ``S`` system,
    ``C`` a custom event; ``Σ..`` is a summary pair."""
    events: list[SessionEvent] = []
    for label in spec:
        kind = label[0].upper()
        if kind == "Σ":
            meta = {SYNTHETIC: True, COMPACTION_SOURCE: "recursive-summarization"}
            pair: list[Message] = [UserMessage(text=SHADOW_PROMPT), AssistantMessage(text=label)]
            events += [SessionEvent(session_id=session_id, message=m, metadata=meta) for m in pair]
            continue
        if kind == "C":
            custom = SessionEvent(
                session_id=session_id, type=EventType.of("ACME.NOTE"), payload={"l": label}
            )
            events.append(custom)
            continue
        message: Message = {
            "U": UserMessage(text=label),
            "A": AssistantMessage(text=label),
            "S": SystemMessage(text=label),
        }[kind]
        events.append(SessionEvent(session_id=session_id, message=message))
    return events


WORKED_EXAMPLES = [
    pytest.param(
        ["U1", "A1", "U2", "A2a", "A2b", "U3", "A3"],
        lambda: SlidingWindowCompactionStrategy(3),
        ["U3", "A3"],
        id="sliding-3",
    ),
    pytest.param(
        ["U1", "A1", "U2", "A2", "A3", "A4"],
        lambda: SlidingWindowCompactionStrategy(2),
        ["U2", "A2", "A3", "A4"],
        id="sliding-2-newest-turn-whole",
    ),
    pytest.param(
        ["U1", "A1", "A2", "A3"],
        lambda: SlidingWindowCompactionStrategy(2),
        ["U1", "A1", "A2", "A3"],
        id="sliding-2-unchanged",
    ),
    pytest.param(
        ["S:v1", "U1", "A1", "S:v2", "U2", "A2"],
        lambda: SlidingWindowCompactionStrategy(20),
        ["U1", "A1", "S:v2", "U2", "A2"],
        id="sliding-20-superseded-system",
    ),
    pytest.param(
        ["U1", "S", "A1", "U2", "A2", "U3", "A3"],
        lambda: SlidingWindowCompactionStrategy(2),
        ["S", "U3", "A3"],
        id="sliding-2-system-in-place",
    ),
    pytest.param(
        ["Σold", "U1", "A1", "U2", "A2", "U3", "A3"],
        lambda: RecursiveSummarizationCompactionStrategy(
            ScriptedSummarizer(["Σnew"]), max_events_to_keep=2, overlap_size=1
        ),
        ["Σ?", "Σ:Σnew", "U3", "A3"],
        id="recursive-keep-2-overlap-1",
    ),
]


class CompactionScenarios:
    """Session-level compaction scenarios; subclass with a ``service`` fixture over a store."""

    async def new_session(self, service: DefaultSessionService, *spec: str) -> str:
        session = await service.create(CreateSessionRequest(user_id="alice"))
        if spec:
            await service.append_events(session.id, spec_events(session.id, spec))
        return session.id

    async def active(self, service: DefaultSessionService, session_id: str) -> list[str]:
        return lbls(await service.get_events(session_id, EventFilter.active()))

    async def log(self, service: DefaultSessionService, session_id: str) -> list[str]:
        return lbls(await service.get_events(session_id))

    @pytest.mark.parametrize(("spec", "strategy", "kept"), WORKED_EXAMPLES)
    async def test_worked_example(
        self,
        service: DefaultSessionService,
        spec: list[str],
        strategy: Callable[[], CompactionStrategy],
        kept: list[str],
    ) -> None:
        """Each worked example of the spec leaves exactly the listed active view in the store."""
        session_id = await self.new_session(service, *spec)
        before = await service.get_events(session_id)
        result = await service.compact(session_id, always, strategy())
        assert await self.active(service, session_id) == kept
        log = await service.get_events(session_id)
        assert [e.id for e in log if e.id in {b.id for b in before}] == [b.id for b in before]
        assert result.applied == (kept != [lbls([e])[0] for e in before])

    async def test_multi_pass_summarization(self, service: DefaultSessionService) -> None:
        """Three summarization passes fold summaries and archive superseded system messages;
        the log only grows, each pass's summaries and record appended after what it read."""
        summarizer = ScriptedSummarizer(["summary 1", "summary 2", "summary 3"])

        def strategy(keep: int) -> RecursiveSummarizationCompactionStrategy:
            return RecursiveSummarizationCompactionStrategy(
                summarizer, max_events_to_keep=keep, overlap_size=1
            )

        sid = await self.new_session(service)

        async def add(*labels: str) -> None:
            await service.append_events(sid, spec_events(sid, labels))

        await add("u1", "sys-1", "a1", "u2", "a2", "u3", "a3")
        first = await service.compact(sid, TurnCountTrigger(2), strategy(2))
        assert first.applied
        assert await self.active(service, sid) == ["sys-1", "Σ?", "Σ:summary 1", "u3", "a3"]

        await add("u4", "a4", "u5", "a5", "sys-2", "u6", "a6")
        assert (await service.compact(sid, TurnCountTrigger(2), strategy(2))).applied
        assert await self.active(service, sid) == ["sys-2", "Σ?", "Σ:summary 2", "u6", "a6"]

        await add("u7", "a7", "u8", "a8", "u9", "sys-3", "a9")
        assert (await service.compact(sid, TurnCountTrigger(2), strategy(4))).applied

        assert await self.log(service, sid) == [
            "u1",
            "sys-1",
            "a1",
            "u2",
            "a2",
            "u3",
            "a3",
            "Σ?",
            "Σ:summary 1",
            "COMPACTION",
            "u4",
            "a4",
            "u5",
            "a5",
            "sys-2",
            "u6",
            "a6",
            "Σ?",
            "Σ:summary 2",
            "COMPACTION",
            "u7",
            "a7",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
            "Σ?",
            "Σ:summary 3",
            "COMPACTION",
        ]
        active = ["Σ?", "Σ:summary 3", "u8", "a8", "u9", "sys-3", "a9"]
        assert await self.active(service, sid) == active
        log = await service.get_events(sid)
        assert sorted(lbl(e) for e in log if not e.archived and e.is_message) == sorted(active)
        stored = [e for e in log if e.type == EventType.COMPACTION]
        records = [CompactionRecord.from_event(e) for e in stored]
        assert [r.strategy for r in records] == ["RecursiveSummarizationCompactionStrategy"] * 3
        for event, record in zip(stored, records, strict=True):
            assert len(record.summaries) == 2
            by_id = {e.id: e for e in log}
            assert all(by_id[i].metadata[COMPACTION_ID] == event.id for i in record.summaries)
        assert await service.get_event_version(sid) == 6

        prompts = summarizer.prompts
        assert "PRIOR SUMMARY" not in prompts[0]
        assert "sys-1" not in prompts[0]
        assert prompts[0].startswith("=== CONVERSATION TO SUMMARIZE ===\nUser: u1\nAssistant: a1\n")
        assert "=== PRIOR SUMMARY ===\nsummary 1\n" in prompts[1]
        assert "=== PRIOR SUMMARY ===\nsummary 2\n" in prompts[2]
        assert "summary 1" not in prompts[2]
        assert "User: u6\nAssistant: a6\nUser: u7\nAssistant: a7\n" in prompts[2]

    async def test_a_quiet_trigger_writes_nothing(self, service: DefaultSessionService) -> None:
        """When the trigger does not fire, the result is unchanged and the version stays."""
        sid = await self.new_session(service, "U1", "A1", "U2", "A2")
        version = await service.get_event_version(sid)
        result = await service.compact(sid, TurnCountTrigger(5), SlidingWindowCompactionStrategy(1))
        assert not result.applied
        assert result.archived_events == ()
        assert await service.get_event_version(sid) == version

    async def test_a_failed_summary_is_reported_and_writes_nothing(
        self, service: DefaultSessionService
    ) -> None:
        """A summarizer failure leaves the log as it was and shows up as the result's error."""
        sid = await self.new_session(service, "U1", "A1", "U2", "A2")
        before = await service.get_events(sid)
        version = await service.get_event_version(sid)
        strategy = RecursiveSummarizationCompactionStrategy(
            ScriptedSummarizer([RuntimeError("model down")]), max_events_to_keep=2, overlap_size=0
        )
        result = await service.compact(sid, always, strategy)
        assert not result.applied
        assert result.error is not None
        assert "model down" in result.error
        assert await service.get_events(sid) == before
        assert await service.get_event_version(sid) == version

    async def test_a_failed_summary_still_archives_superseded_system_messages(
        self, service: DefaultSessionService
    ) -> None:
        """Latest-wins applies even on a pass whose summary failed."""
        sid = await self.new_session(service, "S1", "U1", "A1", "S2", "U2", "A2")
        strategy = RecursiveSummarizationCompactionStrategy(
            ScriptedSummarizer([""]), max_events_to_keep=2, overlap_size=0
        )
        result = await service.compact(sid, always, strategy)
        assert result.applied
        assert result.error is not None
        assert await self.active(service, sid) == ["U1", "A1", "S2", "U2", "A2"]

    async def test_custom_events_stay_where_they_are(self, service: DefaultSessionService) -> None:
        """Compaction neither archives nor moves events of custom types; its summaries go
        after everything it read."""
        sid = await self.new_session(service, "U1", "C1", "A1", "U2", "A2", "U3", "A3")
        strategy = RecursiveSummarizationCompactionStrategy(
            ScriptedSummarizer(["sum"]), max_events_to_keep=2, overlap_size=0
        )
        assert (await service.compact(sid, always, strategy)).applied
        log = await service.get_events(sid)
        assert lbls(log) == [
            "U1",
            "custom:C1",
            "A1",
            "U2",
            "A2",
            "U3",
            "A3",
            "Σ?",
            "Σ:sum",
            "COMPACTION",
        ]
        assert [e.archived for e in log if e.message is None] == [False, False]
        assert await self.active(service, sid) == ["Σ?", "Σ:sum", "U3", "A3"]

    async def test_token_trigger_and_strategy_end_to_end(
        self, service: DefaultSessionService
    ) -> None:
        """A token-count trigger fires and the token-count strategy brings the view under budget."""
        sid = await self.new_session(
            service, *(f"{k}{i} word word" for i in range(6) for k in "UA")
        )
        estimator = WordCountEstimator()
        trigger = TokenCountTrigger(30, estimator=estimator)
        strategy = TokenCountCompactionStrategy(20, estimator=estimator)
        result = await service.compact(sid, trigger, strategy)
        assert result.applied
        # Each event is 4 words: 5 would fit in 20, and the cut snaps forward to a turn start.
        assert await self.active(service, sid) == [
            "U4 word word",
            "A4 word word",
            "U5 word word",
            "A5 word word",
        ]
        again = await service.compact(sid, trigger, strategy)
        assert not again.applied

    async def test_a_lost_compare_and_swap_is_a_silent_no_op(
        self, service: DefaultSessionService
    ) -> None:
        """A write between the read and the plan makes compact() change nothing."""
        sid = await self.new_session(service, "U1", "A1", "U2", "A2")

        class AppendsMeanwhile:
            async def compact(self, request: CompactionRequest) -> CompactionResult:
                await service.append_message(sid, UserMessage(text="U3"))
                return await SlidingWindowCompactionStrategy(1).compact(request)

        result = await service.compact(sid, always, AppendsMeanwhile())
        assert not result.applied
        assert result.archived_events == ()
        assert await self.active(service, sid) == ["U1", "A1", "U2", "A2", "U3"]

    async def test_the_active_view_after_compaction_is_well_formed(
        self, service: DefaultSessionService
    ) -> None:
        """After a pass the active view opens with a turn and has no unanswered tool call."""
        sid = await self.new_session(service, "U1", "A1", "U2", "A2", "U3", "A3")
        await service.compact(sid, always, SlidingWindowCompactionStrategy(2))
        view = await service.get_events(sid, EventFilter.active())
        assert view[0].is_turn_start
        assert unanswered_calls(view) == set()

    async def test_compacting_an_unknown_session_raises(
        self, service: DefaultSessionService
    ) -> None:
        """compact() of a session that does not exist raises SessionNotFound."""
        with pytest.raises(SessionNotFound):
            await service.compact("no-such-session", always, SlidingWindowCompactionStrategy())


class TestInMemoryCompactionScenarios(CompactionScenarios):
    @pytest.fixture
    def service(self) -> DefaultSessionService:
        return DefaultSessionService(InMemorySessionRepository(), allow_system_messages=True)


class TestMongoCompactionScenarios(CompactionScenarios):
    """The same scenarios on MongoDB, over the wire (the test server)."""

    @pytest.fixture
    async def service(
        self, mongo_db: AsyncDatabase[dict[str, Any]]
    ) -> AsyncIterator[DefaultSessionService]:
        repository = MongoSessionRepository(mongo_db)
        await repository.ensure_indexes()
        yield DefaultSessionService(repository, allow_system_messages=True)
        await repository.aclose()
