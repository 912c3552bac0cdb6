"""The MongoDB repository as an object: ownership of its client, indexes, identity, bodies."""

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
    AssistantMessage,
    EventFilter,
    InMemorySessionRepository,
    Message,
    Session,
    SessionEvent,
    SystemMessage,
    ToolCall,
    UsageError,
    UserMessage,
)
from asyncsession.exceptions import StorageError
from asyncsession.repository import Lease
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.repository.mongo._layout import event_from_doc, event_to_doc
from asyncsession.repository.mongo._read import keyword_regex
from asyncsession.testing._contract._support import user


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
    repo = MongoSessionRepository(mongo_db, commits_collection="co", sessions_collection="ss")
    await repo.ensure_indexes()
    first = await mongo_db["co"].index_information()
    await repo.ensure_indexes()
    assert await mongo_db["co"].index_information() == first
    assert {(tuple(index["key"]), index.get("unique", False)) for index in first.values()} == {
        ((("_id", 1),), False),
        ((("session", 1), ("commit", 1)), True),
        ((("events.id", 1),), True),
    }
    assert "user_id_1_created_at_1__id_1" in await mongo_db["ss"].index_information()


def test_every_collection_writes_with_a_journaled_majority(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """Whatever the client's default, the store's writes wait for a journaled majority."""
    store = MongoSessionRepository(mongo_db)._store
    for collection in (store.sessions, store.commits):
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
    store.sessions, store.commits = Broken(store.sessions), Broken(store.commits)
    lease = Lease(holder="h", expires_at=session.created_at)
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
        repo.acquire_lease(s, 0, lease),
        repo.release_lease(s, 0, "h"),
        repo.ensure_indexes(),
    ]
    for operation in operations:
        with pytest.raises(StorageError) as info:
            await operation
        assert isinstance(info.value.__cause__, AutoReconnect)


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
    """The prefilter regex of any piece of a text's lower case matches the text (it may match
    more: reads check every hit)."""
    lowered = text.lower()
    keyword = lowered[start : start + length]
    assume(keyword.strip())
    assert re.search(keyword_regex(keyword), text)


@pytest.mark.parametrize(
    ("message", "stored"),
    [
        pytest.param(UserMessage(text='say "hi"\n'), {"text": 'say "hi"\n'}, id="user"),
        pytest.param(AssistantMessage(text="ok"), {"text": "ok"}, id="assistant"),
        pytest.param(SystemMessage(text="be brief"), {"text": "be brief"}, id="system"),
        pytest.param(
            UserMessage(text="q", extra={"lang": "en", "$set": 1, "a.b": 2}),
            {"text": "q", "extra": {"lang": "en", "~%24set": 1, "~a%2Eb": 2}},
            id="user-extra",
        ),
        pytest.param(
            AssistantMessage(text="", tool_calls=[ToolCall(id="c", name="f", arguments="{}")]),
            {
                "text": "",
                "tool_calls": [{"id": "c", "name": "f", "arguments": "{}", "type": "function"}],
            },
            id="assistant-tool-call",
        ),
        pytest.param(
            SystemMessage(text="x", role="developer"),
            {"text": "x", "role": "developer"},
            id="developer",
        ),
    ],
)
def test_a_message_is_stored_as_plain_fields_and_decodes_back(
    message: Message, stored: dict[str, Any]
) -> None:
    """An event's body holds its message as plain fields (defaults and the kind, which the
    event's type says, left out; keys MongoDB could not keep escaped) and decodes to the same
    event."""
    event = SessionEvent(session_id="s", message=message)
    doc = event_to_doc(event)
    assert doc["body"] == {"message": stored}
    assert doc["type"] == event.type.name
    assert event_from_doc(doc, "s") == event
    with_metadata = SessionEvent(session_id="s", message=message, metadata={"k": 1})
    assert event_to_doc(with_metadata)["body"]["metadata"] == {"k": 1}


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
async def test_keyword_search_matches_as_in_memory(
    mongo_db: AsyncDatabase[dict[str, Any]], text: str, keyword: str
) -> None:
    """A keyword search (narrowed on the server by the prefilter) finds what the in-memory store
    finds, for letters whose cases are unusual and for characters JSON would escape."""
    repo = MongoSessionRepository(mongo_db)
    await repo.ensure_indexes()
    reference = InMemorySessionRepository()
    session = Session(user_id="u")
    s = session.id
    events = [user(s, text), *(user(s, f"filler {i}") for i in range(120))]
    for store in (repo, reference):
        await store.save(session)
        await store.append_events(s, events)
    search = EventFilter.keyword_search(keyword)
    found = await repo.find_events(s, search)
    assert found == await reference.find_events(s, search)
