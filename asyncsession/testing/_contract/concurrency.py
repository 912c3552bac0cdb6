"""The contract kit: concurrency.

Many tasks racing on one session: exactly one winner, nothing lost or duplicated.
"""

from __future__ import annotations

import asyncio

from ...events import EventType, Session, SessionEvent
from ...filters import EventFilter
from ...messages import AssistantMessage
from ._support import (
    ContractBase,
    boundary,
    new_id,
    synthetic,
    user,
)

__all__ = ["ConcurrencyContract"]


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
        session = await self.new_session()
        for round_ in range(10):
            version = await self.repo.get_event_version(session.id)
            results = await asyncio.gather(
                *(
                    self.repo.append_events(
                        session.id, [user(session.id, f"r{round_}-w{i}")], version
                    )
                    for i in range(50)
                )
            )
            assert results.count(True) == 1
            assert await self.repo.get_event_version(session.id) == version + 1
        assert len(await self.repo.find_events(session.id, EventFilter.all())) == 10

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
        texts = await self.texts(session.id, EventFilter.all())
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
            snapshot = await self.repo.read_snapshot(s, EventFilter.last_n(3))
            assert snapshot is not None
            question = user(s, f"q{i}")
            if not await self.repo.append_events(s, [question], snapshot.version):
                await self.repo.append_events(s, [question])

        await asyncio.gather(*(turn(i) for i in range(20)))
        assert sorted(await self.texts(s, EventFilter.all())) == sorted(f"q{i}" for i in range(20))
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
                snapshot = await self.repo.read_snapshot(s, EventFilter.active())
                assert snapshot is not None
                active = snapshot.events
                summary = synthetic(s, AssistantMessage(text=f"c{c}"))
                edge = boundary(s, [summary, *active[1:]], active[:1])
                applied += await self.repo.append_events(s, [summary, edge], snapshot.version)
                if last:
                    return applied

        results = await asyncio.gather(appenders(), *(compactor(c) for c in range(4)))
        applied = sum(r for r in results if isinstance(r, int))
        assert applied > 0  # of the compactors' last attempts, after the appends, one wins
        log = await self.repo.find_events(s, EventFilter.all())
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
