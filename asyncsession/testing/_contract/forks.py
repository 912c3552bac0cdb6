"""The contract kit: forks, rewinds and reads as of a version.

A fork reads its parent's log up to a point as its own, without copies; a rewind is one
``REWIND`` boundary that makes the view the one the log had at a point; ``as_of`` reads what a
read returned when the session was at that version. Each behaviour here is checked on a store
whatever its layout, and the concurrency claims with many tasks racing.
"""

from __future__ import annotations

import asyncio
import random
from datetime import timedelta

import pytest

from ...events import EventType, Session, SessionEvent, utc_now
from ...exceptions import SessionExists, SessionNotFound, UsageError
from ...filters import EventFilter
from ...messages import ToolResponse, ToolResponseMessage
from ...repository import Lease
from ...rewinds import LogPoint, RewindRecord
from ._support import ContractBase, assistant, labels, new_id, user

__all__ = ["ForkContract"]

_READS = (
    EventFilter.all(),
    EventFilter.active(),
    EventFilter.last_n(3),
    EventFilter(last_n=2, active_view=True),
    EventFilter(exclude_archived=True),
    EventFilter.keyword_search("k1"),
)
"""The reads a history checks at every version."""


def _child(parent: Session, **values: object) -> Session:
    return Session(id=new_id("fork"), user_id=parent.user_id, **values)  # type: ignore[arg-type]


