"""The contract kit: compaction.

Archiving in place, anchored inserts, stale versions and plans that must be refused.
"""

from __future__ import annotations

import pickle

import pytest

from ...compaction_protocols import CompactionPlan, Insert
from ...events import SessionEvent
from ...exceptions import InvalidCompactionPlan, SessionNotFound
from ...filters import EventFilter
from ...messages import (
    AssistantMessage,
)
from ...repository import SessionRepository
from ._support import (
    ContractBase,
    assistant,
    label,
    labels,
    new_id,
    summary_turn,
    synthetic,
    system,
    user,
)

__all__ = ["CompactionContract"]


class CompactionContract(ContractBase):
    """Contract tests for `apply_compaction`."""

    async def test_archiving_flags_events_in_place_and_increments_the_version(
        self, repository: SessionRepository
    ) -> None:
        """Archived events keep their place; the version moves by one."""
        s = (await self.new_session(repository)).id
        u1, a1, _u2, _a2 = await self.append(repository, s, "u1", "a1", "u2", "a2")
        version = await repository.get_event_version(s)
        assert await repository.apply_compaction(
            s, CompactionPlan(archive_ids=frozenset({u1.id, a1.id})), version
        )
        assert await repository.get_event_version(s) == version + 1
        log = await repository.find_events(s, EventFilter.all())
        assert [(e.text, e.archived) for e in log] == [
            ("u1", True),
            ("a1", True),
            ("u2", False),
            ("a2", False),
        ]
        assert await self.texts(repository, s, EventFilter.active()) == ["u2", "a2"]

    async def test_a_replaced_summary_is_archived_in_place_not_removed(
        self, repository: SessionRepository
    ) -> None:
        """Archiving a synthetic summary keeps it in the log and hides it from the active view."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, "u1")
        summary = synthetic(s, AssistantMessage(text="old summary"))
        await repository.append_event(summary)
        await self.append(repository, s, "u2")
        await self.apply(repository, s, CompactionPlan(archive_ids=frozenset({summary.id})))
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "Σ:old summary", "u2"]
        assert await self.texts(repository, s, EventFilter.active()) == ["u1", "u2"]

    async def test_an_insert_goes_immediately_before_its_anchor(
        self, repository: SessionRepository
    ) -> None:
        """New events land right before their anchor event."""
        s = (await self.new_session(repository)).id
        u1, a1, u2, _a2 = await self.append(repository, s, "u1", "a1", "u2", "a2")
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id, a1.id}),
            inserts=(Insert.before(u2.id, [synthetic(s, AssistantMessage(text="summary"))]),),
        )
        await self.apply(repository, s, plan)
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            "a1",
            "Σ:summary",
            "u2",
            "a2",
        ]
        assert await self.texts(repository, s, EventFilter.active()) == ["Σ:summary", "u2", "a2"]

    async def test_an_insert_without_an_anchor_is_appended(
        self, repository: SessionRepository
    ) -> None:
        """A group with no anchor goes at the end of the log."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, "u1", "a1")
        await self.apply(
            repository, s, CompactionPlan(inserts=(Insert.at_end([user(s, "added")]),))
        )
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "a1", "added"]
        await self.append(repository, s, "after")
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "a1", "added", "after"]

    async def test_two_inserts_in_one_plan_each_go_before_their_own_anchor(
        self, repository: SessionRepository
    ) -> None:
        """Each group goes before its own anchor; groups on one anchor keep plan order."""
        s = (await self.new_session(repository)).id
        _u1, u2, u3 = await self.append(repository, s, "u1", "u2", "u3")
        plan = CompactionPlan(
            inserts=(
                Insert.before(u2.id, [user(s, "x")]),
                Insert.before(u3.id, [user(s, "y")]),
                Insert.before(u3.id, [user(s, "z")]),
            )
        )
        await self.apply(repository, s, plan)
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            "x",
            "u2",
            "y",
            "z",
            "u3",
        ]

    async def test_inserts_are_anchored_repeatedly_at_one_point(
        self, repository: SessionRepository
    ) -> None:
        """Many compactions inserting before the same anchor keep every insert in order."""
        s = (await self.new_session(repository)).id
        _u1, u2 = await self.append(repository, s, "u1", "u2")
        for i in range(40):
            await self.apply(
                repository, s, CompactionPlan(inserts=(Insert.before(u2.id, [user(s, f"i{i}")]),))
            )
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            *(f"i{i}" for i in range(40)),
            "u2",
        ]

    async def test_repeated_summarization_plans_never_reorder_the_log(
        self, repository: SessionRepository
    ) -> None:
        """Three summarization passes archive in place and insert summaries before kept windows."""
        s = (await self.new_session(repository)).id

        async def add(*items: SessionEvent) -> dict[str, SessionEvent]:
            await repository.append_events(s, list(items))
            return {label(e): e for e in items}

        def u(text: str) -> SessionEvent:
            return user(s, text)

        def a(text: str) -> SessionEvent:
            return assistant(s, text)

        e = await add(u("u1"), system(s, "sys-1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3"))
        sum1 = summary_turn(s, "summary 1")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(e[k].id for k in ("u1", "a1", "u2", "a2")),
                inserts=(Insert.before(e["u3"].id, sum1),),
            ),
        )
        assert await self.texts(repository, s, EventFilter.active()) == [
            "sys-1",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
        ]

        e |= await add(u("u4"), a("a4"), u("u5"), a("a5"), system(s, "sys-2"), u("u6"), a("a6"))
        sum2 = summary_turn(s, "summary 2")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(
                    {
                        *(x.id for x in sum1),
                        *(e[k].id for k in ("u3", "a3", "u4", "a4", "u5", "a5")),
                    }
                ),
                inserts=(Insert.before(e["u6"].id, sum2),),
            ),
        )

        e |= await add(u("u7"), a("a7"), u("u8"), a("a8"), u("u9"), system(s, "sys-3"), a("a9"))
        sum3 = summary_turn(s, "summary 3")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(
                    {
                        *(x.id for x in sum2),
                        *(e[k].id for k in ("u6", "a6", "u7", "a7", "sys-1", "sys-2")),
                    }
                ),
                inserts=(Insert.before(e["u8"].id, sum3),),
            ),
        )
        log = await repository.find_events(s, EventFilter.all())
        assert labels(log) == [
            "u1",
            "sys-1",
            "a1",
            "u2",
            "a2",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
            "u4",
            "a4",
            "u5",
            "a5",
            "sys-2",
            "Σ?",
            "Σ:summary 2",
            "u6",
            "a6",
            "u7",
            "a7",
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert [label(x) for x in log if not x.archived] == [
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
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

    async def test_a_retry_of_an_applied_compaction_reports_it_applied(
        self, repository: SessionRepository
    ) -> None:
        """The same plan at the same expected version, again (its first reply was lost), as
        the object itself or as a copy another process received: ``True``, and nothing changes;
        another plan at that version, even an equal one made by another caller, stays
        ``False``."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        version = await repository.get_event_version(s)
        summary = synthetic(s, AssistantMessage(text="summary"))
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id, a1.id}), inserts=(Insert.before(u2.id, [summary]),)
        )
        assert await repository.apply_compaction(s, plan, version)
        log = await repository.find_events(s, EventFilter.all())
        assert await repository.apply_compaction(s, plan, version)
        assert await repository.find_events(s, EventFilter.all()) == log
        assert await repository.get_event_version(s) == version + 1
        # The plan as a job queue carries it to another process: pickled, with its plan id.
        copy = pickle.loads(pickle.dumps(plan))
        assert copy is not plan
        assert copy.plan_id == plan.plan_id
        assert await repository.apply_compaction(s, copy, version)
        assert await repository.find_events(s, EventFilter.all()) == log
        other = CompactionPlan(archive_ids=frozenset({u2.id}))
        assert not await repository.apply_compaction(s, other, version)
        # An equal plan of another caller (a deterministic strategy) is another call: it lost.
        equal = CompactionPlan(archive_ids=plan.archive_ids, inserts=plan.inserts)
        assert equal == plan
        assert not await repository.apply_compaction(s, equal, version)

    async def test_a_stale_version_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """A plan at an old version returns ``False``; log, flags and version stay."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        version = await repository.get_event_version(s)
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id, a1.id}),
            inserts=(Insert.before(u2.id, [synthetic(s, AssistantMessage(text="summary"))]),),
        )
        assert not await repository.apply_compaction(s, plan, version - 1)
        assert not await repository.apply_compaction(s, plan, version + 1)
        assert await repository.get_event_version(s) == version
        log = await repository.find_events(s, EventFilter.all())
        assert [(x.text, x.archived) for x in log] == [("u1", False), ("a1", False), ("u2", False)]

    async def test_an_unknown_archive_id_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Archiving an id not in the log raises; nothing is archived, the version stays."""
        s = (await self.new_session(repository)).id
        other = (await self.new_session(repository)).id
        (u1,) = await self.append(repository, s, "u1")
        (foreign,) = await self.append(repository, other, "foreign")
        version = await repository.get_event_version(s)
        for unknown in (new_id("e"), foreign.id):
            with pytest.raises(InvalidCompactionPlan):
                await repository.apply_compaction(
                    s, CompactionPlan(archive_ids=frozenset({u1.id, unknown})), version
                )
        assert await repository.get_event_version(s) == version
        assert [x.archived for x in await repository.find_events(s, EventFilter.all())] == [False]
        assert [x.archived for x in await repository.find_events(other, EventFilter.all())] == [
            False
        ]

    async def test_an_unknown_anchor_id_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Inserting before an id not in the log raises; nothing is written, the version stays."""
        s = (await self.new_session(repository)).id
        (u1,) = await self.append(repository, s, "u1")
        version = await repository.get_event_version(s)
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id}), inserts=(Insert.before(new_id("e"), [user(s, "x")]),)
        )
        with pytest.raises(InvalidCompactionPlan):
            await repository.apply_compaction(s, plan, version)
        assert await repository.get_event_version(s) == version
        log = await repository.find_events(s, EventFilter.all())
        assert [(x.text, x.archived) for x in log] == [("u1", False)]

    async def test_apply_compaction_on_an_unknown_session_is_rejected(
        self, repository: SessionRepository
    ) -> None:
        """A plan for a session that does not exist raises, even an empty one."""
        with pytest.raises(SessionNotFound):
            await repository.apply_compaction(new_id(), CompactionPlan(), 0)
