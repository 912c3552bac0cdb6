"""Ids the MongoDB store hands out (``draw_event_id``) are registered ahead, on the test server.

``DefaultSessionService.append_message`` without an ``event_id`` draws its id from the store;
the append that uses an id drawn from an empty pool registers the next few with its own, so the
appends after it are one commit each: a plain API turn is one read and two commits.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from command_counting import CommandCounter, counted_repository
from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    CompactionPlan,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventIdConflict,
    Insert,
    MongoSessionRepository,
    SessionEvent,
    SessionNotFound,
    UserMessage,
)
from asyncsession.repository import draw_event_id
from asyncsession.repository.mongo._drawn import POOL_MAX, loaded_id


@pytest.fixture
async def counted(mongo_uri: str) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    async with counted_repository(mongo_uri) as found:
        yield found


async def registered(repo: MongoSessionRepository, session_id: str) -> set[str]:
    docs = await repo._store.event_ids.find({"session_id": session_id}).to_list(None)
    return {loaded_id(doc["_id"]) for doc in docs}


async def guarded(repo: MongoSessionRepository, session_id: str) -> set[str]:
    """The session's ids that no other session can take: registered, or (let go of by the
    registry) in the events collection."""
    below = await repo._store.events.find(
        {"session_id": session_id, "seq": {"$exists": True}}, {"_id": 1}
    ).to_list(None)
    return await registered(repo, session_id) | {loaded_id(doc["_id"]) for doc in below}


async def commands_per_turn(
    counter: CommandCounter,
    service: DefaultSessionService,
    session_id: str,
    store: Callable[[int], Awaitable[None]],
    turns: int = 40,
) -> list[list[str]]:
    """The commands of each of ``turns`` turns: the 20-message window read, then ``store``."""
    window = EventFilter(exclude_archived=True, active_view=True, last_n=20)
    per_turn: list[list[str]] = []
    for i in range(turns):
        counter.clear()
        await service.get_events(session_id, window)
        await store(i)
        per_turn.append(counter.names)
    return per_turn


async def test_a_plain_api_turn_is_a_read_and_two_commits(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """The turn our docs show (``get_events`` + two ``append_message``): 3 commands, except on
    the turns whose first append refills the pool (one insert more, ever rarer)."""
    repo, counter = counted
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id

    async def store(i: int) -> None:
        await service.append_message(s, UserMessage(text=f"q{i}"))
        await service.append_message(s, AssistantMessage(text=f"a{i}"))

    per_turn = await commands_per_turn(counter, service, s, store)
    plain = [names for names in per_turn if "insert" not in names]
    # 80 appends: refills of 2, 4, 8 and then 16 ids, each by an append of a fresh id.
    assert len(plain) >= 40 - 7, per_turn
    rolled = [n for n in plain if len(n) > 3]  # the turns that rolled the tail forward
    assert all(n == ["find", "update", "update"] for n in plain if n not in rolled), plain
    assert len(rolled) <= 1
    refills = [names for names in per_turn if "insert" in names]
    assert all(names.count("insert") == 1 for names in refills)
    log = await service.get_events(s, EventFilter.all())
    assert [e.text for e in log] == [t for i in range(40) for t in (f"q{i}", f"a{i}")]
    # Every stored id is registered for the session; the unused ones are fewer than a refill.
    ids = {e.id for e in log}
    held = await registered(repo, s)
    assert ids <= held
    assert len(held - ids) < POOL_MAX


async def test_a_turn_stored_after_the_reply_is_a_read_and_one_commit(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """``get_events`` + one ``append_messages`` of the question and the reply: 2 commands, except
    on the turns that refill the pool (one insert more) or roll the tail forward (one more)."""
    repo, counter = counted
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id

    async def store(i: int) -> None:
        await service.append_messages(
            s, [UserMessage(text=f"q{i}"), AssistantMessage(text=f"a{i}")]
        )

    per_turn = await commands_per_turn(counter, service, s, store)
    assert all(len(names) <= 3 for names in per_turn), per_turn
    usual = [names for names in per_turn if names == ["find", "update"]]
    assert len(usual) >= 40 - 8, per_turn
    log = await service.get_events(s, EventFilter.all())
    assert [e.text for e in log] == [t for i in range(40) for t in (f"q{i}", f"a{i}")]
    assert await service.get_event_version(s) == 40
    assert {e.id for e in log} <= await registered(repo, s)


async def test_a_batch_mixing_a_pooled_id_and_a_fresh_one_registers_only_the_fresh_one(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """The pool's last id and the fresh id drawn when it ran dry, appended together: the fresh
    id (with the next refill) is registered under the pooled id's token, so the batch costs one
    insert and its commit, and no earlier attempt is taken for dead and fenced."""
    repo, counter = counted
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await service.append_message(s, UserMessage(text="first"))  # a fresh id, and 2 ahead
    await service.append_message(s, UserMessage(text="second"))  # 1 of them: 1 left
    counter.take()
    turn = await service.append_messages(s, [UserMessage(text="q"), AssistantMessage(text="a")])
    assert [name for name, _ in counter.take()] == ["insert", "update"]
    session = await repo._store.sessions.find_one({"_id": s})
    assert session is not None
    assert session["fences"] == []
    log = await service.get_events(s, EventFilter.all())
    assert [e.text for e in log] == ["first", "second", "q", "a"]
    assert {e.id for e in turn} <= await registered(repo, s)
    # a retry of the batch is a no-op, found in the tail
    await service.append_messages(s, [e.message for e in turn], event_ids=[e.id for e in turn])
    assert await service.get_event_version(s) == 3


async def test_deleting_a_session_removes_its_unused_ids_and_a_missing_session_keeps_none(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    repo, _ = counted
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    for i in range(5):
        await service.append_message(s, UserMessage(text=f"m{i}"))
    assert len(await registered(repo, s)) > 5  # some registered ahead, not used yet
    await service.delete(s)
    assert await registered(repo, s) == set()
    with pytest.raises(SessionNotFound):
        await service.append_message("no-such-session", UserMessage(text="x"))
    assert await registered(repo, "no-such-session") == set()


async def test_a_drawn_id_belongs_to_its_session(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """An id drawn (and registered ahead) for one session is another session's id elsewhere,
    as the protocol says; drawing never hands out an id twice."""
    repo, _ = counted
    service = DefaultSessionService(repo)
    a = (await service.create(CreateSessionRequest(user_id="u"))).id
    b = (await service.create(CreateSessionRequest(user_id="u"))).id
    await service.append_message(a, UserMessage(text="fills the pool"))
    drawn = await draw_event_id(repo, a)
    assert drawn in await registered(repo, a)
    with pytest.raises(EventIdConflict) as info:
        await repo.append_event(SessionEvent(id=drawn, session_id=b, message=UserMessage(text="x")))
    assert info.value.owner_session_id == a
    many = [await draw_event_id(repo, a) for _ in range(3 * POOL_MAX)]
    assert len(set(many)) == len(many)
    assert drawn not in many


async def test_many_tasks_store_each_message_once_also_through_a_process_that_did_not_draw(
    mongo_uri: str,
) -> None:
    """Sixteen tasks on four sessions append 30 messages each with drawn ids: every message is
    stored once, in each task's order. Then ids one store drew (registered ahead under its
    token) are appended concurrently through another store on the same database, which holds
    no reservation for them, as another process would: its appends find the registrations,
    adopt them, and store each message once."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
    name = f"pool_{uuid.uuid4().hex[:12]}"
    try:
        repo = MongoSessionRepository(client[name])
        await repo.ensure_indexes()
        service = DefaultSessionService(repo)
        sessions = [(await service.create(CreateSessionRequest(user_id="u"))).id for _ in range(4)]

        async def writer(s: str, w: int) -> list[str]:
            return [
                (await service.append_message(s, UserMessage(text=f"w{w}-{i:02d}"))).id
                for i in range(30)
            ]

        ids = await asyncio.gather(*(writer(s, w) for s in sessions for w in range(4)))
        for k, s in enumerate(sessions):
            log = await service.get_events(s, EventFilter.all())
            assert len(log) == len({e.id for e in log}) == 120
            for w in range(4):
                mine = [e.id for e in log if (e.text or "").startswith(f"w{w}-")]
                assert mine == ids[k * 4 + w]
            assert {e.id for e in log} <= await guarded(repo, s)

        s = sessions[0]
        await service.append_message(s, UserMessage(text="refills the pool"))
        drawn = [await draw_event_id(repo, s) for _ in range(8)]
        unused = await registered(repo, s) - {e.id for e in await service.get_events(s)}
        assert set(drawn) <= unused  # registered ahead, not appended yet
        other = MongoSessionRepository(client[name])  # another process: no reservations
        events = [SessionEvent(id=i, session_id=s, message=UserMessage(text=i)) for i in drawn]
        await asyncio.gather(*(other.append_event(e) for e in events * 2))
        log = [e.id for e in await service.get_events(s, EventFilter.all())]
        assert len(log) == len(set(log)) == 120 + 1 + len(drawn)
        assert set(drawn) <= set(log)
    finally:
        await client.drop_database(name)
        await client.close()


