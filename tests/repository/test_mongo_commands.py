"""What the MongoDB store sends to the server, seen through PyMongo command monitoring.

Every command on the events collection must name the session (or the user's sessions), so a
cluster sharded on ``session_id`` sends it to one shard; the id registry is addressed by event id.
Operations cost a small, fixed number of commands whatever the length of the log.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import bson
import pytest
from pymongo import AsyncMongoClient, monitoring

from asyncsession import (
    AccessDenied,
    AssistantMessage,
    CompactionPlan,
    EventFilter,
    EventIdConflict,
    EventType,
    InMemorySessionRepository,
    Insert,
    Session,
    SessionEvent,
    UsageError,
    UserMessage,
)
from asyncsession.events import utc_now
from asyncsession.repository._turn import start_turn, supports_turns
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing.contract import assistant, synthetic, user

EVENTS, IDS, SESSIONS = "session_events", "session_event_ids", "sessions"
IGNORED = {"hello", "isMaster", "ismaster", "ping", "endSessions", "createIndexes"}
CURSOR = {"getMore", "killCursors"}  # continue a find that was checked already


class Recorder(monitoring.CommandListener):
    """Every command started, by collection."""

    def __init__(self) -> None:
        self.commands: list[tuple[str, str, dict[str, Any]]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in IGNORED:
            return
        target = event.command.get(event.command_name)
        collection = target if isinstance(target, str) else ""
        self.commands.append((event.command_name, collection, dict(event.command)))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass

    def take(self) -> list[tuple[str, str, dict[str, Any]]]:
        taken, self.commands = self.commands, []
        return taken


@pytest.fixture
def recorder() -> Recorder:
    return Recorder()


@pytest.fixture
async def repo(mongo_uri: str, recorder: Recorder) -> AsyncIterator[MongoSessionRepository]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[recorder]
    )
    name = f"cmd_{id(recorder):x}"
    repository = MongoSessionRepository(client[name])
    await repository.ensure_indexes()
    try:
        yield repository
    finally:
        await client.drop_database(name)
        await client.close()


def names_a_session(query: dict[str, Any]) -> bool:
    """Whether a query is bound to one session (or a set of them)."""
    if "session_id" in query:
        return True
    clauses = query.get("$or")
    return bool(clauses) and all("session_id" in clause for clause in clauses)


def queries(name: str, command: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The documents or filters a command addresses."""
    if name == "find":
        yield command["filter"]
    elif name == "insert":
        yield from command["documents"]
    elif name == "update":
        yield from (update["q"] for update in command["updates"])
    elif name == "delete":
        yield from (delete["q"] for delete in command["deletes"])
    elif name == "findAndModify":
        yield command["query"]
    elif name == "aggregate":
        yield command["pipeline"][0]["$match"]
    else:
        raise AssertionError(f"unexpected command {name}")


