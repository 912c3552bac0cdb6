"""What rolling the tail forward costs a turn, on the test server.

The turn that takes the tail to `K_MAX` entries copies its oldest events to the events
collection (one command; the commit that crossed returned them in its post-image), and the next
commit of the same process cuts them from the tail. So no turn pays more than one command more
for it, and a turn whose append refilled the id pool (one command more already) leaves the
roll-forward to the next commit. A cut that cannot ride on a commit (another writer appended in
between) is done by id; one that is never done is redone one step later, which bounds the tail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from command_counting import CommandCounter, counted_repository
from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.repository.mongo._hints import K_MAX, K_MIN

WINDOW = EventFilter(exclude_archived=True, active_view=True, last_n=20)


@pytest.fixture
async def two(
    mongo_uri: str,
) -> AsyncIterator[tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter]]:
    """Two repositories on one database (two processes, as far as the store can tell); the
    first one's commands are counted."""
    async with counted_repository(mongo_uri) as (repo, counter):
        client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
        try:
            yield repo, MongoSessionRepository(client[repo._store.sessions.database.name]), counter
        finally:
            await client.close()


async def tail_length(repo: MongoSessionRepository, session_id: str) -> int:
    doc = await repo._store.sessions.find_one({"_id": session_id}, {"tn": 1})
    assert doc is not None
    return int(doc["tn"])


def copies(sent: list[tuple[str, str]]) -> int:
    return sum(1 for name, collection in sent if name == "insert" and collection.endswith("events"))


async def test_no_plain_api_turn_pays_more_than_one_command_for_rolling_forward(
    two: tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter],
) -> None:
    """120 turns of ``get_events`` + two ``append_message`` (240 events, three roll-forwards):
    every turn is 3 commands, or 4 when it refilled the id pool or copied events forward, never
    both; nothing is lost or reordered and the tail stays bounded."""
    repo, _, commands = two
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    costs: Counter[int] = Counter()
    rolls = 0
    longest = 0
    for i in range(120):
        commands.take()
        assert len(await service.get_events(s, WINDOW)) == min(20, 2 * i)
        await service.append_message(s, UserMessage(text=f"q{i}"))
        await service.append_message(s, AssistantMessage(text=f"a{i}"))
        sent = commands.take()
        costs[len(sent)] += 1
        rolls += copies(sent)
        assert len(sent) <= 4, (i, sent)
        longest = max(longest, await tail_length(repo, s))
    assert costs[3] > costs[4] > 0
    assert rolls >= (240 - K_MAX) // (K_MAX - K_MIN)
    assert longest <= K_MAX + 1
    texts = [e.text for e in await service.get_events(s, EventFilter.all())]
    assert texts == [t for i in range(120) for t in (f"q{i}", f"a{i}")]
    stored = await repo._store.events.count_documents({"session_id": s})
    assert stored + await tail_length(repo, s) == 240


async def test_no_advisor_turn_pays_more_than_one_command_for_rolling_forward(
    two: tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter],
) -> None:
    """What the advisors run, ``start_turn`` with the window and then the reply: 2 commands a
    turn, 3 at most, and every event in order."""
    repo, _, commands = two
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    costs: Counter[int] = Counter()
    rolls = 0
    for i in range(100):
        commands.take()
        _, snapshot = await service.start_turn(s, UserMessage(text=f"q{i}"), WINDOW)
        assert len(snapshot.events) == min(20, 2 * i)
        await service.append_message(s, AssistantMessage(text=f"a{i}"))
        sent = commands.take()
        costs[len(sent)] += 1
        rolls += copies(sent)
        assert len(sent) <= 3, (i, sent)
    assert costs[2] > costs[3] > 0
    assert rolls >= (200 - K_MAX) // (K_MAX - K_MIN)
    texts = [e.text for e in await service.get_events(s, EventFilter.all())]
    assert texts == [t for i in range(100) for t in (f"q{i}", f"a{i}")]


def event(session_id: str, text: str) -> SessionEvent:
    return SessionEvent(session_id=session_id, message=UserMessage(text=text))


