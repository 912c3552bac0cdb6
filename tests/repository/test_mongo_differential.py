"""Random histories give the same reads on the MongoDB store as on the in-memory reference.

Each run applies one random sequence of appends, batches, custom events, replays and compactions
(archives, inserts before random anchors, appended groups) to both stores, and compares a wide set
of reads after every step. The ``tight`` variant shrinks the position gaps and the tail so that
fractional positions, roll-forward and pending compactions happen all the time.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from mongomock_motor import AsyncMongoMockClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import (
    AssistantMessage,
    CompactionPlan,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    Insert,
    MatchMode,
    Session,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC, utc_now
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._rollforward import RollForward

AUDIT = EventType.of("ACME.AUDIT")
WORDS = ["alpha", "Beta", "gamma.x", "50%", "a_b", "(x)", "Ünï", "tool"]


class Flaky:
    """A collection whose writes fail now and then while housekeeping runs.

    A failure comes before the write or after it (the write happened, its reply was lost), as a
    crash or a network cut would leave it.
    """

    armed = False

    def __init__(self, inner: Any, rng: random.Random) -> None:
        self._inner = inner
        self._rng = rng

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def _write(self, name: str, *args: Any, **kwargs: Any) -> Any:
        method = getattr(self._inner, name)
        if not Flaky.armed or self._rng.random() > 0.3:
            return await method(*args, **kwargs)
        if self._rng.random() < 0.5:
            raise AutoReconnect("injected: lost before the write")
        await method(*args, **kwargs)
        raise AutoReconnect("injected: lost after the write")

    async def update_one(self, *args: Any, **kwargs: Any) -> Any:
        return await self._write("update_one", *args, **kwargs)

    async def update_many(self, *args: Any, **kwargs: Any) -> Any:
        return await self._write("update_many", *args, **kwargs)

    async def insert_many(self, *args: Any, **kwargs: Any) -> Any:
        return await self._write("insert_many", *args, **kwargs)


def make_crashy(repo: MongoSessionRepository, seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Let writes of roll-forwards fail at random; commits themselves never do."""
    rng = random.Random(seed)
    store = repo._store
    store.sessions = Flaky(store.sessions, rng)
    store.events = Flaky(store.events, rng)
    original = RollForward.housekeep

    async def housekeep(self: Any, *args: Any, **kwargs: Any) -> None:
        Flaky.armed = True
        try:
            await original(self, *args, **kwargs)
        finally:
            Flaky.armed = False

    monkeypatch.setattr(RollForward, "housekeep", housekeep)
    monkeypatch.setattr(logging.getLogger("asyncsession.mongo"), "disabled", True)


@pytest.fixture(params=["roomy", "tight", "crashy"])
def layout(request: pytest.FixtureRequest, tighten: Callable[[], None]) -> str:
    """Production positions and tail sizes, or tiny ones that force every fallback (and, for
    ``crashy``, roll-forwards that stop half-way)."""
    if request.param in ("tight", "crashy"):
        tighten()
    return str(request.param)


class History:
    """A random workload for one session, with an independent random source."""

    def __init__(self, seed: int, session_id: str) -> None:
        self.rng = random.Random(seed)
        self.session_id = session_id
        self.clock = utc_now()
        self.count = 0

    def stamp(self) -> Any:
        self.clock += timedelta(milliseconds=self.rng.choice([0, 1, 7, 1000]))
        return self.clock

    def text(self) -> str:
        self.count += 1
        words = self.rng.sample(WORDS, self.rng.randint(0, 3))
        return " ".join([f"m{self.count}", *words])

    def event(self) -> SessionEvent:
        s, kind = self.session_id, self.rng.random()
        stamp = self.stamp()
        if kind < 0.35:
            message = UserMessage(text=self.text())
            return SessionEvent(session_id=s, message=message, timestamp=stamp)
        if kind < 0.6:
            return SessionEvent(
                session_id=s, message=AssistantMessage(text=self.text()), timestamp=stamp
            )
        if kind < 0.7:
            call = ToolCall(id=f"c{self.count}", name="t")
            return SessionEvent(
                session_id=s, message=AssistantMessage(tool_calls=(call,)), timestamp=stamp
            )
        if kind < 0.8:
            response = ToolResponse(id=f"c{self.count}", name="t", data="tool output")
            return SessionEvent(
                session_id=s,
                message=ToolResponseMessage(responses=(response,)),
                timestamp=stamp,
            )
        if kind < 0.9:
            return SessionEvent(
                session_id=s, type=AUDIT, payload={"n": self.count, "$k.": True}, timestamp=stamp
            )
        return SessionEvent(
            session_id=s,
            message=AssistantMessage(text=f"summary {self.text()}"),
            metadata={SYNTHETIC: True, COMPACTION_SOURCE: "test"},
            timestamp=stamp,
        )

    def plan(self, log: list[SessionEvent]) -> CompactionPlan:
        rng = self.rng
        messages = [e for e in log if e.is_message and not e.archived]
        chosen = rng.sample(messages, min(len(messages), rng.randint(0, 4)))
        archive = frozenset(e.id for e in chosen)
        inserts: list[Insert] = []
        for _ in range(rng.randint(0, 3)):
            group = [self.event() for _ in range(rng.randint(1, 3))]
            if log and rng.random() < 0.85:
                anchor = rng.choice(log[-12:] if rng.random() < 0.5 else log)
                inserts.append(Insert.before(anchor.id, group))
            else:
                inserts.append(Insert.at_end(group))
        return CompactionPlan(archive_ids=archive, inserts=tuple(inserts))

    def filters(self, log: list[SessionEvent]) -> list[EventFilter]:
        rng = self.rng
        found = [
            EventFilter.all(),
            EventFilter.active(),
            EventFilter.real_only(),
            EventFilter(exclude_archived=True),
            EventFilter(event_types=[AUDIT]),
            EventFilter.active().merge(EventFilter(event_types=[AUDIT, EventType.USER])),
            EventFilter(message_types=["assistant", "tool"]),
            EventFilter.keyword_search(rng.choice(WORDS).lower(), page=rng.randint(0, 2)),
            EventFilter.keywords_search(rng.sample(WORDS, 2), MatchMode.ALL),
            EventFilter.keywords_search(rng.sample(WORDS, 2), MatchMode.ANY, page_size=3),
            EventFilter.pattern_search(re.compile(r"m\d*7\b"), page_size=1000),
            EventFilter(page=rng.randint(0, 6), page_size=rng.randint(1, 7)),
            EventFilter(page=rng.randint(0, 3), page_size=5, exclude_archived=True),
        ]
        for n in (1, 2, rng.randint(3, 12), rng.randint(13, 80)):
            found += [
                EventFilter.last_n(n),
                EventFilter.active().merge(EventFilter.last_n(n)),
                EventFilter(exclude_archived=True, exclude_synthetic=True, last_n=n),
                EventFilter(event_types=[AUDIT], last_n=n),
                EventFilter(keyword="m", last_n=n),
                EventFilter(message_types=["user", "assistant"], last_n=n),
            ]
        if log:
            stamps = [e.timestamp for e in log]
            a, b = sorted(rng.sample(stamps, 2) if len(stamps) > 1 else stamps * 2)
            found += [EventFilter(from_=a, to=b), EventFilter(from_=a, last_n=rng.randint(1, 9))]
        return found


