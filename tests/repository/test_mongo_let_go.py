"""The id registry lets go of the ids the store handed out once their events are below the tail,
on the test server.

A message stored below the tail then costs no registry document. The contract stays: a replay
of such an event is recognised, a copy of it appended to another session raises
`EventIdConflict`, from many tasks at once and through a store that drew nothing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventIdConflict,
    MongoSessionRepository,
    SessionEvent,
    UserMessage,
)
from asyncsession.repository.mongo._drawn import is_drawn, loaded_id

TURNS = 60  # 120 messages: the tail rolls forward once, past 96 entries


async def chat(service: DefaultSessionService, session_id: str, turns: int = TURNS) -> None:
    for turn in range(turns):
        await service.append_message(session_id, UserMessage(text=f"q{turn}"))
        await service.append_message(session_id, UserMessage(text=f"a{turn}"))


async def registered(database: AsyncDatabase[dict[str, Any]], session_id: str) -> set[str]:
    docs = await database["session_event_ids"].find({"session_id": session_id}).to_list(None)
    return {loaded_id(doc["_id"]) for doc in docs}


async def below(database: AsyncDatabase[dict[str, Any]], session_id: str) -> set[str]:
    docs = await database["session_events"].find({"session_id": session_id}).to_list(None)
    return {loaded_id(doc["_id"]) for doc in docs if "seq" in doc}


@pytest.fixture
async def rolled(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> tuple[MongoSessionRepository, str, list[SessionEvent]]:
    """A store and a session whose oldest messages (with drawn ids) are below the tail, their
    registrations let go of."""
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await chat(service, s)
    log = await service.get_events(s, EventFilter.all())
    assert len(log) == 2 * TURNS
    return repo, s, log


async def test_messages_below_the_tail_keep_no_registration(
    mongo_db: AsyncDatabase[dict[str, Any]],
    rolled: tuple[MongoSessionRepository, str, list[SessionEvent]],
) -> None:
    """Every drawn id stored below the tail has lost its registration; the tail's keep theirs."""
    _, s, log = rolled
    ids = {e.id for e in log}
    assert all(is_drawn(i) for i in ids)
    stored_below = await below(mongo_db, s)
    held = await registered(mongo_db, s)
    assert len(stored_below) >= 64
    assert not stored_below & held
    assert ids - stored_below <= held  # the tail's ids are still registered


async def test_a_replay_or_a_copy_of_a_let_go_event_is_told_apart_from_many_tasks_at_once(
    mongo_db: AsyncDatabase[dict[str, Any]],
    rolled: tuple[MongoSessionRepository, str, list[SessionEvent]],
) -> None:
    """Sixteen tasks through a store that drew nothing (another process) append events whose
    registrations were let go of: again to their session (replays: nothing stored twice) and
    as copies to another session (each raises `EventIdConflict` naming the owner, and nothing
    is stored there)."""
    repo, s, log = rolled
    other_session = (await DefaultSessionService(repo).create(CreateSessionRequest(user_id="u"))).id
    stored_below = await below(mongo_db, s)
    old = [e for e in log if e.id in stored_below][:8]
    assert len(old) == 8
    other = MongoSessionRepository(mongo_db)  # no reservations, no hints
    outcomes: list[str] = []

    async def replay(event: SessionEvent) -> None:
        await other.append_event(event)
        outcomes.append("replayed")

    async def copy(event: SessionEvent) -> None:
        with pytest.raises(EventIdConflict) as info:
            await other.append_event(event.model_copy(update={"session_id": other_session}))
        assert info.value.owner_session_id == s
        outcomes.append("refused")

    await asyncio.gather(*(replay(e) for e in old), *(copy(e) for e in old))
    assert sorted(outcomes) == ["refused"] * 8 + ["replayed"] * 8
    again = await other.find_events(s, EventFilter.all())
    assert [e.id for e in again] == [e.id for e in log]
    assert await other.find_events(other_session, EventFilter.all()) == []
    # and in one batch with a new event: the replay is skipped, the new one stored once
    new = SessionEvent(session_id=s, message=UserMessage(text="new"))
    assert await other.append_events(s, [old[0], new])
    assert [e.id for e in await other.find_events(s, EventFilter.all())] == [
        *(e.id for e in log),
        new.id,
    ]


async def test_a_deleted_sessions_let_go_ids_are_free_again(
    mongo_db: AsyncDatabase[dict[str, Any]],
    rolled: tuple[MongoSessionRepository, str, list[SessionEvent]],
) -> None:
    """Deleting the session removes its events, so their ids are no one's (as registered ids
    of a deleted session are)."""
    repo, s, log = rolled
    stored_below = await below(mongo_db, s)
    event = next(e for e in log if e.id in stored_below)
    await repo.delete(s)
    service = DefaultSessionService(repo)
    fresh = (await service.create(CreateSessionRequest(user_id="u"))).id
    await repo.append_event(event.model_copy(update={"session_id": fresh}))
    assert [e.id for e in await repo.find_events(fresh, EventFilter.all())] == [event.id]


async def test_closing_the_store_lets_go_of_what_waits(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """A roll-forward's registrations wait for a quiet commit; closing the store lets go of
    them at once."""
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await chat(service, s, turns=48)  # the 96th message rolls forward: no commit after it
    stored_below = await below(mongo_db, s)
    assert stored_below
    assert stored_below <= await registered(mongo_db, s)
    await repo.aclose()
    assert not stored_below & await registered(mongo_db, s)
