"""What the MongoDB store sends, command by command: the budgets of a turn, pinned.

| work | commands |
|---|---|
| after-reply turn: snapshot, then one commit of the question and the reply | 2 |
| question-first turn: snapshot, question (with a lease), reply at +1 | 3 |
| first turn of a new session: snapshot (nothing), the session, the commit | 3 |
| compaction: snapshot of the active view, the commit | 2 |
| taking a lease | 1 |

Counted with PyMongo's command monitoring on the test server.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from command_counting import CommandCounter, counted_repository
from pymongo import AsyncMongoClient, monitoring

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    Session,
    SessionEvent,
)
from asyncsession.compaction import SlidingWindowCompactionStrategy
from asyncsession.repository import Lease
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import assistant, user

WINDOW = EventFilter.active().merge(EventFilter.last_n(10))


@pytest.fixture
async def counted(mongo_uri: str) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    async with counted_repository(mongo_uri) as found:
        yield found


async def with_turns(repo: MongoSessionRepository, turns: int) -> str:
    """A session holding ``turns`` turns of a question and its reply, one commit each."""
    session = Session(user_id="alice")
    await repo.save(session)
    s = session.id
    for i in range(turns):
        await repo.append_events(s, [user(s, f"q{i}"), assistant(s, f"a{i}")])
    return s


def lease() -> Lease:
    return Lease(holder="turn", expires_at=datetime.now(UTC) + timedelta(seconds=10))


@pytest.mark.parametrize("turns", [1, 50])
async def test_an_after_reply_turn_is_a_read_and_one_insert(
    counted: tuple[MongoSessionRepository, CommandCounter], turns: int
) -> None:
    repo, counter = counted
    s = await with_turns(repo, turns)
    for i in range(5):
        counter.clear()
        snapshot = await repo.read_snapshot(s, WINDOW)
        assert snapshot is not None
        turn = [user(s, f"question {i}"), assistant(s, f"reply {i}")]
        assert await repo.append_events(s, turn, snapshot.version)
        assert counter.take() == [("aggregate", "session_commits"), ("insert", "session_commits")]


async def test_a_question_first_turn_is_a_read_and_two_inserts(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    repo, counter = counted
    s = await with_turns(repo, 20)
    counter.clear()
    snapshot = await repo.read_snapshot(s, WINDOW)
    assert snapshot is not None
    assert await repo.append_events(s, [user(s, "question")], snapshot.version, lease=lease())
    assert await repo.append_events(s, [assistant(s, "reply")], snapshot.version + 1)
    assert counter.names == ["aggregate", "insert", "insert"]


async def test_the_first_turn_of_a_new_session_is_three_commands(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    repo, counter = counted
    session = Session(user_id="alice")
    counter.clear()
    assert await repo.read_snapshot(session.id, WINDOW) is None
    assert await repo.save_if_absent(session)
    s = session.id
    assert await repo.append_events(s, [user(s, "hi"), assistant(s, "hello")], 0)
    assert counter.names == ["aggregate", "insert", "insert"]


@pytest.mark.parametrize(("turns", "compacted"), [(6, False), (60, False), (60, True)])
async def test_a_compaction_is_at_most_three_commands(
    counted: tuple[MongoSessionRepository, CommandCounter], turns: int, compacted: bool
) -> None:
    """Read the active view, append the commit: 2 commands; 3 when the view reaches further
    back than the first range (a long session never compacted), read at once."""
    repo, counter = counted
    s = await with_turns(repo, turns)
    service = DefaultSessionService(repo)
    strategy = SlidingWindowCompactionStrategy(4)
    if compacted:
        assert (await service.compact(s, lambda r: True, strategy)).applied
        for i in range(3):
            await repo.append_events(s, [user(s, f"later {i}"), assistant(s, f"reply {i}")])
    await repo.read_snapshot(s, WINDOW)  # the turn before it read the session
    counter.clear()
    result = await service.compact(s, lambda r: True, strategy)
    assert result.applied
    long_view = turns > 30 and not compacted
    assert counter.names == ["aggregate", *(["find"] if long_view else []), "insert"]


async def test_leases_are_one_command_each(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    repo, counter = counted
    s = await with_turns(repo, 3)
    counter.clear()
    assert await repo.acquire_lease(s, 3, lease())
    await repo.release_lease(s, 3, "turn")
    assert await repo.acquire_lease(s, 0, lease())
    assert counter.names == ["update", "update", "update"]


async def test_a_window_is_a_range_when_the_process_knows_the_newest_commit(
    counted: tuple[MongoSessionRepository, CommandCounter], mongo_uri: str
) -> None:
    """The first read of a session in a process sorts; the next ones read a range that starts
    just before the newest commit known, and returns about as many commits as the window."""
    repo, _ = counted
    s = await with_turns(repo, 200)
    recorder = Pipelines()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[recorder]
    )
    try:
        fresh = MongoSessionRepository(client[repo._database.name])
        await fresh.read_snapshot(s, WINDOW)
        await fresh.read_snapshot(s, WINDOW)
    finally:
        await client.close()
    first, second = recorder.pipelines
    assert {"$sort": {"commit": -1}} in first
    assert second[0]["$match"]["commit"] == {"$gt": 200 - 8}  # 11 events, 2 a commit; 8 at least
    assert [list(stage) for stage in second] == [["$match"], ["$unionWith"]]


class Pipelines(monitoring.CommandListener):
    """The pipelines of the aggregates sent while it listens."""

    def __init__(self) -> None:
        self.pipelines: list[list[dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "aggregate":
            self.pipelines.append(list(event.command["pipeline"]))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


class Bodies(monitoring.CommandListener):
    """Every command sent, whole."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        self.sent.append(dict(event.command))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_every_command_on_the_commits_names_its_session(mongo_uri: str) -> None:
    """Appends, reads, windows that walk back, compaction, leases and deletes all name the
    session (the shard key) in what they send about commits."""
    bodies = Bodies()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[bodies]
    )
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        s = await with_turns(repo, 30)
        service = DefaultSessionService(repo)
        await repo.find_events(s, EventFilter.last_n(50))
        await repo.find_events(s, EventFilter.all())
        await repo.find_events(s, EventFilter.keyword_search("q1"))
        await repo.append_events(s, [user(s, "more")])
        await service.compact(s, lambda r: True, SlidingWindowCompactionStrategy(4))
        await repo.find_events(s, EventFilter.active())
        await repo.acquire_lease(s, 2, lease())
        await repo.delete(s)
    finally:
        await client.drop_database(name)
        await client.close()
    verbs = ("find", "insert", "update", "delete", "aggregate")
    about_commits = [
        c for c in bodies.sent if any(c.get(verb) == "session_commits" for verb in verbs)
    ]
    assert about_commits
    for command in about_commits:
        assert "'session'" in repr(command), command
    unions = [c for c in bodies.sent if c.get("aggregate") == "session_commits"]
    assert unions
    assert all(c["pipeline"][0]["$match"]["session"] == s for c in unions)


async def test_a_lost_acknowledgement_retried_costs_one_lookup(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """A retry of a stored commit: its insert is refused, one find tells it is a replay."""
    repo, counter = counted
    s = await with_turns(repo, 2)
    turn = [user(s, "q"), SessionEvent(session_id=s, message=AssistantMessage(text="a"))]
    assert await repo.append_events(s, turn, 2)
    counter.clear()
    assert await repo.append_events(s, turn, 2)
    assert counter.names == ["insert", "find"]
    assert [e.text for e in await repo.find_events(s, EventFilter.last_n(2))] == ["q", "a"]
