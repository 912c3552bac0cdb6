"""The ``COMPACTION`` record on MongoDB: what it adds to the stored documents, and that it reads
back typed after a round trip through BSON.

Run ``pytest -s tests/repository/test_mongo_compaction_record.py`` to see the figure.
"""

from __future__ import annotations

from typing import Any

import bson
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventType,
    UserMessage,
)
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.filters import EventFilter
from asyncsession.repository.mongo import MongoSessionRepository


async def _stored_bytes(db: AsyncDatabase[dict[str, Any]]) -> int:
    total = 0
    for name in await db.list_collection_names():
        async for doc in db[name].find({}):
            total += len(bson.encode(doc))
    return total


async def test_bytes_a_compaction_record_adds(mongo_db: AsyncDatabase[dict[str, Any]]) -> None:
    """A compaction of 24 messages down to 4 (no summary) is one commit holding its record;
    its size is bounded by the ids the record lists."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    service = DefaultSessionService(repository)
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for i in range(12):
        await service.append_message(session.id, UserMessage(text=f"question {i}"))
        await service.append_message(session.id, AssistantMessage(text=f"answer {i}"))
    before = await _stored_bytes(mongo_db)
    strategy = SlidingWindowCompactionStrategy(max_events=4)
    result = await service.compact(session.id, TurnCountTrigger(4), strategy)
    assert result.applied
    added = await _stored_bytes(mongo_db) - before

    log = await service.get_events(session.id)
    record = CompactionRecord.from_event(log[-1])  # typed after a BSON round trip
    assert len(record.covered) == 20
    assert len(record.kept) == 4
    assert record.view == record.kept
    assert [e.type for e in log if not e.is_message] == [EventType.COMPACTION]
    assert await service.get_events(session.id, EventFilter.active()) == log[-5:-1]
    ids = len(record.covered) + len(record.kept) + len(record.view)
    print(f"\nCOMPACTION record: {added} bytes added per compaction (24 messages, 20 covered)")
    assert 0 < added < 40 * ids + 600
