"""Reads and commits of different sessions due at once go as one command (`mongo._batch`).

On the test server: what is batched and what is not, a batch whose statements do not all
match, cancellation, and whole turns of many concurrent sessions through the repository. The
driver's error shapes (a statement's write error, a write concern error, a lost connection)
cannot be made to happen on demand, so those few tests use a collection double.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from command_counting import HANDSHAKES, CommandCounter, counted_repository
from pymongo import AsyncMongoClient, UpdateOne, monitoring
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import AutoReconnect, BulkWriteError, WriteConcernError, WriteError
from pymongo.results import BulkWriteResult, UpdateResult

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    SessionEvent,
    UserMessage,
)
from asyncsession.repository import draw_event_id
from asyncsession.repository.mongo._batch import FindBatcher, UpdateBatcher

Doc = dict[str, Any]


class Statements(monitoring.CommandListener):
    """The commands sent, with how many statements (or ids) each carried."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, int]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        name = event.command_name
        if name in HANDSHAKES:
            return
        if name == "update":
            self.sent.append((name, len(event.command["updates"])))
        elif name == "find":
            ids: Any = event.command["filter"]["_id"]
            self.sent.append((name, 1 if isinstance(ids, str) else len(ids["$in"])))
        else:
            self.sent.append((name, 1))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def docs(mongo_uri: str) -> AsyncIterator[tuple[AsyncCollection[Doc], Statements]]:
    """A collection of ten documents ``d0``..``d9`` at version 0, on a client that records."""
    listener = Statements()
    client: AsyncMongoClient[Doc] = AsyncMongoClient(mongo_uri, event_listeners=[listener])
    name = f"t_{uuid.uuid4().hex[:16]}"
    collection = client[name]["docs"]
    await collection.insert_many([{"_id": f"d{i}", "version": 0} for i in range(10)])
    listener.sent.clear()
    try:
        yield collection, listener
    finally:
        await client.drop_database(name)
        await client.close()


def bump(doc_id: str, version: int) -> tuple[Doc, Doc]:
    """A guarded update: from ``version`` to the next."""
    return {"_id": doc_id, "version": version}, {"$inc": {"version": 1}}


async def until(condition: Callable[[], bool]) -> None:
    """Let the other tasks run until ``condition`` holds (scheduling, not time)."""
    for _ in range(1000):
        if condition():
            return
        await asyncio.sleep(0)
    raise AssertionError("the condition never held")


async def versions(collection: AsyncCollection[Doc]) -> dict[str, int]:
    return {doc["_id"]: doc["version"] async for doc in collection.find({})}


async def test_updates_due_while_one_is_on_the_wire_go_as_one_command(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=1)
    matched = await asyncio.gather(*(batcher.update_one(*bump(f"d{i}", 0)) for i in range(9)))
    assert matched == [True] * 9
    # the first goes alone at once; the eight due meanwhile go together when it is answered
    assert listener.sent == [("update", 1), ("update", 8)]
    assert batcher.batches == 1
    assert await versions(collection) == {f"d{i}": 1 if i < 9 else 0 for i in range(10)}


async def test_as_many_as_max_in_flight_go_alone_and_the_rest_wait_for_a_free_slot(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=2)
    matched = await asyncio.gather(*(batcher.update_one(*bump(f"d{i}", 0)) for i in range(8)))
    assert matched == [True] * 8
    # two alone at once; the six due meanwhile in the slot the first answer frees (the second
    # may reach the wire after the batch: it waits for a connection of its own)
    assert sorted(listener.sent) == [("update", 1), ("update", 1), ("update", 6)]


async def test_one_caller_alone_sends_its_update_at_once_every_time(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=1)
    for version in range(5):
        assert await batcher.update_one(*bump("d0", version))
    assert not await batcher.update_one(*bump("d0", 0))  # a stale guard: no match
    assert listener.sent == [("update", 1)] * 6
    assert batcher.batches == 0


async def test_a_batch_whose_guards_do_not_all_match_tells_every_caller_no(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=1)
    calls = [bump("d0", 0), bump("d1", 0), bump("d2", 7), bump("d3", 0), bump("d4", 0)]
    matched = await asyncio.gather(*(batcher.update_one(*call) for call in calls))
    # d0 went alone; of the batch d1-d4 the server says only "three matched", not which
    assert matched == [True, False, False, False, False]
    assert listener.sent == [("update", 1), ("update", 4)]
    # told no, d1, d3 and d4 did commit: their callers find out by reading (see below)
    assert await versions(collection) == {
        **{f"d{i}": 0 for i in range(10)},
        **{"d0": 1, "d1": 1, "d3": 1, "d4": 1},
    }


