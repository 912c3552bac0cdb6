"""The contract kit: compaction as an appended commit, and the record it leaves.

A compaction appends its summaries and one ``COMPACTION`` boundary; nothing stored is
rewritten. ``archived`` and the active view are derived from the newest boundary; reads of the
active view come in view order, every other read in log order. The boundary is shown in a read
of the whole log, never in the active view, never archived by a later compaction, and reads as
a typed [`CompactionRecord`][asyncsession.compaction_protocols.CompactionRecord].
"""

from __future__ import annotations

import pytest

from ...compaction_protocols import CompactionRecord, CompactionRequest, CompactionResult
from ...events import COMPACTION_ID, EventType, SessionEvent
from ...exceptions import SessionNotFound, UsageError
from ...filters import EventFilter
from ...messages import AssistantMessage, MessageType
from ...service import DefaultSessionService
from ._support import (
    ContractBase,
    assistant,
    boundary,
    label,
    labels,
    new_id,
    summary_turn,
    synthetic,
    system,
    user,
)

__all__ = ["CompactionContract", "CompactionRecordContract"]

MESSAGES = EventFilter(message_types=list(MessageType))
"""Every message event, in log order (boundaries left out)."""


def flagged(events: list[SessionEvent]) -> list[tuple[str, bool]]:
    """Each event's label and whether it reads archived."""
    return [(label(e), e.archived) for e in events]


