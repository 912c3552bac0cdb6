"""The session stores with encryption on: what the database holds, what comes back, what an
erased user's content reads as, searches of encrypted text, summaries, and the warm path."""

from __future__ import annotations

import base64
import uuid
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest
from bson import Binary
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from command_counting import CommandCounter
from encryption_support import options_for
from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    MongoSessionRepository,
    Session,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.compaction import RecursiveSummarizationCompactionStrategy, TurnCountTrigger
from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.events import utc_now
from asyncsession.exceptions import ContentErased, UsageError
from asyncsession.filters import EventQuery
from asyncsession.memory import MongoMemoryStore
from asyncsession.repository import SessionRepository

SECRET = "PENICILLIN-ALLERGY-7731"
"""A word of alice's that must never be in the database in clear."""
AUDIO = bytes(range(256)) * 8 + SECRET.encode()
"""Binary content: an audio clip, sent as a base64 content part."""
AUDIO_B64 = base64.b64encode(AUDIO).decode()
LARGE = f"{SECRET} " * 400
"""A tool output over the test stores' offload threshold (2 KiB): kept in the GridFS bucket."""
SESSION_METADATA = {"title": f"about {SECRET}", "tenant": "acme"}
RAW: CodecOptions[RawBSONDocument] = CodecOptions(document_class=RawBSONDocument)
"""Documents as the server holds them, bytes and all."""


def conversation(session_id: str) -> list[SessionEvent]:
    """A turn of every shape: text, binary parts, tool calls and their (large) output, a
    custom event, metadata."""
    return [
        SessionEvent(
            session_id=session_id,
            message=UserMessage(
                text=f"I have {SECRET}; what can I take? ünïcode \x00 NUL",
                parts=[
                    {"type": "text", "text": f"I have {SECRET}"},
                    {"type": "input_audio", "input_audio": {"data": AUDIO_B64, "format": "wav"}},
                ],
            ),
            metadata={"client": SECRET, "nested": {"n": [1, 2.5, True, None]}},
        ),
        SessionEvent(
            session_id=session_id,
            message=AssistantMessage(
                tool_calls=[
                    ToolCall(id="call_1", name="lookup", arguments=f'{{"q": "{SECRET}"}}'),
                    ToolCall(id="call_2", name="notes", arguments="{}"),
                ],
            ),
        ),
        SessionEvent(
            session_id=session_id,
            message=ToolResponseMessage(
                responses=[
                    ToolResponse(id="call_1", name="lookup", data=LARGE),
                    ToolResponse(id="call_2", name="notes", data=f"note: {SECRET}"),
                ]
            ),
        ),
        SessionEvent(session_id=session_id, message=AssistantMessage(text=f"Avoid {SECRET}.")),
        SessionEvent(
            session_id=session_id,
            type=EventType.of("ACME.AUDIT"),
            payload={"seen": SECRET, "bytes": AUDIO_B64},
        ),
    ]


def same(events: Sequence[SessionEvent]) -> list[dict[str, Any]]:
    """Events as comparable data (``archived`` is derived by each read)."""
    return [event.model_dump(exclude={"archived"}) for event in events]


def the_setting(mongo_db: Any) -> EncryptionOptions:
    return options_for(mongo_db)


async def _mongo(mongo_db: Any, setting: EncryptionOptions | UserKeys) -> MongoSessionRepository:
    repository = MongoSessionRepository(
        mongo_db, encryption=setting, offload_threshold=2048, preview_chars=200
    )
    await repository.ensure_indexes()
    return repository


@pytest.fixture(params=[pytest.param("mongo", marks=pytest.mark.mongodb), "memory"])
def store(request: pytest.FixtureRequest) -> tuple[str, Any]:
    """``(kind, make)``: ``make(setting)`` builds a store of that kind on the test's data
    (every store a test makes sees the same sessions: a "cold" reader is another store)."""
    kind = str(request.param)
    if kind == "mongo":
        mongo_db = request.getfixturevalue("mongo_db")
        setting = the_setting(mongo_db)

        async def make_mongo(keys: EncryptionOptions | UserKeys | None = None) -> Any:
            return await _mongo(mongo_db, keys or setting)  # borrows the test's client

        return kind, make_mongo
    shared = InMemorySessionRepository(
        encryption=options_for(None), offload_threshold=2048, preview_chars=200
    )

    async def make_memory(keys: EncryptionOptions | UserKeys | None = None) -> Any:
        return shared  # the in-memory store's data lives in the store itself

    return kind, make_memory


async def _seed(repository: SessionRepository, session_id: str = "s1") -> list[SessionEvent]:
    await repository.save(Session(id=session_id, user_id="alice", metadata=SESSION_METADATA))
    events = conversation(session_id)
    assert await repository.append_events(session_id, events[:2], 0)
    assert await repository.append_events(session_id, events[2:], 1)
    return events


