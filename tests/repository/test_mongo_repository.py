"""The MongoDB repository as an object: ownership of its client, indexes, identity, positions."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from motor.motor_asyncio import AsyncIOMotorClient  # noqa: TID251 - Motor is accepted, not used
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import AutoReconnect

from asyncsession import (
    AccessDenied,
    AssistantMessage,
    CompactionPlan,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    Message,
    Session,
    SessionEvent,
    SessionNotFound,
    StorageError,
    SystemMessage,
    ToolCall,
    UsageError,
    UserMessage,
)
from asyncsession.repository._turn import start_turn
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._codec import body_of, decode_body, keyword_regex
from asyncsession.repository.mongo._drawn import loaded_id
from asyncsession.repository.mongo._positions import key_between, place_between
from asyncsession.testing.contract import user


async def test_from_uri_owns_its_client_and_closes_it(mongo_uri: str) -> None:
    """A repository from a URI closes its client; a closed repository refuses to work."""
    async with MongoSessionRepository.from_uri(mongo_uri, "owned") as repo:
        session = Session(user_id="u")
        await repo.save(session)
        assert await repo.find_by_id(session.id) == session
        client = repo._client
        assert client is not None
        assert "asyncsession" in client._options.pool_options.metadata["driver"]["name"]
        await client.drop_database("owned")
    assert client._closed
    with pytest.raises(UsageError, match="closed"):
        await repo.find_by_id(session.id)
    await repo.aclose()


async def test_a_borrowed_database_is_never_closed(
    mongo_client: AsyncMongoClient[dict[str, Any]], mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Closing a repository leaves the client it was given open, and names us to the server."""
    repo = MongoSessionRepository(mongo_db)
    assert "asyncsession" in mongo_client._options.pool_options.metadata["driver"]["name"]
    await repo.aclose()
    assert (await mongo_db.command("ping"))["ok"]
    with pytest.raises(UsageError):
        await repo.append_event(user("s", "x"))


async def test_ensure_indexes_is_idempotent(mongo_db: AsyncDatabase[dict[str, Any]]) -> None:
    """Creating the indexes twice is fine and leaves the same indexes."""
    repo = MongoSessionRepository(mongo_db, events_collection="ev", sessions_collection="ss")
    await repo.ensure_indexes()
    first = await mongo_db["ev"].index_information()
    await repo.ensure_indexes()
    assert await mongo_db["ev"].index_information() == first
    assert {tuple(index["key"]) for index in first.values()} == {
        (("_id", 1),),
        (("session_id", 1), ("archived", 1), ("seq", 1)),
    }
    assert "user_id_1" in await mongo_db["ss"].index_information()


