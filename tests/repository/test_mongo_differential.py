"""Random histories give the same reads on the MongoDB store as on the in-memory reference.

Each run applies one random sequence of appends, batches, custom events, replays and compactions
(random views, with summaries placed anywhere in them, at current or stale versions) to both
stores, and compares a wide set of reads after every step. The ``lossy`` variant loses the
connection around some commits (before the write, or after it with the reply lost) and retries
them, as a caller with the driver's retries off does.
"""

from __future__ import annotations

import random
import re
from datetime import timedelta
from typing import Any

import pytest
from mongomock_motor import AsyncMongoMockClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import (
    AssistantMessage,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    Session,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC, utc_now
from asyncsession.exceptions import StorageError
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import boundary

AUDIT = EventType.of("ACME.AUDIT")
WORDS = ["alpha", "Beta", "gamma.x", "50%", "a_b", "(x)", "Ünï", "tool"]


class Lossy:
    """The commits collection, losing the connection around some inserts: before the write, or
    after it (the write happened, its reply was lost)."""

    def __init__(self, inner: Any, rng: random.Random) -> None:
        self._inner = inner
        self._rng = rng

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def insert_one(self, *args: Any, **kwargs: Any) -> Any:
        roll = self._rng.random()
        if roll < 0.15:
            raise AutoReconnect("injected: lost before the write")
        result = await self._inner.insert_one(*args, **kwargs)
        if roll < 0.3:
            raise AutoReconnect("injected: lost after the write")
        return result


async def retried(
    mongo: MongoSessionRepository, s: str, events: list[SessionEvent], version: int | None
) -> bool:
    """An append retried until it gets an answer, as its caller would."""
    for _ in range(50):
        try:
            return await mongo.append_events(s, events, version)
        except StorageError as exc:
            if not isinstance(exc.__cause__, AutoReconnect):
                raise
    raise AssertionError("no answer in 50 attempts")


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

    def compaction(self, active: list[SessionEvent]) -> list[SessionEvent]:
        """A compaction of the view ``active``: some of it dropped, a few new message events
        placed anywhere in what stays, then the boundary."""
        rng = self.rng
        dropped = rng.sample(active, min(len(active), rng.randint(0, 4)))
        view = [e for e in active if e not in dropped]
        new: list[SessionEvent] = []
        for _ in range(rng.randint(0, 3)):
            event = self.event()
            if event.is_message:
                new.append(event)
                view.insert(rng.randint(0, len(view)), event)
        return [*new, boundary(self.session_id, view, dropped)]

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
            EventFilter.keywords_search(rng.sample(WORDS, 2), "all"),
            EventFilter.keywords_search(rng.sample(WORDS, 2), "any", page_size=3),
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


async def run_history(
    mongo: MongoSessionRepository, seed: int, steps: int, *, lossy: bool = False
) -> None:
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
                log = [e for e in log if e.type != EventType.COMPACTION]  # always last of its own
                batch += rng.sample(log, min(2, len(log)))
            version = await memory.get_event_version(s) if rng.random() < 0.3 else None
            if version is not None and rng.random() < 0.3:
                version -= 1
            expected = await memory.append_events(s, batch, version)
            assert await retried(mongo, s, batch, version) == expected
        elif roll < 0.8:
            active = await memory.find_events(s, EventFilter.active())
            commit = history.compaction(active)
            version = await memory.get_event_version(s)
            if rng.random() < 0.2:
                version -= 1
            expected = await memory.append_events(s, commit, version)
            assert await retried(mongo, s, commit, version) == expected
        else:
            await compare(mongo, memory, history)
    for history in histories:
        await compare(mongo, memory, history)


@pytest.mark.parametrize("seed", [0, 10])
async def test_random_histories_read_the_same_on_mongomock(seed: int) -> None:
    """On mongomock, every read of a random history equals the reference store's."""
    repo = MongoSessionRepository(AsyncMongoMockClient(tz_aware=True)[f"diff{seed}"])
    await repo.ensure_indexes()
    await run_history(repo, seed, steps=120)


@pytest.fixture
async def server_repo(mongo_db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    return repo


@pytest.mark.parametrize("lossy", [False, True], ids=["steady", "lossy"])
async def test_a_random_history_reads_the_same_on_the_server(
    lossy: bool, server_repo: MongoSessionRepository
) -> None:
    """On the test server, every read of a random history equals the reference store's, also
    when commits lose their connection and are retried."""
    if lossy:
        store = server_repo._store
        store.commits = Lossy(store.commits, random.Random(7))  # type: ignore[assignment]
    await run_history(server_repo, seed=100, steps=120, lossy=lossy)
