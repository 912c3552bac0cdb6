"""Fixtures of the command-line tests: a seeded database on the test server."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest

from asyncsession import (
    AssistantMessage,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.events import EventType


@pytest.fixture
async def seeded(mongo_uri: str) -> AsyncIterator[tuple[str, str]]:
    """A database with two sessions of alice (one long) and an expired one of bob."""
    db = f"cli_{uuid.uuid4().hex[:12]}"
    async with MongoSessionRepository.from_uri(mongo_uri, db) as repo:
        await repo.ensure_indexes()
        await repo.save(Session(id="long", user_id="alice"))
        await repo.save(Session(id="short", user_id="alice"))
        past = datetime.now(UTC) - timedelta(days=1)
        await repo.save(Session(id="old", user_id="bob", expires_at=past))
        events: list[SessionEvent] = []
        for turn in range(6):
            events.append(
                SessionEvent(session_id="long", message=UserMessage(text=f"question {turn}"))
            )
            events.append(
                SessionEvent(session_id="long", message=AssistantMessage(text=f"answer {turn}"))
            )
        await repo.append_events("long", events)
        await repo.append_event(
            SessionEvent(session_id="long", type=EventType.of("OPS.NOTE"), payload={"by": "ops"})
        )
        yield mongo_uri, db
        await repo._database.client.drop_database(db)  # pyright: ignore[reportPrivateUsage]
