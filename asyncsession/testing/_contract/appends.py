"""The contract kit: appends, versions and snapshots.

Order, idempotent replays, event-id conflicts, versioned appends, lossless round trips,
``read_snapshot`` (the turn's one read), and many tasks racing on one session: exactly one
winner, nothing lost or duplicated.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import pytest

from ...events import EventType, Session, SessionEvent, utc_now
from ...exceptions import EventIdConflict, SessionNotFound
from ...filters import EventFilter
from ...messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ...service import DefaultSessionService
from ._support import ContractBase, assistant, boundary, event, labels, new_id, synthetic, user

__all__ = ["AppendsContract", "ConcurrencyContract", "SnapshotsContract"]


class AppendsContract(ContractBase):
    """Contract tests for appends and event versions."""

    async def test_appended_events_are_returned_in_append_order(self) -> None:
        """Events come back in the order they were appended, whatever their timestamps."""
        s = (await self.new_session()).id
        base = utc_now()
        for i, offset in enumerate([5, 1, 4, 2, 3]):
            await self.repo.append_event(
                user(s, f"msg-{i + 1}", timestamp=base - timedelta(seconds=offset))
            )
        assert await self.texts(s) == [f"msg-{i}" for i in range(1, 6)]

    async def test_append_of_the_same_event_id_is_an_idempotent_replay(self) -> None:
        """Appending an id the session has changes nothing, the version included."""
        session = await self.new_session()
        e = user(session.id, "once")
        await self.repo.append_event(e)
        version = await self.repo.get_event_version(session.id)
        await self.repo.append_event(e)
        await self.repo.append_event(e.model_copy(update={"message": UserMessage(text="changed")}))
        assert await self.texts(session.id) == ["once"]
        assert await self.repo.get_event_version(session.id) == version

    async def test_append_with_an_event_id_of_another_session_is_rejected(self) -> None:
        """An event id used by another session raises and is never silently dropped."""
        a = await self.new_session()
        b = await self.new_session()
        e = user(a.id, "in a")
        await self.repo.append_event(e)
        with pytest.raises(EventIdConflict) as info:
            await self.repo.append_event(e.model_copy(update={"session_id": b.id}))
        assert info.value.owner_session_id == a.id
        assert await self.log(b.id) == []
        assert await self.repo.get_event_version(b.id) == 0
        assert await self.texts(a.id) == ["in a"]

    @pytest.mark.parametrize("later", [0, 150], ids=["newest", "long since appended"])
    async def test_an_id_the_service_drew_is_still_refused_in_another_session(
        self, later: int
    ) -> None:
        """An event the service appended with an id of its own drawing (a store may commit such
        an id without checking it), copied into another session, raises, whether it is the
        newest event or ``later`` events have followed it; the other session stays empty."""
        service = DefaultSessionService(self.repo)
        a = await self.new_session()
        b = await self.new_session()
        e = await service.append_message(a.id, UserMessage(text="in a"))
        for i in range(later):
            await service.append_message(a.id, AssistantMessage(text=f"later {i}"))
        version = await self.repo.get_event_version(b.id)
        copy = e.model_copy(update={"session_id": b.id})
        with pytest.raises(EventIdConflict) as info:
            await self.repo.append_event(copy)
        assert info.value.owner_session_id == a.id
        with pytest.raises(EventIdConflict) as info:
            await service.append_events(b.id, [copy])
        assert info.value.owner_session_id == a.id
        assert await self.log(b.id) == []
        assert await self.repo.get_event_version(b.id) == version
        texts = await self.texts(a.id)
        assert texts[:1] == ["in a"]
        assert len(texts) == 1 + later

    async def test_a_conflicting_id_in_a_batch_writes_nothing(self) -> None:
        """A batch with one event id of another session writes none of its events."""
        a = await self.new_session()
        b = await self.new_session()
        taken = user(a.id, "taken")
        await self.repo.append_event(taken)
        batch = [user(b.id, "fresh"), taken.model_copy(update={"session_id": b.id})]
        with pytest.raises(EventIdConflict):
            await self.repo.append_events(b.id, batch)
        assert await self.log(b.id) == []

    async def test_append_to_an_unknown_session_is_rejected(self) -> None:
        """Appending to a session that does not exist raises ``SessionNotFound``."""
        with pytest.raises(SessionNotFound):
            await self.repo.append_event(user(new_id(), "lost"))

    async def test_event_version_starts_at_zero_and_increments_per_new_event(self) -> None:
        """The version is 0 for a new session and moves by one per append."""
        session = await self.new_session()
        assert await self.repo.get_event_version(session.id) == 0
        await self.append(session.id, "one")
        assert await self.repo.get_event_version(session.id) == 1
        await self.append(session.id, "two")
        assert await self.repo.get_event_version(session.id) == 2

    async def test_event_version_of_an_unknown_session_is_zero(self) -> None:
        """An unknown session has version 0."""
        assert await self.repo.get_event_version(new_id()) == 0

    async def test_a_batch_is_one_version_in_order(self) -> None:
        """``append_events`` appends a batch in order and moves the version once."""
        s = (await self.new_session()).id
        batch = [user(s, "u"), assistant(s, "a"), user(s, "u2")]
        assert await self.repo.append_events(s, batch)
        assert await self.texts(s) == ["u", "a", "u2"]
        assert await self.repo.get_event_version(s) == 1

    async def test_a_versioned_append_with_a_stale_version_writes_nothing(self) -> None:
        """A batch whose expected version is stale returns ``False`` and changes nothing."""
        s = (await self.new_session()).id
        await self.append(s, "first")
        assert not await self.repo.append_events(s, [user(s, "late")], 0)
        assert await self.texts(s) == ["first"]
        assert await self.repo.get_event_version(s) == 1
        assert await self.repo.append_events(s, [user(s, "now")], 1)
        assert await self.repo.get_event_version(s) == 2

    async def test_idempotent_replay_through_append_events(self) -> None:
        """A retried batch (versioned or not) whose events are stored is a no-op that succeeds."""
        s = (await self.new_session()).id
        batch = [user(s, "q"), assistant(s, "a")]
        assert await self.repo.append_events(s, batch, 0)
        assert await self.repo.append_events(s, batch, 0)
        assert await self.repo.append_events(s, batch)
        assert await self.texts(s) == ["q", "a"]
        assert await self.repo.get_event_version(s) == 1

    async def test_a_partly_replayed_batch_appends_only_the_new_events(self) -> None:
        """Events of a batch that are stored already are skipped; the rest are appended."""
        s = (await self.new_session()).id
        q = user(s, "q")
        await self.repo.append_event(q)
        assert await self.repo.append_events(s, [q, assistant(s, "a")], 1)
        assert await self.texts(s) == ["q", "a"]
        assert await self.repo.get_event_version(s) == 2

    async def test_messages_round_trip_losslessly(self) -> None:
        """Every message shape, metadata and timestamps come back exactly as appended."""
        s = (await self.new_session()).id
        stamp = datetime(2026, 6, 1, 12, 30, 15, 250000, tzinfo=UTC)
        events = [
            event(s, SystemMessage(text="be brief", role="developer"), timestamp=stamp),
            event(
                s,
                UserMessage(
                    text="look",
                    parts=(
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ),
                    extra={"name": "alice"},
                ),
                metadata={"client": {"ip": "127.0.0.1"}, "n": 1.5},
            ),
            event(
                s,
                AssistantMessage(
                    tool_calls=(
                        ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}'),
                        ToolCall(id="call_2", name="time", arguments="{}"),
                    )
                ),
            ),
            event(
                s,
                ToolResponseMessage(
                    responses=(
                        ToolResponse(id="call_1", name="weather", data="sunny"),
                        ToolResponse(id="call_2", name="time", data="noon"),
                    )
                ),
            ),
            event(s, AssistantMessage(text="Sunny at noon.", extra={"refusal": None})),
            SessionEvent(
                session_id=s, type=EventType.of("ACME.AUDIT"), payload={"a": [1, {"b": True}]}
            ),
        ]
        assert await self.repo.append_events(s, events)
        assert await self.log(s) == events

    async def test_custom_event_type_with_the_longest_name_round_trips(self) -> None:
        """An event of a custom type whose name has 64 characters comes back with its payload."""
        name = "ACME." + "X" * 59
        assert len(name) == 64
        s = (await self.new_session()).id
        e = SessionEvent(session_id=s, type=EventType.of(name), payload={"action": "exported"})
        await self.repo.append_event(e)
        stored = await self.log(s)
        assert stored == [e]
        assert stored[0].type == EventType.of(name)
        assert not stored[0].is_message

    async def test_a_read_by_event_type_returns_the_events_of_that_type(self) -> None:
        """``event_types`` selects events of those types, message types included."""
        audit, other = EventType.of("ACME.AUDIT"), EventType.of("ACME.OTHER")
        s = (await self.new_session()).id
        await self.append(s, "hello")
        for i in range(3):
            await self.repo.append_event(SessionEvent(session_id=s, type=audit, payload={"i": i}))
            await self.repo.append_event(SessionEvent(session_id=s, type=other, payload={}))
        found = await self.repo.find_events(s, EventFilter(event_types=[audit]))
        assert [e.payload for e in found] == [{"i": 0}, {"i": 1}, {"i": 2}]
        newest = await self.repo.find_events(s, EventFilter(event_types=[audit], last_n=1))
        assert [e.payload for e in newest] == [{"i": 2}]
        users = await self.repo.find_events(s, EventFilter(event_types=[EventType.USER]))
        assert labels(users) == ["hello"]


class SnapshotsContract(ContractBase):
    """Contract tests for ``read_snapshot``."""

    async def test_a_snapshot_reads_the_session_its_version_and_events(self) -> None:
        """``read_snapshot`` returns session, version and window; ``None`` if unknown."""
        session = await self.new_session()
        await self.append(session.id, "a", "b", "c")
        snapshot = await self.snapshot(session.id, EventFilter.last_n(2))
        assert snapshot.session == session
        assert snapshot.version == 3
        assert labels(snapshot.events) == ["b", "c"]
        assert snapshot.lease is None
        assert await self.repo.read_snapshot(new_id(), EventFilter.all()) is None

    async def test_a_snapshot_of_a_new_session_has_version_zero_and_no_events(self) -> None:
        """A session without commits reads back empty at version 0."""
        session = await self.new_session()
        snapshot = await self.snapshot(session.id, EventFilter.active())
        assert (snapshot.session, snapshot.version, snapshot.events) == (session, 0, ())

    async def test_the_snapshot_version_guards_the_next_append(self) -> None:
        """An append at the snapshot's version wins until someone else appends; then it is
        refused and a fresh snapshot sees the other writer's events."""
        s = (await self.new_session()).id
        await self.append(s, "a")
        first = await self.snapshot(s, EventFilter.last_n(10))
        assert await self.repo.append_events(s, [user(s, "b")], first.version)
        assert not await self.repo.append_events(s, [user(s, "late")], first.version)
        second = await self.snapshot(s, EventFilter.last_n(10))
        assert second.version == first.version + 1
        assert labels(second.events) == ["a", "b"]


