"""Bad or unusual input: operator-like keys, oversized events, big bodies, regex-like keywords."""

from __future__ import annotations

from typing import Any

import pydantic
import pytest
from mongomock_motor import AsyncMongoMockClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    EventFilter,
    EventTooLarge,
    EventType,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.events import MAX_ID_LENGTH
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import boundary, synthetic, user

NASTY: dict[str, Any] = {
    "$set": {"version": 99, "seq": 0},
    "$inc": {"version": 5},
    "$where": "sleep(1000)",
    "a.b.c": {"$gt": 1, "d.e": [{"$ne": None}]},
    "nul\x00key": "value\x00with NUL",
    "": "empty key",
    "version": -1,
}


@pytest.fixture(params=["server", "mongomock"])
async def repo(
    request: pytest.FixtureRequest, mongo_db: AsyncDatabase[dict[str, Any]]
) -> MongoSessionRepository:
    """The store on the test server and on mongomock-motor, keeping every body in its commit
    (no offloading: these tests hold the commit's own size limit; test_mongo_offload.py holds
    what offloading does)."""
    database: Any = mongo_db
    if request.param == "mongomock":
        database = AsyncMongoMockClient(tz_aware=True)["input"]
    repository = MongoSessionRepository(database, offload_threshold=None)
    await repository.ensure_indexes()
    return repository


async def new_session(repo: MongoSessionRepository, **values: Any) -> str:
    session = Session(user_id="u", **values)
    await repo.save(session)
    return session.id


async def test_operator_like_keys_round_trip_and_never_act(repo: MongoSessionRepository) -> None:
    """Keys with ``$``, ``.`` or NUL in metadata and payloads are data, never operators."""
    session = Session(user_id="u", metadata=NASTY)
    assert (await repo.save(session)).metadata == NASTY
    assert await repo.save_if_absent(Session(user_id="u", metadata=NASTY))
    s = session.id
    events = [
        SessionEvent(session_id=s, type=EventType.of("ACME.X"), payload=NASTY, metadata=NASTY),
        SessionEvent(
            session_id=s, message=UserMessage(text="$set", extra={"$inc": {"v": 1}}), metadata=NASTY
        ),
    ]
    await repo.append_events(s, events)
    stored = await repo.find_by_id(s)
    assert stored is not None
    assert stored.metadata == NASTY
    assert await repo.find_events(s, EventFilter.all()) == events
    assert await repo.get_event_version(s) == 1
    doc = await repo._store.sessions.find_one({"_id": s})
    assert not any(key.startswith("$") for key in doc)
    commit = await repo._store.commits.find_one({"session": s})
    assert commit is not None
    assert commit["commit"] == 1


async def test_operator_like_keys_survive_many_commits_and_compaction(
    repo: MongoSessionRepository,
) -> None:
    """Bodies of many commits, and a compaction's summary, keep their keys."""
    s = await new_session(repo)
    events = [
        SessionEvent(session_id=s, message=UserMessage(text=f"m{i}"), metadata=NASTY)
        for i in range(100)
    ]
    await repo.append_events(s, events)
    await repo.append_event(user(s, "last"))
    summary = SessionEvent(session_id=s, message=AssistantMessage(text="summary"), metadata=NASTY)
    active = await repo.find_events(s, EventFilter.active())
    edge = boundary(s, [summary, *active[1:]], active[:1])
    assert await repo.append_events(s, [summary, edge], 2)
    log = await repo.find_events(s, EventFilter.all())
    assert log[1:100] == events[1:]
    assert log[-2] == summary
    assert (await repo.find_events(s, EventFilter.active()))[0] == summary


async def test_an_event_over_the_size_limit_is_rejected_and_its_batch_not_written(
    repo: MongoSessionRepository,
) -> None:
    """A ~17 MB event raises ``EventTooLarge`` with its id and size; nothing of its batch stays."""
    s, other = await new_session(repo), await new_session(repo)
    small = [user(s, "before"), user(s, "after")]
    huge = SessionEvent(
        session_id=s, type=EventType.of("ACME.BLOB"), payload={"blob": "x" * (17 * 1024 * 1024)}
    )
    with pytest.raises(EventTooLarge) as info:
        await repo.append_events(s, [small[0], huge, small[1]])
    assert info.value.event_id == huge.id
    assert info.value.size > 17 * 1024 * 1024 > info.value.limit
    assert huge.id in str(info.value)
    assert await repo.find_events(s, EventFilter.all()) == []
    assert await repo.get_event_version(s) == 0
    moved = [e.model_copy(update={"session_id": other}) for e in small]
    await repo.append_events(other, moved)  # the ids were never taken
    assert await repo.find_events(other, EventFilter.all()) == moved