async def test_two_updates_of_one_document_never_share_a_batch(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=1)
    calls = [bump("d0", 0), bump("d0", 1), bump("d1", 0), bump("d0", 2), bump("d2", 0)]
    matched = await asyncio.gather(*(batcher.update_one(*call) for call in calls))
    assert matched == [True] * 5
    assert listener.sent == [("update", 1), ("update", 3), ("update", 1)]
    assert (await versions(collection))["d0"] == 3


async def test_a_queued_update_whose_caller_is_cancelled_is_still_sent(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = UpdateBatcher(lambda: collection, max_in_flight=1)
    first = asyncio.create_task(batcher.update_one(*bump("d0", 0)))
    queued = asyncio.create_task(batcher.update_one(*bump("d1", 0)))
    await until(lambda: bool(batcher._due))  # pyright: ignore[reportPrivateUsage]
    queued.cancel()
    assert await first
    with pytest.raises(asyncio.CancelledError):
        await queued
    # the batch still goes: the write its caller started is finished, not abandoned
    follow_up = await batcher.update_one(*bump("d1", 1))
    assert follow_up
    assert listener.sent == [("update", 1), ("update", 1), ("update", 1)]
    assert (await versions(collection))["d1"] == 2


async def test_reads_due_at_once_go_as_one_find_per_projection(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, listener = docs
    batcher = FindBatcher(lambda: collection, max_in_flight=1)
    only_id = {"_id": 1}
    reads = [
        batcher.find_one("d0"),
        *(batcher.find_one(f"d{i}") for i in range(1, 6)),
        batcher.find_one("missing"),
        batcher.find_one("d7", only_id),
        batcher.find_one("d8", only_id),
        batcher.find_one("d1"),  # a second read of d1: the next batch
    ]
    found = await asyncio.gather(*reads)
    assert found == [
        *({"_id": f"d{i}", "version": 0} for i in range(6)),
        None,
        {"_id": "d7"},
        {"_id": "d8"},
        {"_id": "d1", "version": 0},
    ]
    assert listener.sent == [("find", 1), ("find", 6), ("find", 2), ("find", 1)]
    assert batcher.batches == 2


async def test_a_read_after_an_acknowledged_write_sees_it_while_other_reads_are_out(
    docs: tuple[AsyncCollection[Doc], Statements],
) -> None:
    collection, _ = docs
    updates, finds = (
        UpdateBatcher(lambda: collection, max_in_flight=1),
        FindBatcher(lambda: collection, max_in_flight=1),
    )
    first = asyncio.create_task(finds.find_one("d9"))
    await until(lambda: finds._in_flight > 0)  # pyright: ignore[reportPrivateUsage]
    assert await updates.update_one(*bump("d0", 0))
    assert await finds.find_one("d0") == {"_id": "d0", "version": 1}
    assert await first == {"_id": "d9", "version": 0}


class Double:
    """A collection whose ``bulk_write`` fails as told; single updates match."""

    def __init__(self, failure: BaseException) -> None:
        self.failure = failure

    async def update_one(self, guard: Doc, update: Doc) -> UpdateResult:
        await asyncio.sleep(0)  # on the wire: the calls after this one are queued
        return UpdateResult({"n": 1, "nModified": 1}, acknowledged=True)

    async def bulk_write(self, requests: list[UpdateOne], ordered: bool) -> BulkWriteResult:
        raise self.failure


async def batch_outcomes(failure: BaseException) -> list[bool | BaseException]:
    batcher = UpdateBatcher(lambda: Double(failure), max_in_flight=1)  # type: ignore[arg-type,return-value]
    calls = [bump(f"d{i}", 0) for i in range(4)]
    return await asyncio.gather(
        *(batcher.update_one(*call) for call in calls), return_exceptions=True
    )


async def test_a_statement_error_goes_to_its_caller_and_the_others_are_told_no() -> None:
    error = {"index": 1, "code": 2, "errmsg": "bad update"}
    outcomes = await batch_outcomes(BulkWriteError({"writeErrors": [error], "nMatched": 1}))
    assert [outcomes[0], outcomes[1], outcomes[3]] == [True, False, False]
    assert isinstance(outcomes[2], WriteError)
    assert outcomes[2].code == 2


async def test_a_write_concern_error_goes_to_every_caller_of_the_batch() -> None:
    concern = {"code": 64, "errmsg": "waiting for replication timed out"}
    outcomes = await batch_outcomes(BulkWriteError({"writeConcernErrors": [concern]}))
    assert outcomes[0] is True
    assert all(isinstance(o, WriteConcernError) for o in outcomes[1:])
    assert {o.code for o in outcomes[1:] if isinstance(o, WriteConcernError)} == {64}


async def test_a_lost_connection_goes_to_every_caller_of_the_batch() -> None:
    outcomes = await batch_outcomes(AutoReconnect("connection closed"))
    assert outcomes[0] is True
    assert all(isinstance(o, AutoReconnect) for o in outcomes[1:])


# --- through the repository ----------------------------------------------------------------------


@pytest.fixture
async def counted(mongo_uri: str) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    async with counted_repository(mongo_uri) as found:
        yield found


async def test_whole_turns_of_many_sessions_at_once_batch_and_store_each_message_once(
    counted: tuple[MongoSessionRepository, CommandCounter],
) -> None:
    repo, counter = counted
    service = DefaultSessionService(repo)
    sessions = [(await service.create(CreateSessionRequest(user_id="u"))).id for _ in range(24)]
    window = EventFilter(exclude_archived=True, active_view=True, last_n=20)
    turns = 12
    counter.clear()

    async def converse(session_id: str) -> None:
        for turn in range(turns):
            await service.get_events(session_id, window)
            await service.append_message(session_id, UserMessage(text=f"{session_id} q{turn}"))
            await service.append_message(session_id, AssistantMessage(text=f"{session_id} a{turn}"))

    async with asyncio.TaskGroup() as group:
        for session_id in sessions:
            group.create_task(converse(session_id))
    appends, reads = 2 * turns * len(sessions), turns * len(sessions)
    sent = counter.names
    # fewer commands than calls: some went in batches
    assert sent.count("update") + sent.count("findAndModify") < appends
    assert sent.count("find") < reads
    assert repo._writer.committer.updates.batches > 0  # pyright: ignore[reportPrivateUsage]
    assert repo._finds.batches > 0  # pyright: ignore[reportPrivateUsage]
    for session_id in sessions:
        texts = [e.message.text for e in await service.get_events(session_id) if e.message]
        expected = [f"{session_id} {kind}{t}" for t in range(turns) for kind in ("q", "a")]
        assert texts == expected


async def test_a_commit_its_batch_said_no_to_is_found_stored_once(mongo_uri: str) -> None:
    async with counted_repository(mongo_uri) as (repo, _):
        database = repo._store.sessions.database  # pyright: ignore[reportPrivateUsage]
        other = MongoSessionRepository(database)
        service = DefaultSessionService(repo)
        ids = [(await service.create(CreateSessionRequest(user_id="u"))).id for _ in range(5)]

        async def event(sid: str, text: str) -> SessionEvent:
            # drawn from the store: registered ahead, so the append is the commit alone
            return SessionEvent(
                id=await draw_event_id(repo, sid), session_id=sid, message=UserMessage(text=text)
            )

        for sid in ids:  # this repository now knows each tail has room
            await repo.append_events(sid, [await event(sid, "first")])
        await other.append_events(
            ids[1], [SessionEvent(session_id=ids[1], message=UserMessage(text="other"))]
        )
        # ids[1] is at version 2 now: its append below expects 1 and fails its guard, so its
        # batch (ids[1], ids[3] and ids[4], behind ids[0] and ids[2] on the wire; two commands
        # go alone at most) does not fully match
        order = [ids[0], ids[2], ids[1], ids[3], ids[4]]
        seconds = [await event(sid, "second") for sid in order]
        updates = repo._writer.committer.updates  # pyright: ignore[reportPrivateUsage]
        outcomes = await asyncio.gather(
            *(repo.append_events(e.session_id, [e], 1) for e in seconds)
        )
        assert outcomes == [True, True, False, True, True]
        assert (updates.batches, updates.short) == (1, 1)
        for sid in ids:
            texts = [
                e.message.text for e in await repo.find_events(sid, EventFilter()) if e.message
            ]
            assert texts == (["first", "other"] if sid == ids[1] else ["first", "second"])
            assert await repo.get_event_version(sid) == 2
        # and a retry of each stored append is a no-op
        for e in (e for e in seconds if e.session_id != ids[1]):
            assert await repo.append_events(e.session_id, [e]) is True
            assert await repo.get_event_version(e.session_id) == 2
