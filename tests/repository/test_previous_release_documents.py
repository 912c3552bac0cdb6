"""Documents the previous release's MongoDB store wrote keep reading with this one.

``data/previous_release_documents.json`` holds the raw documents of three sessions written by
the previous release's code (``data/make_previous_release_documents.py`` says how): metadata
as JSON text and no index entries, an event too big for the session document, a compaction
that archived two turns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bson import json_util
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    SessionAttributes,
    UserMessage,
)

DOCUMENTS = Path(__file__).with_name("data") / "previous_release_documents.json"


async def _restored(db: AsyncDatabase[dict[str, Any]]) -> MongoSessionRepository:
    dump = json_util.loads(DOCUMENTS.read_text(encoding="utf-8"))
    for name, docs in dump.items():
        await db[name].insert_many(docs)
    repo = MongoSessionRepository(db)
    await repo.ensure_indexes()
    return repo


async def test_sessions_and_logs_of_the_previous_release_decode(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    repo = await _restored(mongo_db)
    session = await repo.find_by_id("old-0")
    assert session is not None
    assert session.user_id == "alice"
    assert session.metadata == {"agent_name": "support-bot", "tags": ["previous"], "n": 0}
    every = await repo.find_events("old-1", EventFilter.all())
    assert [e.id for e in every] == [
        "old-1-sys",
        *(f"old-1-{who}{turn}" for turn in range(4) for who in "ua"),
    ]
    assert every[3].message is not None
    assert len(every[3].message.text) > 20_000
    active = await repo.find_events("old-0", EventFilter(active_view=True, exclude_archived=True))
    kept = ["old-0-u2", "old-0-a2", "old-0-u3", "old-0-a3"]
    assert [e.id for e in active] == ["old-0-sys", *kept]
    archived = [e for e in await repo.find_events("old-0", EventFilter.all()) if e.archived]
    assert [e.id for e in archived] == ["old-0-u0", "old-0-a0", "old-0-u1", "old-0-a1"]


async def test_previous_release_sessions_are_found_by_principal_and_once_saved_by_agent(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    repo = await _restored(mongo_db)
    by_owner = await repo.find_by_metadata(SessionAttributes.PRINCIPAL_NAME, "alice")
    assert [s.id for s in by_owner] == ["old-0", "old-1"]
    # Written before index entries existed: not found by agent name until saved again.
    assert await repo.find_by_metadata(SessionAttributes.AGENT_NAME, "support-bot") == []
    for session in by_owner:
        await repo.save(session)
    found = await repo.find_by_metadata(SessionAttributes.AGENT_NAME, "support-bot")
    assert [s.id for s in found] == ["old-0", "old-1"]


async def test_a_previous_release_log_takes_new_appends(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    repo = await _restored(mongo_db)
    service = DefaultSessionService(repo)
    before = await repo.get_event_version("old-2")
    await service.append_message("old-2", UserMessage(text="and one more"))
    assert await repo.get_event_version("old-2") == before + 1
    last = (await repo.find_events("old-2", EventFilter.last_n(1)))[-1]
    assert last.message is not None
    assert last.message.text == "and one more"
