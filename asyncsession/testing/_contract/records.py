"""The contract kit: the record a compaction leaves in the log.

Every compaction the service applies appends one commit: its summaries, then one
``COMPACTION`` event, shown in a read of the whole log, never in the active view, never archived
by a later compaction, and readable as a typed
[`CompactionRecord`][asyncsession.compaction_protocols.CompactionRecord].
"""

from __future__ import annotations

import pytest

from ...compaction_protocols import (
    CompactionRecord,
    CompactionRequest,
    CompactionResult,
)
from ...events import COMPACTION_ID, EventType, SessionEvent
from ...exceptions import UsageError
from ...filters import EventFilter
from ...service import DefaultSessionService
from ._support import ContractBase, labels, summary_turn

__all__ = ["CompactionRecordContract"]


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
        log = await self.repo.find_events(s, EventFilter.all())
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
        log = await self.repo.find_events(s, EventFilter.all())
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
        log = await self.repo.find_events(s, EventFilter.all())
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