class ForkContract(ContractBase):
    """Contract tests of forks, rewinds and ``as_of`` reads."""

    async def rewind(
        self, session_id: str, *, at: int | str | None = None, before: str | None = None
    ) -> RewindRecord:
        """Rewind at the session's version to the point named; require it to succeed."""
        located = await self.repo.locate(session_id, at=at, before=before)
        assert located is not None
        point, version = located
        event = RewindRecord(to=point, from_version=version).to_event(session_id)
        assert await self.repo.append_events(session_id, [event], version)
        return RewindRecord.from_event(event)

    # --- forks ---------------------------------------------------------------------------------

    async def test_a_fork_reads_the_prefix_as_its_own_and_continues_the_numbering(self) -> None:
        parent = await self.new_session()
        p = parent.id
        await self.append(p, "a", "b", "c")
        child = await self.repo.fork(p, _child(parent, metadata={"k": "v"}), at=2)
        assert child.forked_from is not None
        assert (child.forked_from.session_id, child.forked_from.version) == (p, 2)
        assert child.forked_from.event_id is None
        assert await self.repo.get_event_version(child.id) == 2
        read = await self.log(child.id)
        assert labels(read) == ["a", "b"]
        assert {e.session_id for e in read} == {child.id}
        stored = await self.repo.find_by_id(child.id)
        assert stored is not None
        assert stored.forked_from == child.forked_from
        assert stored.metadata == {"k": "v"}
        assert await self.repo.append_events(child.id, [user(child.id, "x")], 2)
        assert not await self.repo.append_events(child.id, [user(child.id, "y")], 2)
        await self.append(p, "d")
        assert await self.texts(child.id) == ["a", "b", "x"]
        assert await self.texts(p) == ["a", "b", "c", "d"]
        assert await self.repo.get_event_version(child.id) == 3
        assert await self.repo.get_event_version(p) == 4
        snapshot = await self.snapshot(child.id, EventFilter.last_n(2))
        assert snapshot.version == 3
        assert labels(snapshot.events) == ["b", "x"]
        assert [s.id for s in await self.repo.find_forks(p)] == [child.id]

    async def test_a_fork_at_an_event_or_before_one_cuts_inside_its_commit(self) -> None:
        parent = await self.new_session()
        p = parent.id
        first = [user(p, "q1"), assistant(p, "r1")]
        second = [user(p, "q2"), assistant(p, "r2"), user(p, "q3")]
        assert await self.repo.append_events(p, first)
        assert await self.repo.append_events(p, second)
        after = await self.repo.fork(p, _child(parent), at=second[0].id)
        assert after.forked_from is not None
        assert (after.forked_from.version, after.forked_from.event_id) == (2, second[0].id)
        assert await self.texts(after.id) == ["q1", "r1", "q2"]
        before = await self.repo.fork(p, _child(parent), before=second[0].id)
        assert before.forked_from is not None
        assert (before.forked_from.version, before.forked_from.event_id) == (1, None)
        assert await self.texts(before.id) == ["q1", "r1"]
        whole = await self.repo.fork(p, _child(parent), at=second[-1].id)
        assert whole.forked_from is not None
        assert (whole.forked_from.version, whole.forked_from.event_id) == (2, None)
        start = await self.repo.fork(p, _child(parent), before=first[0].id)
        assert await self.log(start.id) == []
        assert await self.repo.get_event_version(start.id) == 0
        # appending a prefix event's id to the fork is a replay; its own continue after it
        assert await self.repo.append_events(
            after.id, [first[0].model_copy(update={"session_id": after.id})]
        )
        assert await self.repo.get_event_version(after.id) == 2
        assert await self.repo.append_events(after.id, [user(after.id, "q2b")], 2)
        assert await self.texts(after.id, EventFilter.last_n(2)) == ["q2", "q2b"]

    async def test_forks_of_forks_and_their_windows(self) -> None:
        parent = await self.new_session()
        p = parent.id
        await self.append(p, *(f"p{i}" for i in range(6)))
        one = await self.repo.fork(p, _child(parent), at=4)
        await self.append(one.id, "o1", "o2")
        two = await self.repo.fork(one.id, _child(parent), at=5)
        await self.append(two.id, "t1")
        assert await self.texts(two.id) == ["p0", "p1", "p2", "p3", "o1", "t1"]
        assert await self.texts(two.id, EventFilter.last_n(3)) == ["p3", "o1", "t1"]
        assert await self.repo.get_event_version(two.id) == 6
        three = await self.repo.fork(two.id, _child(parent), at=2)
        assert await self.texts(three.id) == ["p0", "p1"]
        assert [s.id for s in await self.repo.find_forks(one.id)] == [two.id]

    async def test_fork_refuses_what_it_cannot_make(self) -> None:
        parent = await self.new_session()
        p = parent.id
        await self.append(p, "a", "b")
        with pytest.raises(SessionNotFound):
            await self.repo.fork(new_id(), _child(parent))
        for at, before in ((3, None), ("no-such-event", None), (None, "no-such-event"), (1, "x")):
            with pytest.raises(UsageError):
                await self.repo.fork(p, _child(parent), at=at, before=before)
        with pytest.raises(UsageError):
            await self.repo.fork(p, Session(id=new_id(), user_id="mallory"))
        other = await self.new_session()
        with pytest.raises(SessionExists):
            await self.repo.fork(p, Session(id=other.id, user_id=parent.user_id))
        child = _child(parent)
        made = await self.repo.fork(p, child, at=1)
        again = await self.repo.fork(p, child, at=1)  # a retry after a lost reply
        assert (again.id, again.forked_from) == (made.id, made.forked_from)
        with pytest.raises(SessionExists):
            await self.repo.fork(p, child, at=2)
        assert len(await self.repo.find_forks(p)) == 1

    async def test_deleting_a_parent_loses_nothing_a_fork_reads(self) -> None:
        parent = await self.new_session()
        p = parent.id
        await self.append(p, "a", "b", "c", "d")
        child = await self.repo.fork(p, _child(parent), at=2)
        grandchild = await self.repo.fork(child.id, _child(parent), at=2)
        await self.repo.delete(p)
        assert await self.repo.find_by_id(p) is None
        assert await self.log(p) == []
        assert p not in {s.id for s in await self.repo.find_by_user_id(parent.user_id)}
        assert not await self.repo.save_if_absent(Session(id=p, user_id=parent.user_id))
        assert await self.texts(child.id) == ["a", "b"]
        await self.repo.delete(child.id)
        assert await self.texts(grandchild.id) == ["a", "b"]
        assert await self.repo.append_events(grandchild.id, [user(grandchild.id, "g")], 2)
        assert await self.texts(grandchild.id, EventFilter.last_n(5)) == ["a", "b", "g"]
        await self.repo.delete(grandchild.id)
        assert await self.repo.save_if_absent(Session(id=p, user_id=parent.user_id))
        assert await self.log(p) == []

    async def test_an_expired_parent_is_swept_and_its_forks_keep_reading(self) -> None:
        now = utc_now()
        parent = await self.new_session(expires_at=now + timedelta(seconds=1))
        p = parent.id
        await self.append(p, "a", "b")
        child = await self.repo.fork(p, _child(parent), at=1)
        later = now + timedelta(hours=1)
        assert await self.repo.delete_expired_sessions(later) >= 1
        assert await self.repo.find_by_id(p) is None
        assert await self.texts(child.id) == ["a"]
        assert await self.repo.find_by_id(child.id) is not None
        # a second sweep finds nothing more of it
        assert await self.repo.find_by_id(p) is None
        await self.repo.delete_expired_sessions(later)
        assert await self.texts(child.id) == ["a"]

    async def test_a_fresh_fork_takes_its_lease_on_the_version_it_starts_at(self) -> None:
        parent = await self.new_session()
        await self.append(parent.id, "a", "b")
        child = await self.repo.fork(parent.id, _child(parent))
        held = Lease(holder="turn", expires_at=utc_now() + timedelta(seconds=30))
        assert await self.repo.acquire_lease(child.id, 2, held)
        assert not await self.repo.acquire_lease(
            child.id, 2, Lease(holder="other", expires_at=held.expires_at)
        )
        snapshot = await self.snapshot(child.id, EventFilter.last_n(1))
        assert snapshot.lease == held
        parent_snapshot = await self.snapshot(parent.id, EventFilter.last_n(1))
        assert parent_snapshot.lease is None
        await self.repo.release_lease(child.id, 2, "turn")
        snapshot = await self.snapshot(child.id, EventFilter.last_n(1))
        assert snapshot.lease is None

    async def test_a_fork_reads_its_parents_offloaded_bodies_after_the_parent_is_gone(self) -> None:
        parent = await self.new_session()
        p = parent.id
        big = "x" * 300_000
        output = SessionEvent(
            session_id=p,
            message=ToolResponseMessage(responses=(ToolResponse(id="c1", name="t", data=big),)),
        )
        assert await self.repo.append_events(p, [user(p, "run"), output])
        child = await self.repo.fork(p, _child(parent))
        await self.repo.delete(p)
        whole = await self.repo.read_body(child.id, output.id)
        assert whole is not None
        assert whole.session_id == child.id
        assert isinstance(whole.message, ToolResponseMessage)
        assert whole.message.responses[0].data == big
        assert await self.repo.read_body(child.id, "no-such-event") is None

    # --- rewinds -------------------------------------------------------------------------------

    async def test_a_rewind_hides_what_came_after_its_point_and_an_undo_brings_it_back(
        self,
    ) -> None:
        s = (await self.new_session(metadata={"keep": "me"})).id
        q1, r1, q2, r2 = user(s, "q1"), assistant(s, "r1"), user(s, "q2 k1"), assistant(s, "r2")
        assert await self.repo.append_events(s, [q1, r1])
        assert await self.repo.append_events(s, [q2, r2])
        record = await self.rewind(s, before=q2.id)
        assert (record.to, record.from_version) == (LogPoint(version=1), 2)
        assert await self.repo.get_event_version(s) == 3
        assert await self.texts(s, EventFilter.active()) == ["q1", "r1"]
        assert await self.texts(s, EventFilter(last_n=10, active_view=True)) == ["q1", "r1"]
        every = await self.log(s)
        assert [(e.text, e.archived) for e in every if e.is_message] == [
            ("q1", False),
            ("r1", False),
            ("q2 k1", True),
            ("r2", True),
        ]
        assert (every[-1].type, every[-1].archived) == (EventType.REWIND, False)
        found = await self.repo.find_events(s, EventFilter.keyword_search("k1"))
        assert [(e.id, e.archived) for e in found] == [(q2.id, True)]
        edited = user(s, "q2 edited")
        assert await self.repo.append_events(s, [edited, assistant(s, "r2'")], 3)
        assert await self.texts(s, EventFilter.active()) == ["q1", "r1", "q2 edited", "r2'"]
        undo = await self.rewind(s, at=record.from_version)
        assert undo.to == LogPoint(version=2)
        assert await self.texts(s, EventFilter.active()) == ["q1", "r1", "q2 k1", "r2"]
        stored = await self.repo.find_by_id(s)
        assert stored is not None
        assert stored.metadata == {"keep": "me"}
        start = await self.rewind(s, at=0)
        assert start.to == LogPoint(version=0)
        assert await self.repo.find_events(s, EventFilter.active()) == []

    async def test_rewinds_and_compactions_compose(self) -> None:
        s = (await self.new_session()).id
        a, b, _ = await self.append(s, "a", "b", "c")
        await self.compact(s, drop=[a])  # version 4: the view is b, c
        _, e = await self.append(s, "d", "e")  # versions 5, 6
        await self.rewind(s, at=5)  # the view at 5: b, c, d
        assert await self.texts(s, EventFilter.active()) == ["b", "c", "d"]
        await self.compact(s, drop=[b])  # the view is c, d
        assert await self.texts(s, EventFilter.active()) == ["c", "d"]
        await self.rewind(s, at=3)  # before the first compaction: a, b, c
        assert await self.texts(s, EventFilter.active()) == ["a", "b", "c"]
        archived = {x.text for x in await self.log(s) if x.archived}
        assert archived == {"d", "e"}
        assert e.id not in {
            x.id for x in await self.repo.find_events(s, EventFilter.last_n(9)) if not x.archived
        }

    async def test_a_rewind_to_the_middle_of_a_commit_keeps_its_first_events(self) -> None:
        s = (await self.new_session()).id
        turn = [user(s, "q"), assistant(s, "r1"), assistant(s, "r2")]
        assert await self.repo.append_events(s, turn)
        await self.rewind(s, at=turn[1].id)
        assert await self.texts(s, EventFilter.active()) == ["q", "r1"]

    # --- as_of -----------------------------------------------------------------------------------

    async def test_reads_as_of_a_version_return_what_the_reads_returned_then(self) -> None:
        """A random history of appends, compactions, rewinds and forks: every read, as of
        every version, equals the same read made when the session was at that version."""
        rng = random.Random(43)
        parent = await self.new_session()
        s = parent.id
        seen: dict[int, list[list[SessionEvent]]] = {}
        appended: list[SessionEvent] = []

        async def note() -> None:
            version = await self.repo.get_event_version(s)
            seen[version] = [await self.repo.find_events(s, f) for f in _READS]

        await note()
        for step in range(40):
            version = await self.repo.get_event_version(s)
            roll = rng.random()
            if roll < 0.15 and version > 1:
                await self.rewind(s, at=rng.randrange(0, version))
            elif roll < 0.25 and appended:
                active = await self.repo.find_events(s, EventFilter.active())
                if active:
                    await self.compact(s, drop=active[: rng.randrange(len(active))])
            elif roll < 0.32 and appended:
                await self.rewind(s, before=rng.choice(appended).id)
            else:
                batch = [
                    (user if rng.random() < 0.5 else assistant)(
                        s, f"m{step}.{i} k{rng.randrange(3)}"
                    )
                    for i in range(rng.randrange(1, 4))
                ]
                assert await self.repo.append_events(s, batch, version)
                appended += batch
            await note()
        for version, reads in seen.items():
            for f, then in zip(_READS, reads, strict=True):
                asked = f.merge(EventFilter(as_of=version))
                assert await self.repo.find_events(s, asked) == then, (version, f)
            snapshot = await self.snapshot(s, EventFilter(last_n=3, as_of=version))
            assert snapshot.version == version
            assert list(snapshot.events) == reads[2]
        # a fork reads as of its versions what its parent did then, under its own id
        top = max(seen)
        child = await self.repo.fork(s, _child(parent), at=top // 2)
        for version in range(top // 2 + 1):
            then = seen[version][1]
            asked = EventFilter(active_view=True, as_of=version)
            mine = await self.repo.find_events(child.id, asked)
            assert [(e.id, e.archived) for e in mine] == [(e.id, e.archived) for e in then]

    # --- concurrency -----------------------------------------------------------------------------

    async def _try_fork(self, parent: Session) -> Session | None:
        try:
            return await self.repo.fork(parent.id, _child(parent))
        except SessionNotFound:
            return None

    async def test_forks_taken_while_the_parent_grows_see_exactly_their_prefix(self) -> None:
        """40 forks at the parent's version now, taken while 40 writers append to it: each
        reads exactly the parent's log up to the version it reports."""
        parent = await self.new_session()
        p = parent.id

        async def write(i: int) -> None:
            await self.repo.append_events(p, [user(p, f"w{i}"), assistant(p, f"w{i}'")])

        async def take() -> Session:
            return await self.repo.fork(p, _child(parent))

        results = await asyncio.gather(*(write(i) for i in range(40)), *(take() for _ in range(40)))
        forks = [r for r in results if isinstance(r, Session)]
        log = await self.log(p)
        assert len(log) == 80
        for child in forks:
            assert child.forked_from is not None
            version = child.forked_from.version
            mine = await self.log(child.id)
            assert [e.id for e in mine] == [e.id for e in log[: 2 * version]]
            assert await self.repo.get_event_version(child.id) == version

    async def test_concurrent_rewinds_and_appends_keep_one_log(self) -> None:
        """30 writers and 30 rewinders at the version each read: every commit lands whole at
        its own version, and the view is what the newest boundary says."""
        s = (await self.new_session()).id
        await self.append(s, "base")

        async def write(i: int) -> bool:
            version = await self.repo.get_event_version(s)
            return await self.repo.append_events(s, [user(s, f"w{i}")], version)

        async def rewind() -> bool:
            located = await self.repo.locate(s, at=1)
            assert located is not None
            point, version = located
            event = RewindRecord(to=point, from_version=version).to_event(s)
            return await self.repo.append_events(s, [event], version)

        wins = await asyncio.gather(*(write(i) for i in range(30)), *(rewind() for _ in range(30)))
        version = await self.repo.get_event_version(s)
        assert version == 1 + sum(wins)
        log = await self.log(s)
        assert len(log) == version
        newest_rewind = max(
            (i for i, e in enumerate(log) if e.type == EventType.REWIND), default=None
        )
        active = await self.repo.find_events(s, EventFilter.active())
        if newest_rewind is None:
            assert len(active) == len(log)
        else:
            after = [e.id for e in log[newest_rewind + 1 :]]
            assert [e.id for e in active] == [log[0].id, *after]

    async def test_a_fork_racing_the_parents_delete_is_made_whole_or_not_at_all(self) -> None:
        """Forks racing a delete of their parent: each either fails with `SessionNotFound` or
        reads its whole prefix for good."""
        for _ in range(5):
            parent = await self.new_session()
            p = parent.id
            await self.append(p, "a", "b")

            results = await asyncio.gather(
                *(self._try_fork(parent) for _ in range(10)),
                self.repo.delete(p),
                *(self._try_fork(parent) for _ in range(10)),
            )
            for child in results:
                if isinstance(child, Session):
                    assert child.forked_from is not None
                    expected = ["a", "b"][: child.forked_from.version]
                    assert await self.texts(child.id) == (expected)