async def test_a_cut_another_writer_got_ahead_of_is_done_by_id(
    two: tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter],
) -> None:
    """This process copied events forward, then another appended before this one's next
    commit: the cut cannot ride on it (the tail is longer than the copy left it), so it is
    done by id first; the log is whole and in order."""
    repo, other, commands = two
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    mine = [event(s, f"m{i}") for i in range(K_MAX)]
    await repo.append_events(s, mine[: K_MAX - 1])
    await repo.append_events(s, mine[K_MAX - 1 :])  # takes the tail to K_MAX: copies forward
    assert await repo._store.events.count_documents({"session_id": s}) == K_MAX - K_MIN
    assert await tail_length(repo, s) == K_MAX
    theirs = [event(s, f"t{i}") for i in range(3)]
    for e in theirs:
        await other.append_event(e)
    commands.take()
    last = event(s, "last")
    await repo.append_event(last)
    sessions = [c for c in commands.take() if c[1] == "sessions"]
    assert len(sessions) == 3  # the commit that carried the cut, the cut by id, the commit
    assert await tail_length(repo, s) == K_MIN + len(theirs) + 1
    texts = [e.text for e in await other.find_events(s, EventFilter.all())]
    assert texts == [e.text for e in (*mine, *theirs, last)]


async def test_a_cut_that_never_comes_is_redone_one_step_later(
    two: tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter],
) -> None:
    """The process that copied events forward never writes again: the tail grows by one step
    of ``K_MAX - K_MIN`` at most before another writer rolls it forward at once."""
    repo, other, _ = two
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    await repo.append_events(s, [event(s, f"m{i}") for i in range(K_MAX - 1)])
    await repo.append_event(event(s, "crossing"))  # copies forward, leaves the cut
    longest = 0
    for i in range(2 * (K_MAX - K_MIN)):
        await other.append_event(event(s, f"t{i}"))
        longest = max(longest, await tail_length(other, s))
    assert K_MAX < longest < K_MAX + (K_MAX - K_MIN)  # the append reaching it rolls forward
    assert await tail_length(other, s) <= K_MAX
    texts = [e.text for e in await other.find_events(s, EventFilter.all())]
    expected = [*(f"m{i}" for i in range(K_MAX - 1)), "crossing"]
    assert texts == expected + [f"t{i}" for i in range(2 * (K_MAX - K_MIN))]


async def test_a_roll_forward_that_another_got_ahead_of_starts_again_while_the_tail_is_long(
    two: tuple[MongoSessionRepository, MongoSessionRepository, CommandCounter],
) -> None:
    """A roller working from a stale read finds the tail cut under it by another roller, and
    grown past `K_MAX` again since: it reads again and rolls what is there now, instead of
    leaving the tail long until the next step."""
    repo, _, _ = two
    s = (await repo.save(Session(user_id="u"))).id

    def events(prefix: str, n: int) -> list[SessionEvent]:
        return [
            SessionEvent(id=f"{prefix}{i:03d}", session_id=s, message=UserMessage(text=f"{i}"))
            for i in range(n)
        ]

    roller = repo._writer.roller
    assert await repo.append_events(s, events("a", K_MAX - 1))
    stale = await repo._store.sessions.find_one({"_id": s})  # what the slow roller read
    assert stale is not None
    await roller.roll_forward(s)  # another roller cuts first
    assert await tail_length(repo, s) == K_MIN

    async def no_roll(*_: object, **__: object) -> None:
        return None

    roller.after_commit = no_roll  # type: ignore[method-assign]  # the appends since roll nothing
    assert await repo.append_events(s, events("b", K_MAX - K_MIN + 6))
    assert await tail_length(repo, s) == K_MAX + 6
    del roller.after_commit
    await roller.roll_forward(s, stale)  # the slow roller, at last
    assert await tail_length(repo, s) == K_MIN
    log = [e.id for e in await repo.find_events(s, EventFilter.all())]
    assert log == [e.id for e in events("a", K_MAX - 1) + events("b", K_MAX - K_MIN + 6)]
