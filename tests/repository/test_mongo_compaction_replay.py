"""A compaction whose reply was lost: its retry (the same commit at the same expected version)
is a replay and reports it applied, on the test server with the driver's own retries off."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.errors import AutoReconnect

from asyncsession import AssistantMessage, EventFilter, EventType
from asyncsession.events import Session
from asyncsession.exceptions import StorageError
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing._contract._support import boundary, synthetic, user


class LoseCompactionReply:
    """Wraps the commits collection: the next compaction commit takes effect, then its reply
    is lost (the connection drops)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner
        self.armed = True

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def insert_one(self, doc: Any, **kwargs: Any) -> Any:
        if self.armed and doc["events"][-1]["type"] == EventType.COMPACTION.name:
            self.armed = False
            await self._inner.insert_one(doc, **kwargs)
            raise AutoReconnect("injected: connection lost after the compaction committed")
        return await self._inner.insert_one(doc, **kwargs)


@pytest.fixture
async def repo(mongo_uri: str) -> Any:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, retryWrites=False, retryReads=False
    )
    repository = MongoSessionRepository(client["compaction_replay"])
    await repository.ensure_indexes()
    yield repository
    await client.drop_database("compaction_replay")
    await client.close()


@pytest.mark.parametrize("length", [3, 80])
async def test_a_compaction_retried_after_a_lost_reply_reports_it_applied(
    repo: MongoSessionRepository, length: int
) -> None:
    """The first attempt committed but raised; the identical retry returns ``True``, writes
    nothing more, and the log holds the summary once."""
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    events = [user(s, f"u{i}") for i in range(length)]
    for event in events:
        await repo.append_event(event)
    version = await repo.get_event_version(s)
    summary = synthetic(s, AssistantMessage(text="summary"))
    commit = [summary, boundary(s, [summary, *events[2:]], events[:2])]
    repo._store.commits = LoseCompactionReply(repo._store.commits)  # type: ignore[assignment]
    with pytest.raises(StorageError) as info:
        await repo.append_events(s, commit, version)
    assert isinstance(info.value.__cause__, AutoReconnect)
    assert await repo.get_event_version(s) == version + 1  # it did commit

    assert await repo.append_events(s, commit, version)  # the retry: applied
    assert await repo.append_events(s, commit, version)  # and again
    assert await repo.get_event_version(s) == version + 1
    log = await repo.find_events(s, EventFilter.all())
    assert [e.id for e in log if e.is_synthetic] == [summary.id]
    assert [e.id for e in log if e.archived] == [events[0].id, events[1].id]

    # An append in between does not hide it; another compaction at that version is refused.
    await repo.append_event(user(s, "later"))
    assert await repo.append_events(s, commit, version)
    other = [boundary(s, events[3:], events[:3])]
    assert not await repo.append_events(s, other, version)
    assert await repo.get_event_version(s) == version + 2


async def test_a_retry_of_an_older_compaction_changes_nothing(
    repo: MongoSessionRepository,
) -> None:
    """After a newer compaction, a retry of the first is still a replay of its stored commit:
    ``True``, and the newer view stays."""
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    a, b, c = user(s, "a"), user(s, "b"), user(s, "c")
    await repo.append_events(s, [a, b, c])
    first = [boundary(s, [b, c], [a])]
    assert await repo.append_events(s, first, 1)
    second = [boundary(s, [c], [b])]
    assert await repo.append_events(s, second, 2)
    assert await repo.append_events(s, first, 1)
    assert await repo.get_event_version(s) == 3
    assert [e.text for e in await repo.find_events(s, EventFilter.active())] == ["c"]