async def test_round_trips_are_exact(store: tuple[str, Any]) -> None:
    """Text, NUL and non-ASCII text, binary parts, tool calls, a large offloaded tool output,
    a custom payload and metadata come back exactly, from this store and from a cold one."""
    _, make = store
    repository = await make()
    events = await _seed(repository)
    for reader in (repository, await make()):
        session = await reader.find_by_id("s1")
        assert session is not None
        assert session.metadata == SESSION_METADATA
        stored = await reader.find_events("s1", EventFilter.all())
        whole = [await reader.read_body("s1", event.id) for event in stored]
        assert same([event for event in whole if event is not None]) == same(events)
        snapshot = await reader.read_snapshot("s1", EventFilter(last_n=2))
        assert snapshot is not None
        # turn-aware: the window reaches back to the question; offloaded events are previews
        assert [e.id for e in snapshot.events] == [e.id for e in events]
        kept = [snapshot.events[i] for i in (1, 3)]  # the others are offloaded: previews
        assert same(kept) == same([events[i] for i in (1, 3)])
        assert [s.id for s in await reader.find_by_user_id("alice")] == ["s1"]


@pytest.mark.mongodb
async def test_nothing_of_the_content_is_in_clear_in_any_collection(
    mongo_client: Any, mongo_db: Any
) -> None:
    """Every document of every collection, as the server holds it (sessions, commits, the
    GridFS files and chunks of offloaded bodies, memories, the erasure ledger, the key vault):
    the secret is in none of them, in clear or as base64; what stays in clear is ids, types,
    times, positions, sizes and the indexed metadata."""
    setting = the_setting(mongo_db)
    keys = UserKeys(setting, mongo_client)
    repository = await _mongo(mongo_db, keys)
    await _seed(repository)
    memories = MongoMemoryStore(mongo_db, scope="alice", encryption=keys)
    await memories.write("health.md", f"allergy: {SECRET}", expected_version=None)
    service = DefaultSessionService(repository)
    await service.append_message("s1", UserMessage(text=f"again {SECRET}"))

    collections = sorted(await mongo_db.list_collection_names())
    assert {"sessions", "session_commits", "session_bodies.chunks", "memories"} <= set(collections)
    forbidden = [SECRET.encode(), AUDIO_B64[:64].encode(), AUDIO[:64], b"allergy"]
    seen = 0
    for name in collections:
        raw = mongo_db.get_collection(name, codec_options=RAW)
        async for doc in raw.find({}):
            seen += 1
            for marker in forbidden:
                assert marker not in doc.raw, (name, marker)
    assert seen >= 8
    # what the commits keep in clear, exactly
    async for commit in mongo_db["session_commits"].find({}):
        for entry in commit["events"]:
            assert set(entry) <= {"id", "type", "timestamp", "body", "large"}
            assert isinstance(entry["body"], Binary)
            assert entry["body"].subtype == 6
    session = await mongo_db["sessions"].find_one({"_id": "s1"})
    assert isinstance(session["metadata"], Binary)
    assert session["user_id"] == "alice"
    chunks = await mongo_db["session_bodies.chunks"].count_documents({})
    assert chunks >= 1
    await repository.aclose()


async def test_an_erased_users_content_is_a_typed_error(store: tuple[str, Any]) -> None:
    """Once alice's key is deleted, every read of her content (the session's metadata, a
    window, a snapshot, a search, an offloaded body) raises ContentErased, in a cold store;
    bob's content reads as before."""
    kind, make = store
    repository = await make()
    events = await _seed(repository)
    await repository.save(Session(id="b1", user_id="bob"))
    await repository.append_events(
        "b1", [SessionEvent(session_id="b1", message=UserMessage(text="hi"))]
    )
    keys: UserKeys = repository.keys
    assert await keys.delete_key("alice") == 1
    cold = await make(keys.options) if kind == "mongo" else repository
    with pytest.raises(ContentErased) as info:
        await cold.find_by_id("s1")
    assert info.value.user_id == "alice"
    with pytest.raises(ContentErased):
        await cold.find_events("s1", EventFilter(last_n=3))
    with pytest.raises(ContentErased):
        await cold.read_snapshot("s1", EventFilter.active())
    with pytest.raises(ContentErased):
        await cold.read_body("s1", events[2].id)
    with pytest.raises(ContentErased):
        await DefaultSessionService(cold).search_events("s1", EventQuery(keywords=(SECRET,)))
    assert [e.text for e in await cold.find_events("b1", EventFilter.all())] == ["hi"]