class ConcurrencyContract(ContractBase):
    """Contract tests that race many concurrent tasks on one store."""

    async def test_concurrent_save_if_absent_of_the_same_id_has_exactly_one_winner(self) -> None:
        """Of many concurrent creators of one id, exactly one inserts."""
        session_id = new_id()
        results = await asyncio.gather(
            *(self.repo.save_if_absent(Session(id=session_id, user_id=f"u{i}")) for i in range(32))
        )
        assert results.count(True) == 1
        stored = await self.repo.find_by_id(session_id)
        assert stored is not None
        assert stored.user_id == f"u{results.index(True)}"

    async def test_versioned_append_has_exactly_one_concurrent_winner(self) -> None:
        """Of 50 concurrent writers with one expected version, exactly one appends, each round."""
        s = (await self.new_session()).id
        for round_ in range(10):
            version = await self.repo.get_event_version(s)
            results = await asyncio.gather(
                *(
                    self.repo.append_events(s, [user(s, f"r{round_}-w{i}")], version)
                    for i in range(50)
                )
            )
            assert results.count(True) == 1
            assert await self.repo.get_event_version(s) == version + 1
        assert len(await self.log(s)) == 10

    async def test_the_claim_loop_gives_exactly_one_holder(self) -> None:
        """The seed's "state as the newest event" claim loop: of N claimers, exactly one holds."""
        claim = EventType.of("TEST.CLAIM")
        session = await self.new_session()
        newest_claim = EventFilter(event_types=[claim], last_n=1)

        async def try_claim(me: str) -> bool:
            for _ in range(100):
                version = await self.repo.get_event_version(session.id)
                current = await self.repo.find_events(session.id, newest_claim)
                if current and current[-1].payload != {"owner": None}:
                    return False
                e = SessionEvent(session_id=session.id, type=claim, payload={"owner": me})
                if await self.repo.append_events(session.id, [e], version):
                    return True
            raise AssertionError("the log kept changing")

        async def noise() -> None:
            for i in range(20):
                await self.repo.append_event(user(session.id, f"noise-{i}"))
                await asyncio.sleep(0)

        results = await asyncio.gather(*(try_claim(f"c{i}") for i in range(24)), noise())
        winners = [r for r in results[:-1] if r]
        assert len(winners) == 1
        claims = await self.repo.find_events(session.id, EventFilter(event_types=[claim]))
        assert len(claims) == 1

    async def test_many_concurrent_appenders_lose_and_duplicate_nothing(self) -> None:
        """32 tasks appending 20 events each: all 640 stored once, each task's in its order."""
        session = await self.new_session()

        async def writer(w: int) -> None:
            for i in range(20):
                await self.repo.append_event(user(session.id, f"w{w}-{i}"))

        await asyncio.gather(*(writer(w) for w in range(32)))
        texts = await self.texts(session.id)
        assert len(texts) == len(set(texts)) == 640
        for w in range(32):
            mine = [t for t in texts if t.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(20)]
        assert await self.repo.get_event_version(session.id) == 640

    async def test_concurrent_first_turns_create_one_session_and_lose_nothing(self) -> None:
        """Twenty first turns racing on one new session id (create if absent, read, append at
        the version read, else append plainly): one session, every message once."""
        s = new_id()

        async def turn(i: int) -> None:
            await self.repo.save_if_absent(Session(id=s, user_id="alice"))
            snapshot = await self.snapshot(s, EventFilter.last_n(3))
            question = user(s, f"q{i}")
            if not await self.repo.append_events(s, [question], snapshot.version):
                await self.repo.append_events(s, [question])

        await asyncio.gather(*(turn(i) for i in range(20)))
        assert sorted(await self.texts(s)) == sorted(f"q{i}" for i in range(20))
        assert await self.repo.get_event_version(s) == 20

    async def test_compaction_and_appends_racing_lose_nothing(self) -> None:
        """Racing compactions and appends: every append lands; each compaction applies whole or
        not at all."""
        s = (await self.new_session()).id
        await self.append(s, *(f"seed-{i}" for i in range(10)))

        appended = asyncio.Event()

        async def appender(w: int) -> None:
            for i in range(15):
                await self.repo.append_event(user(s, f"w{w}-{i}"))
                await asyncio.sleep(0)  # interleave even with a store that never awaits

        async def appenders() -> None:
            await asyncio.gather(*(appender(w) for w in range(4)))
            appended.set()

        async def compactor(c: int) -> int:
            """Compact while the appends go on, then once more after them."""
            applied = 0
            while True:
                await asyncio.sleep(0)
                last = appended.is_set()
                snapshot = await self.snapshot(s, EventFilter.active())
                active = snapshot.events
                summary = synthetic(s, AssistantMessage(text=f"c{c}"))
                edge = boundary(s, [summary, *active[1:]], active[:1])
                applied += await self.repo.append_events(s, [summary, edge], snapshot.version)
                if last:
                    return applied

        results = await asyncio.gather(appenders(), *(compactor(c) for c in range(4)))
        applied = sum(r for r in results if isinstance(r, int))
        assert applied > 0  # of the compactors' last attempts, after the appends, one wins
        log = await self.log(s)
        real = [x.text for x in log if not x.is_synthetic]
        assert real[:10] == [f"seed-{i}" for i in range(10)]
        for w in range(4):
            assert [t for t in real if t and t.startswith(f"w{w}-")] == [
                f"w{w}-{i}" for i in range(15)
            ]
        assert len([x for x in log if x.is_synthetic]) == applied
        assert len([x for x in log if x.type == EventType.COMPACTION]) == applied
        assert await self.repo.get_event_version(s) == 10 + 60 + applied
        # Each compaction replaced the first event of the view it read with its summary.
        active = await self.repo.find_events(s, EventFilter.active())
        assert len(active) == 70
        assert active[0].is_synthetic