def test_every_collection_writes_with_a_journaled_majority(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """Whatever the client's default, the store's writes wait for a journaled majority."""
    store = MongoSessionRepository(mongo_db)._store
    for collection in (store.sessions, store.events, store.event_ids):
        assert collection.write_concern.document == {"w": "majority", "j": True}


async def test_a_motor_database_works(mongo_uri: str) -> None:
    """Motor databases are accepted by duck typing."""
    client: Any = AsyncIOMotorClient(mongo_uri, tz_aware=True)
    try:
        repo = MongoSessionRepository(client["motor_db"])
        await repo.ensure_indexes()
        session = Session(user_id="u")
        await repo.save(session)
        await repo.append_events(session.id, [user(session.id, f"m{i}") for i in range(80)])
        window = await repo.find_events(session.id, EventFilter.last_n(3))
        assert [e.text for e in window] == ["m77", "m78", "m79"]
        await client.drop_database("motor_db")
    finally:
        client.close()


async def test_start_turn_checks_the_session_and_its_owner_before_writing(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """An unknown session or another user's session raises, and nothing is appended."""
    repo = MongoSessionRepository(mongo_db)
    session = Session(user_id="owner")
    await repo.save(session)
    s = session.id
    with pytest.raises(AccessDenied):
        await start_turn(repo, s, [user(s, "intruder")], EventFilter.all(), user_id="mallory")
    with pytest.raises(SessionNotFound):
        await start_turn(repo, "nope", [user("nope", "x")], EventFilter.all())
    assert await repo.find_events(s, EventFilter.all()) == []
    assert await repo.get_event_version(s) == 0
    first = user(s, "first")
    snapshot = await start_turn(repo, s, [first], EventFilter.all(), user_id="owner")
    assert snapshot.events == ()
    assert snapshot.version == 1
    assert await repo.find_events(s, EventFilter.all()) == [first]


keys = st.text(
    alphabet="0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz", max_size=6
)


@given(st.lists(keys, min_size=2, max_size=2, unique=True))
def test_key_between_is_strictly_between(pair: list[str]) -> None:
    """A fractional key always fits between two distinct keys not ending in the lowest digit."""
    low, high = sorted(k.rstrip("0") for k in pair)
    assume(low != high)
    key = key_between(low, high)
    assert low < key < high
    assert key_between(high, None) > high


@given(
    st.integers(min_value=0, max_value=1 << 40),
    st.integers(min_value=0, max_value=1 << 33),
    st.integers(min_value=1, max_value=12),
)
def test_placed_positions_are_ordered_and_between(low: int, gap: int, count: int) -> None:
    """Inserted positions are distinct, ordered and strictly between their neighbours."""
    before, after = (low, ""), (low + gap, "" if gap else "V")
    placed = place_between(before, after, count)
    assert len(placed) == count
    assert [before, *placed, after] == sorted({before, *placed, after})


def test_many_inserts_at_one_point_never_run_out_of_room() -> None:
    """Two hundred inserts between the same neighbours, each before the last: still ordered."""
    before, after = (0, ""), (1, "")
    placed: list[tuple[int, str]] = []
    for _ in range(200):
        before = place_between(before, after, 1)[0]
        placed.append(before)
    assert placed == sorted(set(placed))
    assert all(p < after for p in placed)


class Broken:
    """A collection whose every call fails the way a dropped connection does."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        def fail(*args: Any, **kwargs: Any) -> Any:
            raise AutoReconnect(f"injected: {name} lost its connection")

        return fail


async def test_driver_errors_surface_as_storage_errors_chained_to_their_cause(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """Every operation turns a driver failure into ``StorageError``, caused by the driver error."""
    repo = MongoSessionRepository(mongo_db)
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    store = repo._store
    store.sessions, store.events, store.event_ids = (
        Broken(store.sessions),
        Broken(store.events),
        Broken(store.event_ids),
    )
    operations = [
        repo.save(session),
        repo.save_if_absent(Session(user_id="u")),
        repo.find_by_id(s),
        repo.find_by_user_id("u"),
        repo.delete(s),
        repo.delete_expired_sessions(session.created_at),
        repo.append_event(user(s, "x")),
        repo.append_events(s, [user(s, "x")], 0),
        repo.find_events(s, EventFilter.all()),
        repo.find_events_by_user_id("u", EventFilter.all()),
        repo.read_snapshot(s, EventFilter.all()),
        repo.get_event_version(s),
        repo.apply_compaction(s, CompactionPlan(), 0),
        repo.start_turn(s, [user(s, "x")], EventFilter.all()),
        repo.ensure_indexes(),
    ]
    for operation in operations:
        with pytest.raises(StorageError) as info:
            await operation
        assert isinstance(info.value.__cause__, AutoReconnect)


def old_body(event: SessionEvent) -> str:
    """The JSON body as version 0.1 stored it: every field but id, session and archived flag."""
    return event.model_dump_json(exclude={"id", "session_id", "archived"})


async def test_bodies_stored_by_version_0_1_read_the_same(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """Event bodies in the 0.1 form (with timestamp, type and every default), in the tail and
    in the events collection, decode to the events that were stored."""
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    session = Session(user_id="u")
    await repo.save(session)
    s = session.id
    events = [
        user(s, "below"),
        SessionEvent(
            session_id=s,
            message=AssistantMessage(text=None, extra={"k": None}),
            metadata={"m": {"x": None}},
        ),
        SessionEvent(session_id=s, type=EventType.of("ACME.AUDIT"), payload={}),
    ]
    tail = [user(s, f"t{i}") for i in range(120)]
    await repo.append_events(s, events)
    await repo.append_events(s, tail)  # rolls the first events forward
    below = await mongo_db["session_events"].find({"session_id": s}).to_list(None)
    assert {loaded_id(doc["_id"]) for doc in below} >= {e.id for e in events}
    by_id = {e.id: e for e in [*events, *tail]}
    for doc in below:
        await mongo_db["session_events"].update_one(
            {"_id": doc["_id"]}, {"$set": {"data": old_body(by_id[loaded_id(doc["_id"])])}}
        )
    doc = await mongo_db["sessions"].find_one({"_id": s})
    assert doc is not None
    entries: list[dict[str, Any]] = []
    for entry in doc["tail"]:
        ms, flags, type_name, _body = entry["e"].split(";", 3)
        entries.append({**entry, "e": f"{ms};{flags};{type_name};{old_body(by_id[entry['_id']])}"})
    await mongo_db["sessions"].update_one({"_id": s}, {"$set": {"tail": entries}})
    fresh = MongoSessionRepository(mongo_db)  # nothing cached
    assert await fresh.find_events(s, EventFilter.all()) == [*events, *tail]


TRICKY = 'aAkK\u212aiI\u0130\u0307\u03c3\u03c2\u03a3\u00df\u1e9e"\\\n\x01 .*?$[]é'


@given(
    text=st.text(
        alphabet=st.sampled_from(TRICKY) | st.characters(exclude_categories=("Cs",)), max_size=12
    ),
    start=st.integers(0, 12),
    length=st.integers(1, 6),
)
def test_a_keyword_regex_finds_every_text_that_contains_the_keyword(
    text: str, start: int, length: int
) -> None:
    """The body regex of any piece of a text's lower case matches the stored body of an event
    with that text (it may match elsewhere too: reads check every hit)."""
    lowered = text.lower()
    keyword = lowered[start : start + length]
    assume(keyword.strip())
    event = SessionEvent(session_id="s", message=UserMessage(text=text))
    assert re.search(keyword_regex(keyword), body_of(event))


@pytest.mark.parametrize(
    ("message", "text_only"),
    [
        pytest.param(UserMessage(text='say "hi"\n'), True, id="user"),
        pytest.param(AssistantMessage(text="ok"), True, id="assistant"),
        pytest.param(SystemMessage(text="be brief"), True, id="system"),
        pytest.param(UserMessage(text="q", extra={"lang": "en"}), False, id="user-extra"),
        pytest.param(
            AssistantMessage(text="", tool_calls=[ToolCall(id="c", name="f", arguments="{}")]),
            False,
            id="assistant-tool-call",
        ),
        pytest.param(SystemMessage(text="x", role="developer"), False, id="developer"),
    ],
)
def test_a_text_only_message_is_stored_as_its_text_and_every_body_decodes_back(
    message: Message, text_only: bool
) -> None:
    """A message that is nothing but its text is stored as a JSON string; anything more keeps
    the framed form; both decode to the same event."""
    event = SessionEvent(session_id="s", message=message)
    body = body_of(event)
    assert body.startswith('"') is text_only
    fields = decode_body(body, event.type.name)
    fields.update(id=event.id, session_id="s", timestamp=event.timestamp, type=event.type)
    assert SessionEvent.model_validate(fields) == event
    with_metadata = SessionEvent(session_id="s", message=message, metadata={"k": 1})
    assert body_of(with_metadata).startswith("{")


@pytest.mark.parametrize(
    ("text", "keyword"),
    [
        pytest.param("The Kelvin \u212a", "k", id="kelvin-sign"),
        pytest.param("\u0130stanbul", "i\u0307s", id="dotted-capital-i"),
        pytest.param("ΟΔΟΣ", "δος", id="final-sigma"),
        pytest.param('say "hi"\n\\o/', '"hi"\n\\', id="json-escapes"),
        pytest.param("Straße", "STRASSE".lower(), id="no-match-expected"),
    ],
)
async def test_keyword_search_below_the_tail_matches_as_in_memory(
    mongo_db: AsyncDatabase[dict[str, Any]], text: str, keyword: str
) -> None:
    """A keyword search over events rolled below the tail finds what the in-memory store finds,
    for letters whose cases are unusual and for characters JSON escapes."""
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    reference = InMemorySessionRepository()
    session = Session(user_id="u")
    s = session.id
    events = [user(s, text), *(user(s, f"filler {i}") for i in range(120))]
    for store in (repo, reference):
        await store.save(session)
        await store.append_events(s, events)
    assert await mongo_db["session_events"].find_one({"_id": events[0].id}) is not None
    search = EventFilter.keyword_search(keyword)
    found = await repo.find_events(s, search)
    assert found == await reference.find_events(s, search)
