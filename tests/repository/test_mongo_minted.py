"""Ids the library draws for a write are committed unregistered, on the test server, and still
never end up in two sessions.

``DefaultSessionService.append_message`` without an ``event_id`` (and the advisors' random ids)
declare their ids minted; the store then commits them in one command, and registers them only
when roll-forward moves them out of the session document, where the unique tail index no
longer guards them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventIdConflict,
    MongoSessionRepository,
    UserMessage,
)
from asyncsession.repository._mongo_codec import new_token


@pytest.fixture
async def repo(mongo_db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return repository


async def registered(repo: MongoSessionRepository, session_id: str) -> set[str]:
    docs = await repo._store.event_ids.find({"session_id": session_id}).to_list(None)
    return {doc["_id"] for doc in docs}


async def test_minted_ids_are_registered_only_when_they_leave_the_tail(
    repo: MongoSessionRepository,
) -> None:
    """While in the session document, a minted id has no registration; once rolled forward
    it has, for its session; an id the caller gave is registered at once."""
    service = DefaultSessionService(repo)
    session = await service.create(CreateSessionRequest(user_id="u"))
    s = session.id
    first = await service.append_message(s, UserMessage(text="first"))
    given = await service.append_message(s, UserMessage(text="given"), event_id=f"{s}-given")
    assert await registered(repo, s) == {given.id}
    later = [await service.append_message(s, AssistantMessage(text=f"m{i}")) for i in range(140)]
    log = await service.get_events(s, EventFilter.all())
    assert [e.id for e in log] == [first.id, given.id, *(e.id for e in later)]
    doc = await repo._store.sessions.find_one({"_id": s}, {"tail._id": 1})
    assert doc is not None
    in_tail = {entry["_id"] for entry in doc["tail"]}
    assert first.id not in in_tail
    rolled = {e.id for e in log} - in_tail
    assert rolled <= await registered(repo, s)
    assert not (await registered(repo, s) - {given.id}) & in_tail


async def test_a_copy_registered_while_the_original_sat_in_its_tail_is_fenced_off(
    repo: MongoSessionRepository,
) -> None:
    """Another session's attempt registered a copy of a minted id while it was only in its own
    tail (so it was not registered): that attempt can never commit. Roll-forward fences it and
    takes the registration over, and a retry of the copy is refused."""
    service = DefaultSessionService(repo)
    a = (await service.create(CreateSessionRequest(user_id="u"))).id
    b = (await service.create(CreateSessionRequest(user_id="u"))).id
    original = await service.append_message(a, UserMessage(text="original"))
    token = new_token()
    assert await repo._writer.ids.register(b, [original.id], token) == []  # the copy's attempt
    for i in range(140):  # roll the original out of a's tail
        await service.append_message(a, AssistantMessage(text=f"m{i}"))
    owner = await repo._store.event_ids.find_one({"_id": original.id})
    assert owner is not None
    assert owner["session_id"] == a
    b_doc = await repo._store.sessions.find_one({"_id": b}, {"fences": 1})
    assert b_doc is not None
    assert token in b_doc["fences"]
    with pytest.raises(EventIdConflict) as info:
        await repo.append_event(original.model_copy(update={"session_id": b}))
    assert info.value.owner_session_id == a
    assert await repo.find_events(b, EventFilter.all()) == []


async def test_many_tasks_append_minted_messages_each_once_in_order(
    repo: MongoSessionRepository,
) -> None:
    """Sixteen tasks on four sessions append 40 messages each, past several roll-forwards:
    every message is stored once, each task's in its order, and every rolled id is registered
    for its own session."""
    service = DefaultSessionService(repo)
    sessions = [(await service.create(CreateSessionRequest(user_id="u"))).id for _ in range(4)]

    async def writer(s: str, w: int) -> list[str]:
        return [
            (await service.append_message(s, UserMessage(text=f"w{w}-{i:02d}"))).id
            for i in range(40)
        ]

    ids = await asyncio.gather(*(writer(s, w) for s in sessions for w in range(4)))
    for k, s in enumerate(sessions):
        log = await service.get_events(s, EventFilter.all())
        assert len(log) == len({e.id for e in log}) == 160
        for w in range(4):
            assert [e.id for e in log if (e.text or "").startswith(f"w{w}-")] == ids[k * 4 + w]
        doc = await repo._store.sessions.find_one({"_id": s}, {"tail._id": 1})
        assert doc is not None
        rolled = {e.id for e in log} - {entry["_id"] for entry in doc["tail"]}
        assert rolled
        assert rolled <= await registered(repo, s)


async def test_a_store_that_did_not_create_the_indexes_looks_the_tail_index_up_once(
    repo: MongoSessionRepository, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """A web process whose store never ran ``ensure_indexes`` finds the unique tail index at its
    first minted append and skips the registry; without the index every id is registered."""
    other = MongoSessionRepository(mongo_db)  # another process: no ensure_indexes of its own
    service = DefaultSessionService(other)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    await service.append_message(s, UserMessage(text="one"))
    assert other._store.tail_index is True
    assert await registered(repo, s) == set()

    await mongo_db["sessions"].drop_index("tail_event_ids_unique")
    bare = MongoSessionRepository(mongo_db)
    event = await DefaultSessionService(bare).append_message(s, UserMessage(text="two"))
    assert bare._store.tail_index is False
    assert await registered(repo, s) == {event.id}