async def test_many_tasks_append_whole_turns_of_drawn_ids_each_once_and_unbroken(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """Twelve tasks on one session append 15 batches each of 1 to 3 messages with
    ``append_messages``, from two stores (two processes' pools) at once. Batches of odd sizes
    mix ids registered ahead with fresh ones and with ids of other refills. Every batch is one
    version, its messages stored once and side by side, each task's batches in its order, and
    no append fences another: each registers only its new ids."""
    repo, _ = counted
    other = MongoSessionRepository(repo._store.sessions.database)  # its own pool and hints
    services = [DefaultSessionService(repo), DefaultSessionService(other)]
    s = (await services[0].create(CreateSessionRequest(user_id="u"))).id

    async def writer(w: int) -> list[list[str]]:
        service = services[w % 2]
        batches: list[list[str]] = []
        for b in range(15):
            size = 1 + (w + b) % 3
            turn = [UserMessage(text=f"w{w:02d}-b{b:02d}-m{m}") for m in range(size)]
            batches.append([e.id for e in await service.append_messages(s, turn)])
        return batches

    written = await asyncio.gather(*(writer(w) for w in range(12)))
    log = await services[0].get_events(s, EventFilter.all())
    ids = [e.id for e in log]
    assert len(ids) == len(set(ids)) == sum(len(b) for w in written for b in w)
    assert await services[0].get_event_version(s) == 12 * 15
    position = {event_id: i for i, event_id in enumerate(ids)}
    for batches in written:
        starts = [position[batch[0]] for batch in batches]
        assert starts == sorted(starts)  # each task's batches in its order
        for batch in batches:  # each batch side by side, in its order
            first = position[batch[0]]
            assert [position[i] for i in batch] == list(range(first, first + len(batch)))
    assert set(ids) <= await guarded(repo, s)
    texts = [e.text for e in log]
    assert len(texts) == len(set(texts))
    # no append took another's registrations (or its own) for a dead attempt's
    session = await repo._store.sessions.find_one({"_id": s})
    assert session is not None
    assert session["fences"] == []


async def test_a_batch_held_under_two_tokens_does_not_commit_once_either_is_fenced(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """Ids registered ahead under two tokens commit together, guarded by both: when another
    attempt has fenced one token and taken its id over, the batch does not commit on the stale
    registration but registers again, adopting the id from that attempt in turn."""
    repo, _ = counted
    s = (await DefaultSessionService(repo).create(CreateSessionRequest(user_id="u"))).id
    writer = repo._writer
    x, y = "x-" + uuid.uuid4().hex, "y-" + uuid.uuid4().hex
    assert await writer.ids.register(s, [x], "a" * 24) == []
    assert await writer.ids.register(s, [y], "b" * 24) == []
    writer.reservations.add(s, [x], "a" * 24)
    writer.reservations.add(s, [y], "b" * 24)
    # another attempt fences token b and takes y over, as an adoption does
    await repo._store.sessions.update_one({"_id": s}, {"$push": {"fences": "b" * 24}})
    await repo._store.event_ids.update_one({"_id": y}, {"$set": {"token": "c" * 24}})
    events = [SessionEvent(id=i, session_id=s, message=UserMessage(text=i)) for i in (x, y)]
    assert await repo.append_events(s, events)
    session = await repo._store.sessions.find_one({"_id": s})
    assert session is not None
    assert "c" * 24 in session["fences"]  # y was adopted back, not committed on b's registration
    log = await repo.find_events(s, EventFilter.all())
    assert [e.id for e in log] == [x, y]
    assert await repo.get_event_version(s) == 1


async def _pooled_turn(
    repo: MongoSessionRepository,
) -> tuple[DefaultSessionService, str, list[SessionEvent]]:
    """A session with one message, and a question and reply of two ids drawn from its pool
    (registered ahead by that message's append), not stored yet."""
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await service.append_message(s, UserMessage(text="earlier"))  # a fresh id, and 2 ahead
    q, a = await draw_event_id(repo, s), await draw_event_id(repo, s)
    turn = [
        SessionEvent(id=q, session_id=s, message=UserMessage(text="q")),
        SessionEvent(id=a, session_id=s, message=AssistantMessage(text="a")),
    ]
    return service, s, turn


def _archiving(log: list[SessionEvent], turn: list[SessionEvent]) -> CompactionPlan:
    """A plan that archives ``log`` and appends ``turn``, its question already archived (as a
    turn stored with a reply the server compacted is)."""
    return CompactionPlan(
        archive_ids=frozenset(e.id for e in log),
        inserts=(Insert.at_end([turn[0].as_archived(), *turn[1:]]),),
    )


async def test_a_compaction_writing_pooled_ids_registers_none_of_them_again(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """Ids registered ahead keep their registrations in a compaction too: its write is the
    session read and the commit, with no command on the id registry."""
    repo, counter = counted
    service, s, turn = await _pooled_turn(repo)
    log = await service.get_events(s)
    version = await service.get_event_version(s)
    counter.take()

    assert await repo.apply_compaction(s, _archiving(log, turn), version)

    assert counter.take() == [("find", "sessions"), ("findAndModify", "sessions")]
    stored = await service.get_events(s, EventFilter.all())
    assert [(e.text, e.archived) for e in stored] == [("earlier", True), ("q", True), ("a", False)]
    assert {e.id for e in turn} <= await registered(repo, s)
    session = await repo._store.sessions.find_one({"_id": s})
    assert session is not None
    assert session["fences"] == []


async def test_a_compaction_that_loses_keeps_the_pooled_ids_for_the_append(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """A stale version: the compaction writes nothing and lets the ids go back to the pool's
    registrations, so appending the turn plainly still registers nothing."""
    repo, counter = counted
    service, s, turn = await _pooled_turn(repo)
    log = await service.get_events(s)
    version = await service.get_event_version(s)
    await service.append_message(s, UserMessage(text="racing"), event_id="racing-id")
    counter.take()

    assert not await repo.apply_compaction(s, _archiving(log, turn), version)
    assert await repo.append_events(s, turn)

    assert all(target != "session_event_ids" for _, target in counter.take())
    stored = await service.get_events(s, EventFilter.all())
    assert [(e.text, e.archived) for e in stored] == [
        ("earlier", False),
        ("racing", False),
        ("q", False),
        ("a", False),
    ]


async def test_a_compaction_held_under_a_fenced_token_registers_its_ids_again(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    """Ids registered ahead under two tokens, one of them fenced by an attempt that took its
    id over: the compaction does not commit on the stale registration but registers again,
    adopting the id back, and commits once."""
    repo, _ = counted
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await service.append_message(s, UserMessage(text="earlier"), event_id="earlier-id")
    writer = repo._writer
    x, y = "x-" + uuid.uuid4().hex, "y-" + uuid.uuid4().hex
    assert await writer.ids.register(s, [x], "a" * 24) == []
    assert await writer.ids.register(s, [y], "b" * 24) == []
    writer.reservations.add(s, [x], "a" * 24)
    writer.reservations.add(s, [y], "b" * 24)
    await repo._store.sessions.update_one({"_id": s}, {"$push": {"fences": "b" * 24}})
    await repo._store.event_ids.update_one({"_id": y}, {"$set": {"token": "c" * 24}})
    turn = [
        SessionEvent(id=x, session_id=s, message=UserMessage(text="q")),
        SessionEvent(id=y, session_id=s, message=AssistantMessage(text="a")),
    ]
    log = await service.get_events(s)

    assert await repo.apply_compaction(s, _archiving(log, turn), 1)

    session = await repo._store.sessions.find_one({"_id": s})
    assert session is not None
    assert "c" * 24 in session["fences"]  # y was adopted back
    stored = await repo.find_events(s, EventFilter.all())
    assert [(e.id, e.archived) for e in stored] == [("earlier-id", True), (x, True), (y, False)]
    assert await repo.get_event_version(s) == 2