class CompactionContract(ContractBase):
    """Contract tests for compactions appended as commits, and the view they derive."""

    async def test_a_compaction_is_one_commit_and_rewrites_nothing(self) -> None:
        """The summaries and the boundary land after everything, in one version; what the view
        drops reads archived in its place; the active view comes in view order."""
        s = (await self.new_session()).id
        u1, a1, u2, _a2 = await self.append(s, "u1", "a1", "u2", "a2")
        version = await self.repo.get_event_version(s)
        summary = summary_turn(s, "summary")
        edge = await self.compact(s, drop=[u1, a1], summaries=summary, before=u2)
        assert await self.repo.get_event_version(s) == version + 1
        log = await self.log(s)
        assert [e.id for e in log[-3:]] == [summary[0].id, summary[1].id, edge.id]
        assert flagged(log) == [
            ("u1", True),
            ("a1", True),
            ("u2", False),
            ("a2", False),
            ("Σ?", False),
            ("Σ:summary", False),
            ("None", False),
        ]
        assert log[-1].type == EventType.COMPACTION
        assert await self.texts(s, EventFilter.active()) == ["Σ?", "Σ:summary", "u2", "a2"]
        assert await self.texts(s, MESSAGES.merge(EventFilter(exclude_archived=True))) == [
            "u2",
            "a2",
            "Σ?",
            "Σ:summary",
        ]

    async def test_events_after_the_boundary_are_active_in_log_order(self) -> None:
        """What is appended after the newest boundary follows its view in the active view."""
        s = (await self.new_session()).id
        u1, a1, u2 = await self.append(s, "u1", "a1", "u2")
        summary = synthetic(s, AssistantMessage(text="sum"))
        await self.compact(s, drop=[u1, a1], summaries=[summary])
        await self.append(s, "u3", "a3")
        assert await self.texts(s, EventFilter.active()) == ["Σ:sum", "u2", "u3", "a3"]
        assert labels(await self.repo.find_events(s, MESSAGES)) == [
            "u1",
            "a1",
            "u2",
            "Σ:sum",
            "u3",
            "a3",
        ]
        assert u2.id in {e.id for e in await self.repo.find_events(s, EventFilter.active())}

    async def test_only_the_newest_boundary_counts(self) -> None:
        """A later boundary replaces the earlier one's view whole: an event the earlier one
        dropped and the later one names is active again, and one the earlier named and the
        later does not is archived."""
        s = (await self.new_session()).id
        u1, u2, u3 = await self.append(s, "u1", "u2", "u3")
        await self.compact(s, drop=[u1])
        assert await self.texts(s, EventFilter.active()) == ["u2", "u3"]
        version = await self.repo.get_event_version(s)
        edge = boundary(s, [u3, u1], [u2])
        assert await self.repo.append_events(s, [edge], version)
        assert await self.texts(s, EventFilter.active()) == ["u3", "u1"]
        log = await self.repo.find_events(s, MESSAGES)
        assert flagged(log) == [("u1", False), ("u2", True), ("u3", False)]
        boundaries = await self.repo.find_events(s, EventFilter(event_types=[EventType.COMPACTION]))
        assert len(boundaries) == 2
        assert not any(e.archived for e in boundaries)

    async def test_a_boundary_never_enters_the_active_view_and_with_none_all_is_active(
        self,
    ) -> None:
        """Without a boundary every message is active; a boundary itself is never in the view,
        not even when the view's read asks for its type."""
        s = (await self.new_session()).id
        await self.append(s, "u1", "u2")
        assert not any(e.archived for e in await self.log(s))
        await self.compact(s)
        asked = EventFilter.active().merge(EventFilter(event_types=[EventType.COMPACTION]))
        assert await self.repo.find_events(s, asked) == []
        assert await self.texts(s, EventFilter.active()) == ["u1", "u2"]

    async def test_a_window_of_the_active_view_is_cut_in_view_order_and_keeps_turns_whole(
        self,
    ) -> None:
        """``last_n`` over the active view counts from the end of the view order, and reaches
        back to the user message that starts the turn it lands in."""
        s = (await self.new_session()).id
        await self.repo.append_events(s, [user(s, "u1"), assistant(s, "a1")])
        u2, a2 = user(s, "u2"), assistant(s, "a2")
        await self.repo.append_events(s, [u2, a2])
        older = await self.log(s)
        summary = summary_turn(s, "sum")
        await self.compact(s, drop=older[:2], summaries=summary)
        await self.repo.append_events(s, [user(s, "u3"), assistant(s, "a3a"), assistant(s, "a3b")])
        assert await self.texts(s, EventFilter.active()) == [
            "Σ?",
            "Σ:sum",
            "u2",
            "a2",
            "u3",
            "a3a",
            "a3b",
        ]
        window = EventFilter.active().merge(EventFilter.last_n(4))
        assert await self.texts(s, window) == ["u2", "a2", "u3", "a3a", "a3b"]
        window = EventFilter.active().merge(EventFilter.last_n(5))
        assert await self.texts(s, window) == ["u2", "a2", "u3", "a3a", "a3b"]
        window = EventFilter.active().merge(EventFilter.last_n(6))
        assert await self.texts(s, window) == ["Σ?", "Σ:sum", "u2", "a2", "u3", "a3a", "a3b"]
        snapshot = await self.snapshot(s, EventFilter.active().merge(EventFilter.last_n(2)))
        assert labels(snapshot.events) == ["u3", "a3a", "a3b"]

    async def test_repeated_summarizations_append_and_the_view_follows_the_newest(self) -> None:
        """Three summarization passes: the log only grows, in append order; the active view is
        the newest pass's."""
        s = (await self.new_session()).id

        async def add(*texts: str) -> dict[str, SessionEvent]:
            made = [
                system(s, t) if t.startswith("sys") else (user if t[0] == "u" else assistant)(s, t)
                for t in texts
            ]
            await self.repo.append_events(s, made)
            return {label(e): e for e in made}

        e = await add("u1", "sys-1", "a1", "u2", "a2", "u3", "a3")
        sum1 = summary_turn(s, "summary 1")
        await self.compact(
            s, drop=[e[k] for k in ("u1", "a1", "u2", "a2")], summaries=sum1, before=e["u3"]
        )
        assert await self.texts(s, EventFilter.active()) == [
            "sys-1",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
        ]
        e |= await add("u4", "a4", "u5", "a5", "sys-2", "u6", "a6")
        sum2 = summary_turn(s, "summary 2")
        await self.compact(
            s,
            drop=[*sum1, *(e[k] for k in ("u3", "a3", "u4", "a4", "u5", "a5"))],
            summaries=sum2,
            before=e["u6"],
        )
        e |= await add("u7", "a7", "u8", "a8", "u9", "sys-3", "a9")
        sum3 = summary_turn(s, "summary 3")
        await self.compact(
            s,
            drop=[*sum2, *(e[k] for k in ("u6", "a6", "u7", "a7", "sys-1", "sys-2"))],
            summaries=sum3,
            before=e["u8"],
        )
        log = await self.repo.find_events(s, MESSAGES)
        assert labels(log) == [
            "u1",
            "sys-1",
            "a1",
            "u2",
            "a2",
            "u3",
            "a3",
            "Σ?",
            "Σ:summary 1",
            "u4",
            "a4",
            "u5",
            "a5",
            "sys-2",
            "u6",
            "a6",
            "Σ?",
            "Σ:summary 2",
            "u7",
            "a7",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
            "Σ?",
            "Σ:summary 3",
        ]
        assert [label(x) for x in log if not x.archived] == [
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
            "Σ?",
            "Σ:summary 3",
        ]
        assert await self.texts(s, EventFilter.active()) == [
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert await self.repo.get_event_version(s) == 6

    async def test_a_retry_of_an_applied_compaction_is_a_replay(self) -> None:
        """The same commit again at the version it was planned at (its first reply was lost):
        ``True`` and nothing changes; another compaction at that version is refused."""
        s = (await self.new_session()).id
        u1, a1, u2 = await self.append(s, "u1", "a1", "u2")
        version = await self.repo.get_event_version(s)
        summary = synthetic(s, AssistantMessage(text="summary"))
        commit = [summary, boundary(s, [summary, u2], [u1, a1])]
        assert await self.repo.append_events(s, commit, version)
        log = await self.log(s)
        assert await self.repo.append_events(s, commit, version)
        assert await self.log(s) == log
        assert await self.repo.get_event_version(s) == version + 1
        other = [boundary(s, [u1], [a1, u2])]
        assert not await self.repo.append_events(s, other, version)
        assert await self.log(s) == log

    async def test_a_stale_version_is_refused_and_changes_nothing(self) -> None:
        """A compaction at an old or future version returns ``False``; log, view and version
        stay."""
        s = (await self.new_session()).id
        u1, a1, u2 = await self.append(s, "u1", "a1", "u2")
        version = await self.repo.get_event_version(s)
        summary = synthetic(s, AssistantMessage(text="summary"))
        commit = [summary, boundary(s, [summary, u2], [u1, a1])]
        assert not await self.repo.append_events(s, commit, version - 1)
        assert not await self.repo.append_events(s, commit, version + 1)
        assert await self.repo.get_event_version(s) == version
        log = await self.log(s)
        assert flagged(log) == [("u1", False), ("a1", False), ("u2", False)]

    async def test_a_boundary_must_end_its_commit_and_hold_a_record(self) -> None:
        """A ``COMPACTION`` event before another event of its append, or one whose payload is not
        a record, is refused and nothing is written."""
        s = (await self.new_session()).id
        (u1,) = await self.append(s, "u1")
        with pytest.raises(UsageError):
            await self.repo.append_events(s, [boundary(s, [u1]), user(s, "after")])
        bad = SessionEvent(session_id=s, type=EventType.COMPACTION, payload={"view": 3})
        with pytest.raises(UsageError):
            await self.repo.append_events(s, [bad])
        assert await self.repo.get_event_version(s) == 1
        assert await self.texts(s) == ["u1"]

    async def test_archived_on_an_appended_event_is_ignored(self) -> None:
        """``archived`` is derived on read, never taken from the event appended."""
        s = (await self.new_session()).id
        flagged_in = user(s, "u1").as_archived()
        await self.repo.append_event(flagged_in)
        (stored,) = await self.log(s)
        assert not stored.archived
        assert await self.texts(s, EventFilter.active()) == ["u1"]

    async def test_a_compaction_of_an_unknown_session_is_refused(self) -> None:
        """A compaction commit for a session that does not exist raises."""
        s = new_id()
        with pytest.raises(SessionNotFound):
            await self.repo.append_events(s, [boundary(s, [])], 0)


class _SummarizeAllButLast:
    """Replaces every active event but the newest two with a summary turn."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        events = request.events
        summary = summary_turn(request.session.id, self.text)
        return CompactionResult(
            compacted_events=(*summary, *events[-2:]), archived_events=events[:-2]
        )


def _always(request: CompactionRequest) -> bool:
    return True


class CompactionRecordContract(ContractBase):
    """Contract tests for the ``COMPACTION`` event an applied compaction appends."""

    async def test_a_compaction_appends_one_record_with_its_summaries(self) -> None:
        """One record at the end, after its summaries, naming what was covered, kept and
        written and the new view; one version."""
        service = DefaultSessionService(self.repo)
        s = (await self.new_session()).id
        u1, u2, u3, u4 = await self.append(s, "u1", "u2", "u3", "u4")
        version = await self.repo.get_event_version(s)
        result = await service.compact(s, _always, _SummarizeAllButLast("one"))
        assert result.applied
        assert await self.repo.get_event_version(s) == version + 1
        log = await self.log(s)
        assert log[-1].type == EventType.COMPACTION
        record = CompactionRecord.from_event(log[-1])
        summaries = [e for e in log if e.is_synthetic]
        assert record.covered == (u1.id, u2.id)
        assert record.kept == (u3.id, u4.id)
        assert record.summaries == tuple(e.id for e in summaries)
        assert len(summaries) == 2
        assert [e.id for e in log[-3:-1]] == list(record.summaries)
        assert record.view == (*record.summaries, u3.id, u4.id)
        active = await self.repo.find_events(s, EventFilter.active())
        assert tuple(e.id for e in active) == record.view
        assert all(e.metadata[COMPACTION_ID] == log[-1].id for e in summaries)
        assert record.strategy == "_SummarizeAllButLast"
        assert record.trigger == "_always"
        assert record.tokens_before > 0
        assert record.tokens_after > 0
        assert not log[-1].archived

    async def test_the_record_is_never_in_the_active_view_nor_archived_later(self) -> None:
        """A second compaction covers messages only; both records stay, unarchived."""
        service = DefaultSessionService(self.repo)
        s = (await self.new_session()).id
        await self.append(s, "u1", "u2", "u3")
        assert (await service.compact(s, _always, _SummarizeAllButLast("one"))).applied
        await self.append(s, "u4", "u5")
        assert (await service.compact(s, _always, _SummarizeAllButLast("two"))).applied
        active = await self.repo.find_events(s, EventFilter.active())
        assert labels(active) == ["Σ?", "Σ:two", "u4", "u5"]
        log = await self.log(s)
        records = [e for e in log if e.type == EventType.COMPACTION]
        assert len(records) == 2
        assert not any(e.archived for e in records)
        second = CompactionRecord.from_event(records[1])
        assert records[0].id not in second.covered
        # the first summary turn is covered by the second compaction
        first_summaries = CompactionRecord.from_event(records[0]).summaries
        assert set(first_summaries) <= set(second.covered)
        only = EventFilter(event_types=[EventType.COMPACTION])
        assert [e.id for e in await self.repo.find_events(s, only)] == [r.id for r in records]

    async def test_a_compaction_that_changes_nothing_leaves_no_record(self) -> None:
        """A quiet trigger, or a strategy that keeps everything, writes nothing."""
        service = DefaultSessionService(self.repo)
        s = (await self.new_session()).id
        await self.append(s, "u1", "u2")
        version = await self.repo.get_event_version(s)
        quiet = await service.compact(s, lambda r: False, _SummarizeAllButLast("x"))
        assert not quiet.applied
        assert await self.repo.get_event_version(s) == version
        log = await self.log(s)
        assert [e.type for e in log] == [EventType.USER, EventType.USER]

    async def test_a_message_event_is_not_a_record(self) -> None:
        """Reading a record from another event is refused."""
        s = (await self.new_session()).id
        (u1,) = await self.append(s, "u1")
        with pytest.raises(UsageError):
            CompactionRecord.from_event(u1)
        bad = SessionEvent(session_id=s, type=EventType.COMPACTION, payload={"covered": 3})
        with pytest.raises(UsageError):
            CompactionRecord.from_event(bad)