async def workload(repo: MongoSessionRepository) -> None:
    """Every operation of the store, on logs long enough to leave the session document."""
    a = Session(user_id="alice", expires_at=utc_now() - timedelta(seconds=1))
    b = Session(user_id="alice")
    await repo.save(a)
    assert await repo.save_if_absent(b)
    s = b.id
    events = [user(s, f"m{i} needle") for i in range(150)]
    for e in events[:40]:
        await repo.append_event(e)
    await repo.append_events(s, events[40:])
    await repo.append_events(s, [user(s, "late")], 0)
    await repo.append_event(events[3])
    with pytest.raises(EventIdConflict):
        await repo.append_event(events[5].model_copy(update={"session_id": a.id}))
    await repo.append_event(
        SessionEvent(session_id=s, type=EventType.of("ACME.BIG"), payload={"x": "y" * 40_000})
    )
    version = await repo.get_event_version(s)
    plan = CompactionPlan(
        archive_ids=frozenset(e.id for e in events[:100]),
        inserts=(
            Insert.before(events[100].id, [synthetic(s, AssistantMessage(text="summary"))]),
            Insert.before(events[10].id, [synthetic(s, UserMessage(text="early"))]),
            Insert.at_end([synthetic(s, AssistantMessage(text="end"))]),
        ),
    )
    assert await repo.apply_compaction(s, plan, version)
    for f in (
        EventFilter.all(),
        EventFilter.active(),
        EventFilter.last_n(20),
        EventFilter.last_n(140),
        EventFilter(event_types=[EventType.of("ACME.BIG")], last_n=1),
        EventFilter.active().merge(EventFilter.last_n(90)),
        EventFilter.keyword_search("needle", page=3),
        EventFilter.pattern_search(r"m1\d needle"),
        EventFilter(page=2, page_size=30),
        EventFilter(from_=utc_now() - timedelta(hours=1), last_n=5),
    ):
        await repo.find_events(s, f)
    await repo.read_snapshot(s, EventFilter.last_n(10))
    for f in (EventFilter.all(), EventFilter.last_n(3), EventFilter(page=1, page_size=5)):
        await repo.find_events_by_user_id("alice", f)
    await start_turn(repo, s, [user(s, "hi")], EventFilter.active(), reserve_event_ids=["reply"])
    await repo.append_event(
        SessionEvent(id="reply", session_id=s, message=AssistantMessage(text="hello"))
    )
    await repo.find_by_id(s)
    await repo.find_by_user_id("alice")
    assert await repo.delete_expired_sessions(utc_now()) == 1
    await repo.delete(s)


async def test_every_events_command_names_its_session(
    repo: MongoSessionRepository, recorder: Recorder
) -> None:
    """A shard key on ``session_id`` routes every events command; the registry goes by id."""
    await workload(repo)
    commands = recorder.take()
    seen = {(name, collection) for name, collection, _ in commands}
    assert {("find", EVENTS), ("insert", EVENTS), ("update", EVENTS), ("delete", EVENTS)} <= seen
    for name, collection, command in commands:
        if name in CURSOR:
            continue
        if collection == EVENTS:
            for query in queries(name, command):
                assert names_a_session(query), (name, query)
        elif collection == IDS:
            for query in queries(name, command):
                assert "_id" in query or "session_id" in query, (name, query)
        else:
            assert collection == SESSIONS, (name, collection)


def count(recorder: Recorder) -> int:
    return len([c for c in recorder.take() if c[0] not in CURSOR])


