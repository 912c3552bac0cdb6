"""`MongoMemoryStore` with encryption: files encrypted with their user's key, read back."""

from __future__ import annotations

from typing import Any

import pytest
from bson import Binary
from command_counting import CommandCounter
from encryption_support import options_for
from pymongo import AsyncMongoClient

from asyncsession.encryption import UserKeys
from asyncsession.exceptions import ContentErased, UsageError
from asyncsession.memory import MongoMemoryStore
from asyncsession.tools import AutoMemoryTools

pytestmark = pytest.mark.mongodb

TEXT = "# Health\n\nAlice is allergic to penicillin. Blood type 0-.\n"


async def test_a_file_is_stored_encrypted_and_read_back(mongo_client: Any, mongo_db: Any) -> None:
    """The document's text is ciphertext; path, size and version stay in clear; reading
    through the store (and through the model's tools) gives the text."""
    store = MongoMemoryStore(mongo_db, scope="alice", encryption=options_for(mongo_db))
    await store.ensure_indexes()
    written = await store.write("health.md", TEXT, expected_version=None)
    raw = await mongo_db["memories"].find_one({"scope": "alice", "path": "health.md"})
    assert isinstance(raw["text"], Binary)
    assert raw["text"].subtype == 6
    assert b"penicillin" not in bytes(raw["text"])
    assert raw["size"] == len(TEXT.encode())
    read = await store.read("health.md")
    assert read is not None
    assert (read.text, read.version) == (TEXT, written.version)
    view = await AutoMemoryTools(store).memory_view("health.md")
    assert "penicillin" in view


async def test_edits_moves_and_other_scopes_keep_working(mongo_db: Any) -> None:
    """A compare-and-set edit, a move and a store for another scope, all encrypted."""
    setting = options_for(mongo_db)
    store = MongoMemoryStore(mongo_db, scope="alice", encryption=setting)
    first = await store.write("notes/a.md", "one", expected_version=None)
    await store.write("notes/a.md", "two", expected_version=first.version)
    await store.rename("notes", "archive")
    moved = await store.read("archive/a.md")
    assert moved is not None
    assert moved.text == "two"
    bob = store.with_scope("bob")
    await bob.write("b.md", "bob's", expected_version=None)
    raw = await mongo_db["memories"].find_one({"scope": "bob"})
    assert isinstance(raw["text"], Binary)
    read = await bob.read("b.md")
    assert read is not None
    assert read.text == "bob's"


async def test_a_file_of_an_erased_user_is_a_typed_error(mongo_client: Any, mongo_db: Any) -> None:
    """Once the user's key is deleted, reading their file raises `ContentErased`, even from a
    copy of the document restored elsewhere."""
    keys = UserKeys(options_for(mongo_db), mongo_client)
    store = MongoMemoryStore(mongo_db, scope="alice", encryption=keys)
    await store.write("health.md", TEXT, expected_version=None)
    backup = await mongo_db["memories"].find_one({"scope": "alice"})
    await keys.delete_key("alice")
    with pytest.raises(ContentErased):
        await store.read("health.md")
    await mongo_db["memories"].delete_many({})
    await mongo_db["restored"].insert_one(backup)
    restored = MongoMemoryStore(mongo_db, scope="alice", collection="restored", encryption=keys)
    with pytest.raises(ContentErased):
        await restored.read("health.md")


async def test_plain_files_stay_readable_and_encrypted_ones_need_the_setting(
    mongo_db: Any,
) -> None:
    """Files written before encryption was turned on are read as they are; a store without
    the setting refuses an encrypted file with a usage error."""
    plain = MongoMemoryStore(mongo_db, scope="alice")
    await plain.write("old.md", "written in clear", expected_version=None)
    encrypted = MongoMemoryStore(mongo_db, scope="alice", encryption=options_for(mongo_db))
    old = await encrypted.read("old.md")
    assert old is not None
    assert old.text == "written in clear"
    await encrypted.write("new.md", "written encrypted", expected_version=None)
    with pytest.raises(UsageError):
        await plain.read("new.md")


async def test_encryption_adds_no_command_to_a_warm_store(mongo_uri: str, mongo_db: Any) -> None:
    """Once the user's key is in the process, a write and a read send the same commands as
    the unencrypted store does."""
    counter = CommandCounter()
    client: AsyncMongoClient[Any] = AsyncMongoClient(mongo_uri, event_listeners=[counter])
    try:
        database = client[mongo_db.name]
        plain = MongoMemoryStore(database, scope="plain")
        secret = MongoMemoryStore(database, scope="alice", encryption=options_for(mongo_db))
        await secret.write("warm.md", "warms the key", expected_version=None)
        sent: list[list[str]] = []
        for store in (plain, secret):
            counter.clear()
            written = await store.write("f.md", "text", expected_version=None)
            await store.write("f.md", "text 2", expected_version=written.version)
            await store.read("f.md")
            sent.append(counter.names)
        assert sent[0] == sent[1]
    finally:
        await client.close()
