"""User-wide reads (``find_events_by_user_id``): chunked, projected, windowed on the server, and
the same events as the reference store. On the test server and mongomock."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from mongomock_motor import AsyncMongoMockClient
from pymongo import AsyncMongoClient, monitoring

from asyncsession import (
    AssistantMessage,
    EventFilter,
    InMemorySessionRepository,
    Session,
    SessionRepository,
)
from asyncsession.events import utc_now
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo import _read as _mongo_reads
from asyncsession.testing._contract._support import assistant, boundary, synthetic, user

CHUNK = 4


class Recorder(monitoring.CommandListener):
    """Every command started, with its body."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.commands.append((event.command_name, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def server(
    mongo_uri: str,
    recorder: Recorder,
    monkeypatch: pytest.MonkeyPatch,
) -> AsyncIterator[MongoSessionRepository]:
    """The store on the test server, reading chunks of four sessions."""
    monkeypatch.setattr(_mongo_reads, "IN_CHUNK", CHUNK)
    uri = mongo_uri
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[recorder]
    )
    name = f"user_reads_{id(recorder):x}"
    repository = MongoSessionRepository(client[name])
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(name)
        await client.close()


async def fill(repos: list[SessionRepository], sessions: int, seed: int) -> None:
    """The same sessions and events (shuffled timestamps, some compactions) in every store."""
    rng = random.Random(seed)
    base = utc_now() - timedelta(days=1)
    for k in range(sessions):
        owner = "alice" if k % 5 else "bob"
        session = Session(id=f"s{k:03d}", user_id=owner, metadata={"big": "x" * 2000})
        events = []
        for i in range(rng.randrange(0, 14)):
            at = base + timedelta(seconds=rng.randrange(0, 40))  # many equal timestamps
            make = user if i % 2 == 0 else assistant
            events.append(make(session.id, f"k{k} m{i} {'fox' if i % 3 else 'dog'}", timestamp=at))
        for repo in repos:
            await repo.save(session)
            for start in range(0, len(events), 3):
                await repo.append_events(session.id, events[start : start + 3])
        if len(events) >= 4 and k % 3 == 0:
            summary = synthetic(session.id, AssistantMessage(text=f"sum {k}"))
            commit = [summary, boundary(session.id, [summary, *events[2:]], events[:2])]
            for repo in repos:
                version = await repo.get_event_version(session.id)
                assert await repo.append_events(session.id, commit, version)


FILTERS = [
    EventFilter.all(),
    EventFilter.active(),
    EventFilter.last_n(1),
    EventFilter.last_n(7),
    EventFilter.last_n(500),
    EventFilter.active().merge(EventFilter.last_n(9)),
    EventFilter(page_size=5),
    EventFilter(page=3, page_size=5),
    EventFilter(page=40, page_size=5),
    EventFilter.keyword_search("fox"),
    EventFilter.keyword_search("fox").merge(EventFilter.last_n(4)),
    EventFilter(exclude_synthetic=True, page=1, page_size=6),
]


async def test_user_reads_match_the_reference_store_across_chunks(
    server: MongoSessionRepository,
) -> None:
    """Over 6 chunks of sessions (alice owns 24 of the 30), every window returns exactly what
    the reference store returns (timestamps tie often; ties order by session id, then log
    order), on the test server and on mongomock."""
    memory = InMemorySessionRepository()
    mock = MongoSessionRepository(AsyncMongoMockClient(tz_aware=True)["user_reads"])
    await fill([memory, server, mock], 30, seed=7)
    for filter in FILTERS:
        for owner in ("alice", "bob", "nobody"):
            expected = await memory.find_events_by_user_id(owner, filter)
            assert await server.find_events_by_user_id(owner, filter) == expected, (owner, filter)
            assert await mock.find_events_by_user_id(owner, filter) == expected, (owner, filter)


async def test_user_reads_are_chunked_and_projected(
    server: MongoSessionRepository, recorder: Recorder
) -> None:
    """One find of the user's sessions without their metadata, then one find of commits per
    chunk of sessions: the commands grow with the chunks, not the sessions or the events."""
    await fill([server], 40, seed=3)
    recorder.commands.clear()
    found = await server.find_events_by_user_id("alice", EventFilter.last_n(5))
    assert len(found) == 5
    finds = [c for name, c in recorder.commands if name == "find"]
    sessions = [c for c in finds if c["find"] == "sessions"]
    assert len(sessions) == 1
    assert "metadata" not in sessions[0]["projection"]
    commits = [c for c in finds if c["find"] == "session_commits"]
    sessions_of_alice = 32
    assert len(commits) == -(-sessions_of_alice // CHUNK)
    for command in commits:
        assert len(command["filter"]["session"]["$in"]) <= CHUNK
    names = [name for name, _ in recorder.commands]
    assert names.count("getMore") <= len(commits)