async def test_steady_state_costs(repo: MongoSessionRepository, recorder: Recorder) -> None:
    """Appends, reads and a chat turn cost a fixed number of commands at any log length."""
    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    await repo.append_events(s, [user(s, f"seed-{i}") for i in range(1200)])
    recorder.take()

    await repo.append_event(user(s, "one"))
    assert count(recorder) <= 2
    version = await repo.get_event_version(s)
    recorder.take()
    assert await repo.append_events(s, [user(s, "two")], version)
    assert count(recorder) == 2
    assert len(await repo.find_events(s, EventFilter.last_n(20))) == 20
    assert count(recorder) == 1

    window = EventFilter.active().merge(EventFilter.last_n(20))
    costs = []
    for turn in range(40):
        reply_id = f"reply-{turn}"
        snapshot = await start_turn(
            repo, s, [user(s, f"q{turn}")], window, user_id="bob", reserve_event_ids=[reply_id]
        )
        assert len(snapshot.events) >= 20
        await repo.append_event(
            SessionEvent(id=reply_id, session_id=s, message=AssistantMessage(text=f"a{turn}"))
        )
        costs.append(count(recorder))
    assert sorted(costs)[len(costs) // 2] == 3
    assert sum(costs) / len(costs) < 3.4

    for kept in (10, 8):  # the first compaction catches up on the whole log, then steady state
        version = await repo.get_event_version(s)
        active = await repo.find_events(s, EventFilter.active())
        summary = synthetic(s, AssistantMessage(text=f"sum{kept}"))
        plan = CompactionPlan(
            archive_ids=frozenset(e.id for e in active[:-kept]),
            inserts=(Insert.before(active[-kept].id, [summary]),),
        )
        recorder.take()
        assert await repo.apply_compaction(s, plan, version)
        cost = count(recorder)
    assert cost <= 4
    now = await repo.find_events(s, EventFilter.active())
    assert [e.text for e in now] == ["sum8", *(e.text for e in active[-8:])]
    assert count(recorder) == 1


async def test_a_last_n_read_is_bounded_by_position_ranges(
    repo: MongoSessionRepository, recorder: Recorder
) -> None:
    """Reads below the tail scan bounded ranges of the index, never sort-with-limit."""
    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    await repo.append_events(s, [user(s, f"m{i}") for i in range(500)])
    await repo.append_event(user(s, "last"))
    recorder.take()
    window = await repo.find_events(s, EventFilter.last_n(100))
    assert [e.text for e in window][-1] == "last"
    assert len(window) == 100
    commands = recorder.take()
    reads = [c for name, coll, c in commands if coll == EVENTS]
    assert len(reads) == 1  # the log never held an archived event: one query
    pipeline = reads[0]["pipeline"]
    first = pipeline[0]["$match"]
    assert set(first) == {"session_id", "archived", "seq"}  # what the index answers
    assert first["archived"] is False
    assert set(first["seq"]) == {"$gte", "$lte"}
    assert not any("$sort" in stage or "$limit" in stage for stage in pipeline)


async def test_the_events_collection_has_one_index_besides_id(
    repo: MongoSessionRepository,
) -> None:
    """``{session_id, archived, seq}`` answers every read: no ``{session_id, seq}`` beside it."""
    indexes = await repo._store.events.index_information()
    assert sorted(tuple(index["key"]) for index in indexes.values()) == [
        (("_id", 1),),
        (("session_id", 1), ("archived", 1), ("seq", 1)),
    ]


async def _archived_below(repo: MongoSessionRepository, s: str, how: str) -> list[str]:
    """A 300-event log with archived events below the tail, by an append or a compaction, or
    by an append in a session document of an earlier version (no ``ar`` field); the texts the
    log should read as."""
    events = [user(s, f"m{i}") for i in range(300)]
    if how in ("append", "legacy"):
        events[5] = events[5].model_copy(update={"archived": True})
    await repo.append_events(s, events)
    if how == "compaction":
        plan = CompactionPlan(archive_ids=frozenset(e.id for e in events[:10]))
        assert await repo.apply_compaction(s, plan, await repo.get_event_version(s))
    if how == "legacy":
        await repo._store.sessions.update_one({"_id": s}, {"$unset": {"ar": ""}})
    await repo.append_events(s, [user(s, f"n{i}") for i in range(100)])  # roll forward
    return [e.text for e in events] + [f"n{i}" for i in range(100)]


@pytest.mark.parametrize("how", ["append", "compaction", "legacy"])
async def test_a_read_of_every_event_asks_for_both_archived_values_once_one_may_exist(
    repo: MongoSessionRepository, recorder: Recorder, how: str
) -> None:
    """Once the log may hold an archived event (an archived append, a compaction, or a session
    document of an earlier version), a read of every event below the tail sends one
    index-shaped query per value of ``archived``, and finds archived events too."""
    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    texts = await _archived_below(repo, s, how)
    recorder.take()
    window = await repo.find_events(s, EventFilter.last_n(200))
    assert [e.text for e in window] == texts[-200:]
    reads = [c for name, coll, c in recorder.take() if coll == EVENTS]
    firsts = [c["pipeline"][0]["$match"] for c in reads]
    flags = [f["archived"] for f in firsts]
    assert flags.count(False) == flags.count(True) >= 1
    assert all(set(f) == {"session_id", "archived", "seq"} for f in firsts)
    every = await repo.find_events(s, EventFilter())
    assert [e.text for e in every][: len(texts)] == texts
    assert any(e.archived for e in every)
    assert len({e.id for e in every}) == len(every)
    active = await repo.find_events(s, EventFilter(exclude_archived=True))
    assert not any(e.archived for e in active)
    recorder.take()
    await repo.find_events(s, EventFilter(exclude_archived=True, last_n=200))
    firsts = [c["pipeline"][0]["$match"] for name, coll, c in recorder.take() if coll == EVENTS]
    assert firsts
    assert all(f["archived"] is False for f in firsts)  # one query per range, as before


class PlainStore:
    """The in-memory store through the plain protocol only: no native ``start_turn``."""

    def __init__(self) -> None:
        self._inner = InMemorySessionRepository()

    def __getattr__(self, name: str) -> Any:
        if name == "start_turn":
            raise AttributeError(name)
        return getattr(self._inner, name)


async def test_start_turn_matches_on_every_store(repo: MongoSessionRepository) -> None:
    """The native turns (MongoDB, in memory) and the fallback for plain stores agree."""
    plain, memory = PlainStore(), InMemorySessionRepository()
    assert supports_turns(repo)
    assert supports_turns(memory)
    assert not supports_turns(plain)
    session = Session(user_id="carol")
    s = session.id
    history = [user(s, "u1"), assistant(s, "a1")]
    stores: list[Any] = [plain, memory, repo]
    for store in stores:
        await store.save(session)
        await store.append_events(s, history)
    question = user(s, "u2")
    window = EventFilter.active().merge(EventFilter.last_n(1))
    snapshots = [await start_turn(st, s, [question], window, user_id="carol") for st in stores]
    assert snapshots[0] == snapshots[1] == snapshots[2]
    assert [e.text for e in snapshots[2].events] == ["u1", "a1"]
    assert snapshots[2].version == 2
    for store in (memory, repo):  # a replay: nothing appended, the same window
        again = await start_turn(store, s, [question], window)
        assert again.version == 2
        assert again.events == snapshots[2].events


async def test_start_turn_creates_a_missing_session_on_every_store(
    repo: MongoSessionRepository,
) -> None:
    """``create`` makes the session with the turn's events as its first; an existing session
    is used as it is; a session to create for another id or owner is refused."""
    stores: list[Any] = [PlainStore(), InMemorySessionRepository(), repo]
    for store in stores:
        new = Session(user_id="erin", metadata={"k": "v"})
        s = new.id
        question = user(s, "first")
        snapshot = await start_turn(store, s, [question], EventFilter.all(), create=new)
        assert snapshot.session == new
        assert snapshot.events == ()
        assert snapshot.version == 1
        assert await store.find_by_id(s) == new
        assert await store.find_events(s, EventFilter.all()) == [question]
        other = Session(id=s, user_id="erin", metadata={"k": "other"})
        nxt = user(s, "second")
        snapshot = await start_turn(store, s, [nxt], EventFilter.all(), create=other)
        assert snapshot.session == new  # existing: create is not used
        assert [e.text for e in snapshot.events] == ["first"]
        with pytest.raises(UsageError):
            await start_turn(
                store, s, [user(s, "x")], EventFilter.all(), create=Session(user_id="erin")
            )
        with pytest.raises(UsageError):
            await start_turn(store, s, [user(s, "x")], EventFilter.all(), user_id="fay", create=new)
        with pytest.raises(AccessDenied):
            await start_turn(store, s, [user(s, "x")], EventFilter.all(), user_id="fay")
        assert [e.text for e in await store.find_events(s, EventFilter.all())] == [
            "first",
            "second",
        ]


async def test_concurrent_first_turns_create_one_session(repo: MongoSessionRepository) -> None:
    """Many first turns racing on one new session: one creates it, all messages are stored
    once each."""
    s = "racing-new-session"

    async def turn(i: int) -> None:
        create = Session(id=s, user_id="gus")
        await start_turn(repo, s, [user(s, f"q{i}")], EventFilter.last_n(5), create=create)

    async with asyncio.TaskGroup() as group:
        for i in range(24):
            group.create_task(turn(i))
    texts = [e.text for e in await repo.find_events(s, EventFilter.all())]
    assert sorted(texts) == sorted(f"q{i}" for i in range(24))
    assert await repo.get_event_version(s) == 24


def names(recorder: Recorder) -> list[str]:
    return [f"{name} {collection}" for name, collection, _ in recorder.take()]


async def test_a_commit_returns_nothing_when_the_store_knows_the_tail_has_room(
    repo: MongoSessionRepository, recorder: Recorder
) -> None:
    """After a read, an append is a registration and an ``update`` (no post-image); with
    nothing known about the session, the commit asks for the post-image it decides by."""
    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    recorder.take()
    await repo.append_event(user(s, "first"))
    assert names(recorder) == [f"insert {IDS}", f"findAndModify {SESSIONS}"]
    await repo.append_event(user(s, "second"))
    assert names(recorder) == [f"insert {IDS}", f"update {SESSIONS}"]
    snapshot = await repo.read_snapshot(s, EventFilter.last_n(5))
    assert snapshot is not None
    recorder.take()
    assert await repo.append_events(s, [user(s, "third")], snapshot.version)
    assert names(recorder) == [f"insert {IDS}", f"update {SESSIONS}"]
    assert not await repo.append_events(s, [user(s, "stale")], snapshot.version)
    assert [e.text for e in await repo.find_events(s, EventFilter.all())] == [
        "first",
        "second",
        "third",
    ]


@pytest.fixture
async def other(mongo_uri: str, repo: MongoSessionRepository) -> AsyncIterator[Any]:
    """A second repository on the same database through a client of its own (another process)."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
    try:
        yield MongoSessionRepository(client[repo._store.sessions.database.name])
    finally:
        await client.close()


@pytest.mark.parametrize("versioned", [False, True])
async def test_a_stale_hint_falls_back_and_still_rolls_forward(
    repo: MongoSessionRepository, other: MongoSessionRepository, versioned: bool
) -> None:
    """Another process fills the tail after this one read it: the guarded commit without
    post-image fails, the append commits with one and rolls forward (the copy at once, the cut
    with its next commit); nothing lost or reordered, and a versioned append with the right
    version is not mistaken for a conflict."""
    from asyncsession.repository.mongo._hints import K_MAX, K_MIN

    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    await repo.append_event(user(s, "mine-0"))
    assert await repo.read_snapshot(s, EventFilter.last_n(1)) is not None  # hint: 1 entry
    theirs = [user(s, f"theirs-{i}") for i in range(K_MAX - 2)]
    await other.append_events(s, theirs)  # the tail is now one short of a roll-forward
    version = await repo.get_event_version(s)
    assert await repo.append_events(s, [user(s, "mine-1")], version if versioned else None)
    assert await repo._store.events.count_documents({"session_id": s}) == K_MAX - K_MIN
    texts = [e.text for e in await other.find_events(s, EventFilter.all())]
    assert texts == ["mine-0", *(e.text for e in theirs), "mine-1"]
    version = await repo.get_event_version(s)
    assert await repo.append_events(s, [user(s, "mine-2")], version if versioned else None)
    doc = await repo._store.sessions.find_one({"_id": s})
    assert doc is not None
    assert doc["tn"] == K_MIN + 1
    texts = [e.text for e in await other.find_events(s, EventFilter.all())]
    assert texts == ["mine-0", *(e.text for e in theirs), "mine-1", "mine-2"]


async def test_a_stale_hint_meets_a_pending_compaction_and_finishes_it(
    repo: MongoSessionRepository, other: MongoSessionRepository
) -> None:
    """A compaction by another process left changes below the tail: the append this process
    thought cheap falls back, commits and rolls the pending changes forward."""
    session = Session(user_id="bob")
    await repo.save(session)
    s = session.id
    events = [user(s, f"m{i}") for i in range(200)]
    await repo.append_events(s, events)
    assert await repo.read_snapshot(s, EventFilter.last_n(1)) is not None
    version = await other.get_event_version(s)
    plan = CompactionPlan(
        archive_ids=frozenset(e.id for e in events[:150]),
        inserts=(Insert.before(events[150].id, [synthetic(s, AssistantMessage(text="sum"))]),),
    )
    # Leave the pending changes unrolled, as a process that died right after its commit would.
    writer = other._writer.roller
    original = writer.roll_pending

    async def died(session_id: str) -> None:
        pass

    writer.roll_pending = died  # type: ignore[method-assign]
    assert await other.apply_compaction(s, plan, version)
    writer.roll_pending = original  # type: ignore[method-assign]
    doc = await repo._store.sessions.find_one({"_id": s})
    assert doc is not None
    assert doc["pending"]
    await repo.append_event(user(s, "after"))
    doc = await repo._store.sessions.find_one({"_id": s})
    assert doc is not None
    assert not doc["pending"]
    active = [e.text for e in await repo.find_events(s, EventFilter.active())]
    assert active == ["sum", *(f"m{i}" for i in range(150, 200)), "after"]


async def test_a_first_turn_takes_over_ids_left_by_an_attempt_that_died(
    repo: MongoSessionRepository,
) -> None:
    """An attempt registered the turn's ids and died before it created the session: the retry
    (same event ids) takes them over and creates the session holding the events once."""
    new = Session(user_id="hal")
    question = user(new.id, "q")
    await repo._store.event_ids.insert_one(
        {"_id": question.id, "session_id": new.id, "token": "f" * 24}
    )
    snapshot = await start_turn(repo, new.id, [question], EventFilter.all(), create=new)
    assert snapshot.events == ()
    assert snapshot.version == 1
    assert await repo.find_events(new.id, EventFilter.all()) == [question]
    registered = await repo._store.event_ids.find_one({"_id": question.id})
    assert registered is not None
    assert registered["token"] != "f" * 24


class ReplySizes(monitoring.CommandListener):
    """The BSON size of every reply, by command name."""

    def __init__(self) -> None:
        self.sizes: list[tuple[str, int]] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        pass

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        if event.command_name not in IGNORED:
            self.sizes.append((event.command_name, len(bson.encode(event.reply))))

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@pytest.fixture
async def sized(mongo_uri: str) -> AsyncIterator[tuple[MongoSessionRepository, ReplySizes]]:
    sizes = ReplySizes()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[sizes]
    )
    name = f"size_{id(sizes):x}"
    repository = MongoSessionRepository(client[name])
    await repository.ensure_indexes()
    try:
        yield repository, sizes
    finally:
        await client.drop_database(name)
        await client.close()


WINDOW_20 = EventFilter.active().merge(EventFilter.last_n(20))
TEXT_400 = "x" * 400


async def test_a_window_read_and_a_turn_receive_only_the_newest_tail_entries(
    sized: tuple[MongoSessionRepository, ReplySizes],
) -> None:
    """With 90 events of 400 bytes in the tail, a 20-message window read and the commit that
    starts a turn each receive one reply of under 16 KiB (the whole tail is over 40 KiB), and
    the windows are those the in-memory store returns."""
    repo, sizes = sized
    reference = InMemorySessionRepository()
    session = Session(user_id="u")
    await repo.save(session)
    await reference.save(session)
    s = session.id
    events = [(user if i % 2 == 0 else assistant)(s, f"{i} {TEXT_400}") for i in range(90)]
    await repo.append_events(s, events)
    await reference.append_events(s, events)
    sizes.sizes.clear()
    snapshot = await repo.read_snapshot(s, WINDOW_20)
    expected = await reference.read_snapshot(s, WINDOW_20)
    assert snapshot is not None
    assert expected is not None
    assert snapshot.events == expected.events
    assert snapshot.version == expected.version
    assert [name for name, _ in sizes.sizes] == ["find"]
    assert sizes.sizes[0][1] < 16 * 1024
    sizes.sizes.clear()
    question = user(s, f"q {TEXT_400}")
    started = await start_turn(repo, s, [question], WINDOW_20, reserve_event_ids=["r-1"])
    wanted = await start_turn(reference, s, [question], WINDOW_20, reserve_event_ids=["r-1"])
    assert started.events == wanted.events
    assert [name for name, _ in sizes.sizes] == ["insert", "findAndModify"]
    assert sizes.sizes[1][1] < 16 * 1024


async def test_a_window_the_newest_tail_entries_cannot_hold_reads_the_whole_tail(
    sized: tuple[MongoSessionRepository, ReplySizes],
) -> None:
    """When the newest tail entries are custom events the window skips, the read takes a
    second command for the whole document and still returns the in-memory store's window,
    for a read and for a turn (which leaves out what was appended after its commit)."""
    repo, sizes = sized
    reference = InMemorySessionRepository()
    session = Session(user_id="u")
    await repo.save(session)
    await reference.save(session)
    s = session.id
    audit = EventType.of("ACME.AUDIT")
    events = [user(s, f"m{i}") for i in range(30)]
    events += [SessionEvent(session_id=s, type=audit, payload={"i": i}) for i in range(40)]
    for store in (repo, reference):
        await store.append_events(s, events)
    sizes.sizes.clear()
    window = EventFilter(message_types=["user"], last_n=20)
    assert await repo.find_events(s, window) == await reference.find_events(s, window)
    assert [name for name, _ in sizes.sizes] == ["find", "find"]
    question = user(s, "q")
    started = await start_turn(repo, s, [question], window, reserve_event_ids=["r-2"])
    wanted = await start_turn(reference, s, [question], window, reserve_event_ids=["r-2"])
    assert started.events == wanted.events
    assert started.version == wanted.version


async def test_an_active_window_after_a_compaction_is_one_command_from_the_newest_entries(
    sized: tuple[MongoSessionRepository, ReplySizes],
) -> None:
    """After a compaction archived the oldest 80 of 90 tail events, an active 20-message window
    has fewer than 20 events to show: the newest tail entries hold all that are unarchived (the
    session document counts the archived ones at the front), so one sliced read answers it, as
    the in-memory store does, and so does the commit of the next turn."""
    repo, sizes = sized
    reference = InMemorySessionRepository()
    session = Session(user_id="u")
    s = session.id
    events = [(user if i % 2 == 0 else assistant)(s, f"{i} {TEXT_400}") for i in range(90)]
    plan = CompactionPlan(
        archive_ids=frozenset(e.id for e in events[:80]),
        inserts=(Insert.before(events[80].id, [synthetic(s, AssistantMessage(text="sum"))]),),
    )
    for store in (repo, reference):
        await store.save(session)
        await store.append_events(s, events)
        assert await store.apply_compaction(s, plan, 1)
    sizes.sizes.clear()
    assert await repo.find_events(s, WINDOW_20) == await reference.find_events(s, WINDOW_20)
    assert [name for name, _ in sizes.sizes] == ["find"]
    assert sizes.sizes[0][1] < 16 * 1024
    sizes.sizes.clear()
    question = user(s, "q")
    started = await start_turn(repo, s, [question], WINDOW_20, reserve_event_ids=["r-3"])
    wanted = await start_turn(reference, s, [question], WINDOW_20, reserve_event_ids=["r-3"])
    assert started.events == wanted.events
    assert [name for name, _ in sizes.sizes] == ["insert", "findAndModify"]
