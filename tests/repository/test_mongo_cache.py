"""The MongoDB store's per-process caches: bounded in bytes, never holding large bodies, never
handing out objects a caller could change for another caller."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    EventFilter,
    EventType,
    Session,
    SessionEvent,
    UsageError,
    UserMessage,
)
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._cache import ByteLRU, EventCache, fresh, hint_bytes, own
from asyncsession.repository.mongo._codec import INLINE_LIMIT
from asyncsession.repository.mongo._drawn import Reservations
from asyncsession.repository.mongo._hints import TailHints, Trim
from asyncsession.testing.contract import user

TS = datetime(2026, 1, 1, tzinfo=UTC)


def body(text: str) -> str:
    return json.dumps({"message": {"kind": "user", "text": text}, "metadata": {"k": [1]}})


def test_the_event_cache_stays_within_its_byte_budget() -> None:
    """10,000 distinct 8 KB events through a 1 MiB cache: it never holds more than 1 MiB."""
    cache = EventCache(1024 * 1024)
    for i in range(10_000):
        cache.event("s", f"e{i}", body(f"{i} " + "x" * 8000), False, TS, "USER")
        assert cache.bytes <= 1024 * 1024
    assert 50 <= len(cache) <= 128  # about 16 KB counted per event


def test_bodies_over_the_inline_limit_are_never_cached() -> None:
    """A 200 KB body is decoded for its reader and not held."""
    cache = EventCache()
    data = body("y" * 200_000)
    assert len(data) > INLINE_LIMIT
    first = cache.event("s", "big", data, False, TS, "USER")
    assert first.text == "y" * 200_000
    assert len(cache) == 0
    assert cache.bytes == 0


def test_a_zero_budget_caches_nothing() -> None:
    cache = EventCache(0)
    cache.event("s", "e", body("small"), False, TS, "USER")
    assert len(cache) == 0


def test_every_caller_gets_its_own_containers() -> None:
    """Changing an event's metadata, payload or message dicts never reaches the next caller:
    the cache hands out shared events, and readers hand out `own` copies of them."""
    cache = EventCache()
    data = json.dumps(
        {
            "message": {"kind": "user", "text": "hi", "extra": {"name": "n"}},
            "metadata": {"tags": ["a"], "deep": {"x": 1}},
        }
    )
    (first,) = own([cache.event("s", "e", data, False, TS, "USER")])
    first.metadata["tags"].append("changed")  # type: ignore[union-attr]
    first.metadata["new"] = True
    assert isinstance(first.message, UserMessage)
    first.message.extra["name"] = "changed"
    (second,) = own([cache.event("s", "e", data, False, TS, "USER")])
    assert second.metadata == {"tags": ["a"], "deep": {"x": 1}}
    assert isinstance(second.message, UserMessage)
    assert second.message.extra == {"name": "n"}
    assert len(cache) == 1  # the second read was a cache hit


def test_fresh_copies_containers_and_shares_the_rest() -> None:
    event = SessionEvent(
        session_id="s", type=EventType.of("ACME.X"), payload={"a": [{"b": 1}]}, metadata={}
    )
    copy = fresh(event)
    assert isinstance(copy, SessionEvent)
    assert copy == event
    assert copy.payload is not event.payload
    assert copy.payload is not None
    assert event.payload is not None
    assert copy.payload["a"] is not event.payload["a"]
    assert copy.metadata is not event.metadata
    assert copy.id is event.id


def test_the_hints_and_reservations_stay_within_their_byte_budgets() -> None:
    hints = TailHints(64 * 1024)
    reservations = Reservations(64 * 1024)
    for i in range(20_000):
        hints.note(f"session-{i:08d}" * 4, i % 90, False)
        ids = tuple(f"event-{i}-{j}" for j in range(64))
        cut = Trim(guard={"tn": 96}, ids=ids, changes={"$set": {}, "$inc": {}})
        hints.defer_trim(f"session-{i:08d}", cut)
        hints.owe_roll(f"session-{i:08d}")
        reservations.add(f"session-{i:08d}", [f"event-{i}-a", f"event-{i}-b"], "t")
        assert hints.bytes <= 64 * 1024
        assert reservations.bytes <= 64 * 1024
    assert hints.room("session-00019999" * 4, 1)  # the newest are kept
    assert not hints.room("session-00000000" * 4, 1)  # the oldest were evicted
    assert reservations.holds("session-00019999", ["event-19999-a"])
    trim = hints.take_trim("session-00019999")
    assert trim is not None
    assert trim.ids[0] == "event-19999-0"
    assert hints.take_trim("session-00000000") is None
    assert hints.take_owed("session-00019999")
    assert not hints.take_owed("session-00019999")  # taken once
    assert hint_bytes(32 * 1024 * 1024) == 2 * 1024 * 1024


def test_byte_lru_keeps_the_most_recently_used() -> None:
    lru: ByteLRU[str, int] = ByteLRU(300)
    for key in "abc":
        lru.put(key, 1, 100)
    assert lru.get("a") == 1  # a is now the newest
    lru.put("d", 1, 100)
    assert "b" not in lru
    assert {"a", "c", "d"} == {k for k in "abcd" if k in lru}
    lru.put("huge", 1, 301)
    assert "huge" not in lru
    assert lru.bytes == 300
    with pytest.raises(ValueError, match="max_bytes"):
        ByteLRU(-1)


@pytest.mark.parametrize("cache_bytes", [0, 4096, 32 * 1024 * 1024])
async def test_reads_through_the_store_never_share_mutable_objects(
    mongo_db: AsyncDatabase[dict[str, Any]], cache_bytes: int
) -> None:
    """On the test server: a caller that changes what a read returned (metadata, payload)
    changes nothing for the next read, whatever the cache's size."""
    repo = MongoSessionRepository(mongo_db, cache_bytes=cache_bytes)
    await repo.ensure_indexes()
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    await repo.append_events(s, [user(s, f"filler-{i}") for i in range(40)])
    events = [
        user(s, "hi", metadata={"tags": ["a"]}),
        SessionEvent(session_id=s, type=EventType.of("ACME.X"), payload={"n": [1, 2]}),
    ]
    await repo.append_events(s, events)
    reads = [
        lambda: repo.find_events(s, EventFilter.all()),
        lambda: repo.find_events(s, EventFilter.last_n(2)),  # the newest tail entries only
        lambda: repo.find_events_by_user_id("u", EventFilter.all()),
    ]
    for read in reads * 2:
        found = (await read())[-2:]
        assert found == events
        found[0].metadata["tags"].append("changed")  # type: ignore[union-attr]
        found[0].metadata["x"] = 1
        assert found[1].payload is not None
        found[1].payload["n"].append(3)  # type: ignore[union-attr]
    snapshot = await repo.read_snapshot(s, EventFilter.all())
    assert snapshot is not None
    assert list(snapshot.events[-2:]) == events
    assert repo._store.cache.bytes <= cache_bytes


def test_a_negative_cache_budget_is_refused(mongo_db: AsyncDatabase[dict[str, Any]]) -> None:
    with pytest.raises(UsageError, match="cache_bytes"):
        MongoSessionRepository(mongo_db, cache_bytes=-1)
