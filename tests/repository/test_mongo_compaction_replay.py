"""A compaction whose reply was lost: its retry (same plan, same expected version) reports it
applied, on the test server with the driver's own retries off."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import AutoReconnect

from asyncsession import AssistantMessage, CompactionPlan, EventFilter, Insert, StorageError
from asyncsession.events import Session
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing.contract import synthetic, user


class LoseCompactionReply:
    """Wraps the sessions collection: the next compaction commit takes effect, then its reply
    is lost (the connection drops)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def find_one_and_update(self, flt: Any, update: Any, **kwargs: Any) -> Any:
        if self.armed and "ck" in update.get("$set", {}):
            self.armed = False
            await self._inner.find_one_and_update(flt, update, **kwargs)
            raise AutoReconnect("injected: connection lost after the compaction committed")
        return await self._inner.find_one_and_update(flt, update, **kwargs)


@pytest.fixture
async def repo(mongo_uri: str) -> Any:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, retryWrites=False, retryReads=False
    )
    repository = MongoSessionRepository(client["compaction_replay"])
    await repository.ensure_indexes()
    yield repository
    await client.close()


@pytest.mark.parametrize("tail", [True, False], ids=["in the tail", "rolled forward"])
async def test_a_compaction_retried_after_a_lost_reply_reports_it_applied(
    repo: MongoSessionRepository, tail: bool
) -> None:
    """The first attempt committed but raised; the identical retry returns ``True``, writes
    nothing more, and the log holds the summary once."""
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    events = [user(s, f"u{i}") for i in range(3 if tail else 80)]
    for event in events:
        await repo.append_event(event)
    version = await repo.get_event_version(s)
    summary = synthetic(s, AssistantMessage(text="summary"))
    plan = CompactionPlan(
        archive_ids=frozenset({events[0].id, events[1].id}),
        inserts=(Insert.before(events[2].id, [summary]),),
    )
    repo._store.sessions = LoseCompactionReply(repo._store.sessions)
    with pytest.raises(StorageError) as info:
        await repo.apply_compaction(s, plan, version)
    assert isinstance(info.value.__cause__, AutoReconnect)
    assert await repo.get_event_version(s) == version + 1  # it did commit

    assert await repo.apply_compaction(s, plan, version)  # the retry: applied
    assert await repo.apply_compaction(s, plan, version)  # and again
    assert await repo.get_event_version(s) == version + 1
    log = await repo.find_events(s, EventFilter.all())
    assert [e.id for e in log if e.is_synthetic] == [summary.id]
    assert [e.id for e in log if e.archived] == [events[0].id, events[1].id]

    # An append in between does not hide it; a stale version of another plan is still False.
    await repo.append_event(user(s, "later"))
    assert await repo.apply_compaction(s, plan, version)
    other = CompactionPlan(archive_ids=frozenset({events[2].id}))
    assert not await repo.apply_compaction(s, other, version)
    equal = CompactionPlan(archive_ids=plan.archive_ids, inserts=plan.inserts)
    assert not await repo.apply_compaction(s, equal, version)  # another worker's call lost
    assert await repo.get_event_version(s) == version + 2


async def test_a_newer_compaction_means_the_older_call_is_only_stale(
    repo: MongoSessionRepository,
) -> None:
    """Only the newest compaction is remembered: after another one, a retry of the first is an
    ordinary stale call (``False``), and nothing changes."""
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    a, b, c = user(s, "a"), user(s, "b"), user(s, "c")
    await repo.append_events(s, [a, b, c])
    first = CompactionPlan(archive_ids=frozenset({a.id}))
    assert await repo.apply_compaction(s, first, 1)
    second = CompactionPlan(archive_ids=frozenset({b.id}))
    assert await repo.apply_compaction(s, second, 2)
    assert not await repo.apply_compaction(s, first, 1)
    assert await repo.apply_compaction(s, second, 2)
    assert await repo.get_event_version(s) == 3