async def test_a_text_search_decrypts_a_bounded_window(store: tuple[str, Any]) -> None:
    """A keyword search of encrypted content decrypts the events its other criteria leave, up
    to max_search_candidates; more is refused with UsageError naming the limit, never
    answered in part; narrowing by time brings it under the limit."""
    kind, make = store
    writer = await make()
    limit = 6
    setting: EncryptionOptions = writer.keys.options
    narrow = EncryptionOptions(
        kms_providers=setting.kms_providers,
        key_vault_namespace=setting.key_vault_namespace,
        max_search_candidates=limit,
    )
    if kind == "mongo":
        searcher = await make(narrow)
    else:  # the in-memory store's data is its own: write and search through one store
        writer = searcher = InMemorySessionRepository(encryption=narrow)
    repository = writer
    await repository.save(Session(id="s1", user_id="alice"))
    texts = [f"note {i} {'needle' if i % 2 else 'hay'}" for i in range(limit)]
    earlier = utc_now() - timedelta(hours=1)
    for text in texts:
        event = SessionEvent(session_id="s1", message=UserMessage(text=text), timestamp=earlier)
        await repository.append_events("s1", [event])
    service = DefaultSessionService(searcher)
    found = await service.search_events("s1", EventQuery(keywords=("needle",)))
    assert [e.text for e in found] == [t for t in texts if "needle" in t]
    marker = SessionEvent(session_id="s1", message=AssistantMessage(text="late needle"))
    await repository.append_events("s1", [marker])
    with pytest.raises(UsageError, match=r"would decrypt 7 events.*max_search_candidates \(6\)"):
        await service.search_events("s1", EventQuery(keywords=("needle",)))
    recent = await service.search_events(
        "s1", EventQuery(keywords=("needle",), since=earlier + timedelta(minutes=30))
    )
    assert [e.text for e in recent] == ["late needle"]


class _Summarizer:
    async def summarize(self, system_prompt: str, prompt: str) -> str:
        return f"alice is allergic: {SECRET}-SUMMARY"


@pytest.mark.mongodb
async def test_summaries_are_encrypted_under_the_owners_key(
    mongo_client: Any, mongo_db: Any
) -> None:
    """A compaction's summary turn and boundary are stored like every event of the session:
    encrypted, under the owner's data key; they read back decrypted."""
    keys = UserKeys(the_setting(mongo_db), mongo_client)
    repository = await _mongo(mongo_db, keys)
    service = DefaultSessionService(repository)
    await repository.save(Session(id="s1", user_id="alice"))
    for i in range(6):
        await service.append_message("s1", UserMessage(text=f"question {i} {SECRET}"))
        await service.append_message("s1", AssistantMessage(text=f"answer {i}"))
    strategy = RecursiveSummarizationCompactionStrategy(
        _Summarizer(), max_events_to_keep=4, overlap_size=0
    )
    result = await service.compact("s1", TurnCountTrigger(2), strategy)
    assert result.applied
    active = await repository.find_events("s1", EventFilter.active())
    assert any(f"{SECRET}-SUMMARY" in (e.text or "") for e in active)
    key = await mongo_db["keyvault"].find_one({"keyAltNames": "asyncsession:user:alice"})
    raw = mongo_db.get_collection("session_commits", codec_options=RAW)
    newest = await raw.find_one({"session": "s1"}, sort=[("commit", -1)])
    assert newest is not None
    assert b"SUMMARY" not in newest.raw
    entries = newest["events"]
    assert [e["type"] for e in entries][-1] == EventType.COMPACTION.name
    for entry in entries:
        body = entry["body"]
        assert body.subtype == 6
        assert uuid.UUID(bytes=bytes(body)[1:17]) == key["_id"].as_uuid()
    await repository.aclose()


@pytest.mark.mongodb
async def test_a_store_without_the_setting_refuses_encrypted_content(mongo_db: Any) -> None:
    """A store built without the setting cannot read encrypted content: a UsageError that
    says to give it the setting, never ciphertext passed off as content."""
    repository = await _mongo(mongo_db, the_setting(mongo_db))
    await repository.save(Session(id="s1", user_id="alice"))
    await repository.append_events(
        "s1", [SessionEvent(session_id="s1", message=UserMessage(text=SECRET))]
    )
    plain = MongoSessionRepository(mongo_db)
    with pytest.raises(UsageError, match="encryption setting"):
        await plain.find_events("s1", EventFilter.all())
    await repository.aclose()


@pytest.mark.mongodb
async def test_a_warm_encrypted_turn_sends_the_commands_of_a_plain_one(
    mongo_uri: str, mongo_db: Any
) -> None:
    """The turn's own commands (the snapshot, the commit of question and reply at the version
    read), with a warm key: the same commands, encrypted or not: no key vault read."""
    counter = CommandCounter()
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        mongo_uri, event_listeners=[counter], tz_aware=True
    )
    try:
        database = client[mongo_db.name]
        setting = the_setting(mongo_db)
        sent: dict[str, list[tuple[str, str]]] = {}
        for label, encryption in (("plain", None), ("encrypted", setting)):
            repository = MongoSessionRepository(database, encryption=encryption)
            await repository.ensure_indexes()
            session_id = f"turns-{label}"
            await repository.save(Session(id=session_id, user_id="alice"))
            for turn in range(3):  # the first turn warms the key (and the store)
                counter.clear()
                snapshot = await repository.read_snapshot(session_id, EventFilter(last_n=20))
                assert snapshot is not None
                question = SessionEvent(session_id=session_id, message=UserMessage(text=f"q{turn}"))
                reply = SessionEvent(session_id=session_id, message=AssistantMessage(text="a"))
                assert await repository.append_events(
                    session_id, [question, reply], snapshot.version
                )
            sent[label] = counter.take()
        assert [name for name, _ in sent["plain"]] == ["aggregate", "insert"]
        assert sent["encrypted"] == sent["plain"]
    finally:
        await client.close()