async def test_big_events_up_to_the_document_limit_read_back_whole(
    repo: MongoSessionRepository,
) -> None:
    """Events of hundreds of kilobytes, and one of 15 MiB alone in its commit, round-trip
    through appends, windows, keyword searches and compaction."""
    s = await new_session(repo)
    big = [
        SessionEvent(session_id=s, message=AssistantMessage(text=f"{i} " + "y" * 100_000))
        for i in range(3)
    ]
    question = user(s, "q")
    await repo.append_event(big[0])
    await repo.append_events(s, [question, big[1]])
    assert await repo.find_events(s, EventFilter.all()) == [big[0], question, big[1]]
    filler = [user(s, f"f{i}") for i in range(80)]
    for event in filler:
        await repo.append_event(event)
    summary = synthetic(s, AssistantMessage(text="z" * 50_000))
    active = await repo.find_events(s, EventFilter.active())
    edge = boundary(s, [summary, *active[1:]], active[:1])
    assert await repo.append_events(s, [summary, edge], await repo.get_event_version(s))
    log = await repo.find_events(s, EventFilter.all())
    assert log[0] == big[0].as_archived()
    assert log[1:3] == [question, big[1]]
    assert await repo.find_events(s, EventFilter(keyword="1 yyy", last_n=1)) == [big[1]]
    snapshot = await repo.read_snapshot(s, EventFilter.last_n(2))
    assert snapshot is not None
    assert [e.text for e in snapshot.events if e.is_message] == ["f79", "z" * 50_000]
    huge = SessionEvent(session_id=s, message=AssistantMessage(text="h" * (15 * 1024 * 1024)))
    await repo.append_event(huge)
    newest = EventFilter(message_types=["assistant"], last_n=1)
    assert await repo.find_events(s, newest) == [huge]


async def test_keywords_match_literally_whatever_characters_they_hold(
    repo: MongoSessionRepository,
) -> None:
    """Keywords with regex syntax, escapes, non-ASCII letters or NUL match only themselves."""
    s = await new_session(repo)
    texts = ["A plain text", "\\x41 escaped", "Ünïcödé Straße", "nul\x00here", "(a|b)*", "dot.star"]
    await repo.append_events(s, [user(s, t) for t in texts])
    cases = {
        "\\x41": ["\\x41 escaped"],
        "x41": ["\\x41 escaped"],
        "ünïcödé": ["Ünïcödé Straße"],
        "STRASSE": [],
        "straße": ["Ünïcödé Straße"],
        "\x00": ["nul\x00here"],
        "(a|b)*": ["(a|b)*"],
        "a|b": ["(a|b)*"],
        ".star": ["dot.star"],
        "t*s": [],
        "o.s": [],
    }
    for keyword, expected in cases.items():
        found = await repo.find_events(s, EventFilter(keyword=keyword))
        assert [e.text for e in found] == expected, keyword


async def test_ids_of_the_longest_length_and_any_characters_work(
    repo: MongoSessionRepository,
) -> None:
    """Ids are non-empty strings of at most 255 characters; any such id works."""
    session_id = "s" * MAX_ID_LENGTH
    await repo.save(Session(id=session_id, user_id="u"))
    odd = SessionEvent(id="$ev.id ünï" + "e" * 200, session_id=session_id, message=UserMessage())
    await repo.append_event(odd)
    assert await repo.find_events(session_id, EventFilter.all()) == [odd]
    with pytest.raises(pydantic.ValidationError):
        SessionEvent(id="e" * (MAX_ID_LENGTH + 1), session_id=session_id, message=UserMessage())
    with pytest.raises(pydantic.ValidationError):
        Session(id="", user_id="u")
