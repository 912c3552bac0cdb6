"""Drawn ids are stored in the events collection as binary UUIDs, and read back as the text.

The unit half pins the form (`stored_id`, `loaded_id`); the server half shows that a long
session's events below the tail carry binary ``_id``s while ids of the caller's stay text, and
that reads, replays, compaction below the tail and user reads see the same ids and events
through a client that decodes binary UUIDs to ``uuid.UUID`` as through one that does not.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from bson.binary import UUID_SUBTYPE, Binary
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    CompactionPlan,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    SessionEvent,
    UserMessage,
)
from asyncsession.repository.mongo._drawn import (
    is_drawn,
    loaded_id,
    loaded_ids,
    new_drawn_id,
    stored_id,
    stored_ids,
)

TURNS = 60  # 120 messages: the oldest are rolled below the tail


def test_a_drawn_id_is_stored_as_the_16_bytes_of_its_uuid_and_read_back_the_same() -> None:
    for _ in range(1000):
        event_id = new_drawn_id()
        assert is_drawn(event_id)
        value = stored_id(event_id)
        assert isinstance(value, Binary)
        assert value.subtype == UUID_SUBTYPE
        assert bytes(value) == uuid.UUID(event_id).bytes
        assert loaded_id(value) == event_id
        assert loaded_id(uuid.UUID(event_id)) == event_id  # a client decoding to uuid.UUID


@pytest.mark.parametrize(
    "event_id",
    [
        "3b241101-e2bb-4255-8caf-4136c566a962",  # SessionEvent's own ids: version 4
        "3B241101-E2BB-8255-8CAF-4136C566A962",  # the drawn format, but not canonical text
        "0000000-0000-8000-0000-0000000000000",  # a dash out of place
        "zzzzzzzz-zzzz-8zzz-zzzz-zzzzzzzzzzzz",  # the format's dashes and version, not hex
        "{3b24101-e2bb-8255-8caf-4136c566a96}",  # 36 characters, the format's, not a UUID
        "msg-1",
        "",
    ],
)
def test_every_other_id_is_stored_as_its_text(event_id: str) -> None:
    assert stored_id(event_id) == event_id
    assert isinstance(stored_id(event_id), str)
    assert loaded_id(stored_id(event_id)) == event_id


def test_many_ids_keep_their_order_and_documents_are_read_back_in_place() -> None:
    ids = [new_drawn_id(), "mine", new_drawn_id()]
    values = stored_ids(ids)
    assert [loaded_id(v) for v in values] == ids
    docs: list[dict[str, Any]] = [{"_id": v} for v in values] + [{"seq": 1}]
    loaded_ids(docs)
    assert docs == [{"_id": ids[0]}, {"_id": "mine"}, {"_id": ids[2]}, {"seq": 1}]


@pytest.mark.parametrize("value", [7, b"0123456789abcdef", Binary(b"0123456789abcdef", 0)])
def test_what_is_no_stored_id_is_refused(value: object) -> None:
    with pytest.raises(TypeError, match="not an event id"):
        loaded_id(value)


async def test_below_the_tail_drawn_ids_are_binary_and_every_reader_sees_the_same_log(
    mongo_db: AsyncDatabase[dict[str, Any]], mongo_uri: str
) -> None:
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    service = DefaultSessionService(repo)
    s = (await service.create(CreateSessionRequest(user_id="u"))).id
    mine = SessionEvent(session_id=s, message=UserMessage(text="the caller's id"))
    await repo.append_event(mine)
    for turn in range(TURNS):
        await service.append_message(s, UserMessage(text=f"q{turn}"))
        await service.append_message(s, UserMessage(text=f"a{turn}"))
    log = await repo.find_events(s, EventFilter.all())
    assert len(log) == 2 * TURNS + 1
    assert log[0].id == mine.id
    assert all(is_drawn(e.id) for e in log[1:])

    raw = await mongo_db["session_events"].find({"session_id": s}).to_list(None)
    assert len(raw) >= 64
    forms = {loaded_id(doc["_id"]): doc["_id"] for doc in raw}
    assert isinstance(forms.pop(mine.id), str)
    assert forms
    assert all(isinstance(v, Binary) and v.subtype == UUID_SUBTYPE for v in forms.values())
    assert set(forms) <= {e.id for e in log}

    # A client that decodes binary UUIDs to uuid.UUID, through a store that drew nothing.
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, uuidRepresentation="standard"
    )
    try:
        other = MongoSessionRepository(client[mongo_db.name])
        assert await other.find_events(s, EventFilter.all()) == log
        assert await other.find_events_by_user_id("u", EventFilter.all()) == log
        below = [e for e in log if e.id in forms]
        # replays of events below the tail store nothing
        await other.append_events(s, below[:4])
        assert await other.find_events(s, EventFilter.all()) == log
        # compaction below the tail, by id: archived in place, nothing reordered or lost
        version = await other.get_event_version(s)
        archive = frozenset(e.id for e in below[:10])
        assert await other.apply_compaction(s, CompactionPlan(archive_ids=archive), version)
        after = await repo.find_events(s, EventFilter.all())
        assert [e.id for e in after] == [e.id for e in log]
        assert {e.id for e in after if e.archived} == archive
        active = await other.find_events(s, EventFilter(exclude_archived=True))
        assert [e.id for e in active] == [e.id for e in log if e.id not in archive]
    finally:
        await client.close()
