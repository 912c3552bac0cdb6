"""Write ``previous_release_documents.json``: the raw documents the previous release's MongoDB
store wrote, for ``test_previous_release_documents.py``.

Run it with the previous release's code on the path, not this checkout's, e.g.::

    git archive <previous-release> asyncsession | tar -x -C /tmp/previous
    PYTHONPATH=/tmp/previous python tests/repository/data/make_previous_release_documents.py

It writes to mongomock-motor (no server), so the documents are those the store's own code
builds. Dates and ids are fixed; the write tokens are random.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bson import json_util
from mongomock_motor import AsyncMongoMockClient

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    MongoSessionRepository,
    Session,
    SessionEvent,
    SystemMessage,
    UserMessage,
)
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger

T0 = datetime(2026, 10, 1, 8, 0, tzinfo=UTC)
OUT = Path(__file__).with_name("previous_release_documents.json")


async def main() -> None:
    client: Any = AsyncMongoMockClient(tz_aware=True)
    db = client["previous"]
    repo = MongoSessionRepository(db)
    await repo.ensure_indexes()
    service = DefaultSessionService(repo)
    for n, agent in enumerate(["support-bot", "support-bot", "billing-bot"]):
        session = Session(
            id=f"old-{n}",
            user_id="alice" if n < 2 else "bob",
            created_at=T0 + timedelta(hours=n),
            expires_at=T0 + timedelta(days=60),
            metadata={"agent_name": agent, "tags": ["previous"], "n": n},
        )
        await repo.save(session)
        at = session.created_at
        events = [
            SessionEvent(
                id=f"old-{n}-sys",
                session_id=session.id,
                timestamp=at,
                message=SystemMessage(text="You are helpful."),
            )
        ]
        for turn in range(4):
            at += timedelta(minutes=1)
            text = f"question {turn} of session {n}" + ("x" * 20_000 if turn == 1 else "")
            events.append(
                SessionEvent(
                    id=f"old-{n}-u{turn}",
                    session_id=session.id,
                    timestamp=at,
                    message=UserMessage(text=text),
                )
            )
            events.append(
                SessionEvent(
                    id=f"old-{n}-a{turn}",
                    session_id=session.id,
                    timestamp=at,
                    message=AssistantMessage(text=f"answer {turn}"),
                )
            )
        for event in events:
            await repo.append_event(event)
        if n == 0:
            result = await service.compact(
                session.id, TurnCountTrigger(2), SlidingWindowCompactionStrategy(max_events=4)
            )
            assert result.applied
    dump = {
        name: [doc async for doc in db[name].find({}).sort("_id", 1)]
        for name in ("sessions", "session_events", "session_event_ids")
    }
    OUT.write_text(
        json_util.dumps(dump, indent=1, json_options=json_util.CANONICAL_JSON_OPTIONS) + "\n",
        encoding="utf-8",
    )


if __name__ == "__main__":
    asyncio.run(main())
