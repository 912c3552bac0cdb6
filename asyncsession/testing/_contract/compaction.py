"""The contract kit: compaction as an appended commit.

A compaction appends its summaries and one ``COMPACTION`` boundary; nothing stored is
rewritten. ``archived`` and the active view are derived from the newest boundary, reads of the
active view come in view order, every other read in log order.
"""

from __future__ import annotations

import pytest

from ...events import EventType, SessionEvent
from ...exceptions import SessionNotFound, UsageError
from ...filters import EventFilter
from ...messages import MESSAGE_TYPES, AssistantMessage
from ...repository import SessionRepository
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

__all__ = ["CompactionContract"]

MESSAGES = EventFilter(message_types=MESSAGE_TYPES)
"""Every message event, in log order (boundaries left out)."""


def flagged(events: list[SessionEvent]) -> list[tuple[str, bool]]:
    """Each event's label and whether it reads archived."""
    return [(label(e), e.archived) for e in events]


class CompactionContract(ContractBase):
    """Contract tests for compactions appended as commits, and the view they derive."""

    async def test_a_compaction_is_one_commit_and_rewrites_nothing(
        self, repository: SessionRepository
    ) -> None:
        """The summaries and the boundary land after everything, in one version; what the view
        drops reads archived in its place; the active view comes in view order."""
        s = (await self.new_session(repository)).id
        u1, a1, u2, _a2 = await self.append(repository, s, "u1", "a1", "u2", "a2")
        version = await repository.get_event_version(s)
        summary = summary_turn(s, "summary")
        edge = await self.compact(repository, s, drop=[u1, a1], summaries=summary, before=u2)
        assert await repository.get_event_version(s) == version + 1
        log = await repository.find_events(s, EventFilter.all())
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
        assert await self.texts(repository, s, EventFilter.active()) == [
            "Σ?",
            "Σ:summary",
            "u2",
            "a2",
        ]
        assert await self.texts(
            repository, s, MESSAGES.merge(EventFilter(exclude_archived=True))
        ) == [
            "u2",
            "a2",
            "Σ?",
            "Σ:summary",
        ]

    async def test_events_after_the_boundary_are_active_in_log_order(
        self, repository: SessionRepository
    ) -> None:
        """What is appended after the newest boundary follows its view in the active view."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        summary = synthetic(s, AssistantMessage(text="sum"))
        await self.compact(repository, s, drop=[u1, a1], summaries=[summary])
        await self.append(repository, s, "u3", "a3")
        assert await self.texts(repository, s, EventFilter.active()) == ["Σ:sum", "u2", "u3", "a3"]
        assert labels(await repository.find_events(s, MESSAGES)) == [
            "u1",
            "a1",
            "u2",
            "Σ:sum",
            "u3",
            "a3",
        ]
        assert u2.id in {e.id for e in await repository.find_events(s, EventFilter.active())}

    async def test_only_the_newest_boundary_counts(self, repository: SessionRepository) -> None:
        """A later boundary replaces the earlier one's view whole: an event the earlier one
        dropped and the later one names is active again, and one the earlier named and the
        later does not is archived."""
        s = (await self.new_session(repository)).id
        u1, u2, u3 = await self.append(repository, s, "u1", "u2", "u3")
        await self.compact(repository, s, drop=[u1])
        assert await self.texts(repository, s, EventFilter.active()) == ["u2", "u3"]
        version = await repository.get_event_version(s)
        edge = boundary(s, [u3, u1], [u2])
        assert await repository.append_events(s, [edge], version)
        assert await self.texts(repository, s, EventFilter.active()) == ["u3", "u1"]
        log = await repository.find_events(s, MESSAGES)
        assert flagged(log) == [("u1", False), ("u2", True), ("u3", False)]
        boundaries = await repository.find_events(
            s, EventFilter(event_types=[EventType.COMPACTION])
        )
        assert len(boundaries) == 2
        assert not any(e.archived for e in boundaries)

    async def test_a_boundary_never_enters_the_active_view_and_with_none_all_is_active(
        self, repository: SessionRepository
    ) -> None:
        """Without a boundary every message is active; a boundary itself is never in the view,
        not even when the view's read asks for its type."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, "u1", "u2")
        assert not any(e.archived for e in await repository.find_events(s, EventFilter.all()))
        await self.compact(repository, s)
        asked = EventFilter.active().merge(EventFilter(event_types=[EventType.COMPACTION]))
        assert await repository.find_events(s, asked) == []
        assert await self.texts(repository, s, EventFilter.active()) == ["u1", "u2"]

    async def test_a_window_of_the_active_view_is_cut_in_view_order_and_keeps_turns_whole(
        self, repository: SessionRepository
    ) -> None:
        """``last_n`` over the active view counts from the end of the view order, and reaches
        back to the user message that starts the turn it lands in."""
        s = (await self.new_session(repository)).id
        await repository.append_events(s, [user(s, "u1"), assistant(s, "a1")])
        u2, a2 = user(s, "u2"), assistant(s, "a2")
        await repository.append_events(s, [u2, a2])
        older = await repository.find_events(s, EventFilter.all())
        summary = summary_turn(s, "sum")
        await self.compact(repository, s, drop=older[:2], summaries=summary)
        await repository.append_events(s, [user(s, "u3"), assistant(s, "a3a"), assistant(s, "a3b")])
        assert await self.texts(repository, s, EventFilter.active()) == [
            "Σ?",
            "Σ:sum",
            "u2",
            "a2",
            "u3",
            "a3a",
            "a3b",
        ]
        window = EventFilter.active().merge(EventFilter.last_n(4))
        assert await self.texts(repository, s, window) == ["u2", "a2", "u3", "a3a", "a3b"]
        window = EventFilter.active().merge(EventFilter.last_n(5))
        assert await self.texts(repository, s, window) == ["u2", "a2", "u3", "a3a", "a3b"]
        window = EventFilter.active().merge(EventFilter.last_n(6))
        assert await self.texts(repository, s, window) == [
            "Σ?",
            "Σ:sum",
            "u2",
            "a2",
            "u3",
            "a3a",
            "a3b",
        ]
        snapshot = await repository.read_snapshot(
            s, EventFilter.active().merge(EventFilter.last_n(2))
        )
        assert snapshot is not None
        assert labels(snapshot.events) == ["u3", "a3a", "a3b"]

    async def test_repeated_summarizations_append_and_the_view_follows_the_newest(
        self, repository: SessionRepository
    ) -> None:
        """Three summarization passes: the log only grows, in append order; the active view is
        the newest pass's."""
        s = (await self.new_session(repository)).id

        async def add(*texts: str) -> dict[str, SessionEvent]:
            made = [
                system(s, t) if t.startswith("sys") else (user if t[0] == "u" else assistant)(s, t)
                for t in texts
            ]
            await repository.append_events(s, made)
            return {label(e): e for e in made}

        e = await add("u1", "sys-1", "a1", "u2", "a2", "u3", "a3")
        sum1 = summary_turn(s, "summary 1")
        await self.compact(
            repository,
            s,
            drop=[e[k] for k in ("u1", "a1", "u2", "a2")],
            summaries=sum1,
            before=e["u3"],
        )
        assert await self.texts(repository, s, EventFilter.active()) == [
            "sys-1",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
        ]
        e |= await add("u4", "a4", "u5", "a5", "sys-2", "u6", "a6")
        sum2 = summary_turn(s, "summary 2")
        await self.compact(
            repository,
            s,
            drop=[*sum1, *(e[k] for k in ("u3", "a3", "u4", "a4", "u5", "a5"))],
            summaries=sum2,
            before=e["u6"],
        )
        e |= await add("u7", "a7", "u8", "a8", "u9", "sys-3", "a9")
        sum3 = summary_turn(s, "summary 3")
        await self.compact(
            repository,
            s,
            drop=[*sum2, *(e[k] for k in ("u6", "a6", "u7", "a7", "sys-1", "sys-2"))],
            summaries=sum3,
            before=e["u8"],
        )
        log = await repository.find_events(s, MESSAGES)
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
        assert await self.texts(repository, s, EventFilter.active()) == [
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert await repository.get_event_version(s) == 6

    async def test_a_retry_of_an_applied_compaction_is_a_replay(
        self, repository: SessionRepository
    ) -> None:
        """The same commit again at the version it was planned at (its first reply was lost):
        ``True`` and nothing changes; another compaction at that version is refused."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        version = await repository.get_event_version(s)
        summary = synthetic(s, AssistantMessage(text="summary"))
        commit = [summary, boundary(s, [summary, u2], [u1, a1])]
        assert await repository.append_events(s, commit, version)
        log = await repository.find_events(s, EventFilter.all())
        assert await repository.append_events(s, commit, version)
        assert await repository.find_events(s, EventFilter.all()) == log
        assert await repository.get_event_version(s) == version + 1
        other = [boundary(s, [u1], [a1, u2])]
        assert not await repository.append_events(s, other, version)
        assert await repository.find_events(s, EventFilter.all()) == log

    async def test_a_stale_version_is_refused_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """A compaction at an old or future version returns ``False``; log, view and version
        stay."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        version = await repository.get_event_version(s)
        summary = synthetic(s, AssistantMessage(text="summary"))
        commit = [summary, boundary(s, [summary, u2], [u1, a1])]
        assert not await repository.append_events(s, commit, version - 1)
        assert not await repository.append_events(s, commit, version + 1)
        assert await repository.get_event_version(s) == version
        log = await repository.find_events(s, EventFilter.all())
        assert flagged(log) == [("u1", False), ("a1", False), ("u2", False)]

    async def test_a_boundary_must_end_its_commit_and_hold_a_record(
        self, repository: SessionRepository
    ) -> None:
        """A ``COMPACTION`` event before another event of its append, or one whose payload is not
        a record, is refused and nothing is written."""
        s = (await self.new_session(repository)).id
        (u1,) = await self.append(repository, s, "u1")
        with pytest.raises(UsageError):
            await repository.append_events(s, [boundary(s, [u1]), user(s, "after")])
        bad = SessionEvent(session_id=s, type=EventType.COMPACTION, payload={"view": 3})
        with pytest.raises(UsageError):
            await repository.append_events(s, [bad])
        assert await repository.get_event_version(s) == 1
        assert await self.texts(repository, s, EventFilter.all()) == ["u1"]

    async def test_archived_on_an_appended_event_is_ignored(
        self, repository: SessionRepository
    ) -> None:
        """``archived`` is derived on read, never taken from the event appended."""
        s = (await self.new_session(repository)).id
        flagged_in = user(s, "u1").as_archived()
        await repository.append_event(flagged_in)
        (stored,) = await repository.find_events(s, EventFilter.all())
        assert not stored.archived
        assert await self.texts(repository, s, EventFilter.active()) == ["u1"]

    async def test_a_compaction_of_an_unknown_session_is_refused(
        self, repository: SessionRepository
    ) -> None:
        """A compaction commit for a session that does not exist raises."""
        s = new_id()
        with pytest.raises(SessionNotFound):
            await repository.append_events(s, [boundary(s, [])], 0)