async def compare(
    mongo: MongoSessionRepository, memory: InMemorySessionRepository, history: History
) -> None:
    s = history.session_id
    log = await memory.find_events(s, EventFilter.all())
    assert await mongo.find_events(s, EventFilter.all()) == log
    assert await mongo.get_event_version(s) == await memory.get_event_version(s)
    filters = history.filters(log)
    for f in history.rng.sample(filters, 14):
        assert await mongo.find_events(s, f) == await memory.find_events(s, f), f
    f = history.rng.choice(history.filters(log))
    expected, actual = await memory.read_snapshot(s, f), await mongo.read_snapshot(s, f)
    assert actual == expected, f
    for f in (EventFilter.all(), EventFilter.last_n(3), EventFilter(page=1, page_size=4)):
        assert await mongo.find_events_by_user_id("u", f) == await memory.find_events_by_user_id(
            "u", f
        ), f


async def run_history(mongo: MongoSessionRepository, seed: int, steps: int) -> None:
    memory = InMemorySessionRepository()
    sessions = [Session(id=f"s{seed}-{i}", user_id="u") for i in range(2)]
    for session in sessions:
        await memory.save(session)
        await mongo.save(session)
    histories = [History(seed * 10 + i, session.id) for i, session in enumerate(sessions)]
    for step in range(steps):
        history = histories[step % 2]
        s, rng = history.session_id, history.rng
        roll = rng.random()
        if roll < 0.55:
            batch = [history.event() for _ in range(rng.choice([1, 1, 1, 2, 3, 9]))]
            if rng.random() < 0.1:
                log = await memory.find_events(s, EventFilter.all())
                batch += rng.sample(log, min(2, len(log)))
            version = await memory.get_event_version(s) if rng.random() < 0.3 else None
            if version is not None and rng.random() < 0.3:
                version -= 1
            assert await mongo.append_events(s, batch, version) == await memory.append_events(
                s, batch, version
            )
        elif roll < 0.8:
            log = await memory.find_events(s, EventFilter.all())
            plan = history.plan(log)
            version = await memory.get_event_version(s)
            assert await mongo.apply_compaction(s, plan, version) == await memory.apply_compaction(
                s, plan, version
            )
        else:
            await compare(mongo, memory, history)
    for history in histories:
        await compare(mongo, memory, history)


@pytest.mark.parametrize(
    ("layout", "seed"),
    [("roomy", 0), ("tight", 0), ("crashy", 0)],
    indirect=["layout"],
)
async def test_random_histories_read_the_same_on_mongomock(
    layout: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On mongomock, every read of a random history equals the reference store's."""
    seed += {"roomy": 0, "tight": 10, "crashy": 20}[layout]
    repo = MongoSessionRepository(AsyncMongoMockClient(tz_aware=True)[f"diff{seed}"])
    await repo.ensure_indexes()
    if layout == "crashy":
        make_crashy(repo, seed, monkeypatch)
    await run_history(repo, seed, steps=120)


@pytest.fixture
async def server_repo(mongo_db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    return repo


@pytest.mark.parametrize("layout", ["tight", "crashy"], indirect=True)
async def test_a_random_history_reads_the_same_on_the_server(
    layout: str, server_repo: MongoSessionRepository, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the test server, every read of a random history equals the reference store's."""
    if layout == "crashy":
        make_crashy(server_repo, 100, monkeypatch)
    await run_history(server_repo, seed=100, steps=60)
