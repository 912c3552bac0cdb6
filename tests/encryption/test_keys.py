"""`UserKeys` on both key vaults: round trips, one key per user, erasure, rotation."""

from __future__ import annotations

import asyncio
import gc
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from bson import Binary, Int64
from command_counting import CommandCounter
from encryption_support import LOCAL_KEY, closed_port, options_for
from pymongo import AsyncMongoClient

from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.encryption._keys import key_name
from asyncsession.exceptions import (
    ContentErased,
    EncryptionError,
    StorageUnavailable,
    UsageError,
)

VALUES: list[Any] = [
    "plain text",
    "émoji 😀 and NUL \x00 inside",
    "",
    {
        "role": "assistant",
        "tool_calls": [
            {"id": "call_1", "function": {"name": "lookup", "arguments": '{"q": "x"}'}},
            {"id": "call_2", "function": {"name": "add", "arguments": "{}"}},
        ],
        "nested": {"list": [1, 2.5, True, None, "x", [Int64(2**62)]], "empty": {}},
        "$dollar.key": "kept verbatim",
    },
    b"\x00\x01\xfe\xff" * 100,
    datetime(2026, 1, 31, 12, 30, 15, 123000, tzinfo=UTC),
    [1, "two", {"three": 3}],
    42,
    -1.5,
]


def _key_id(value: Binary) -> uuid.UUID:
    return uuid.UUID(bytes=bytes(value)[1:17])


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
async def test_a_value_comes_back_exactly(keys: UserKeys, new_keys: Any, value: Any) -> None:
    """Text, nested JSON-like documents (tool calls), bytes and times decrypt to what was
    encrypted, in this cache and in a cold one."""
    encrypted = await keys.encrypt("alice", value)
    assert isinstance(encrypted, Binary)
    assert encrypted.subtype == 6
    assert await keys.decrypt("alice", encrypted) == value
    cold: UserKeys = new_keys()
    assert await cold.decrypt("alice", encrypted) == value


async def test_ciphertext_reveals_nothing_and_differs_each_time(keys: UserKeys) -> None:
    """The random algorithm: equal values encrypt to different bytes, none of them the text."""
    secret = "my diagnosis is confidential"
    first = await keys.encrypt("alice", secret)
    second = await keys.encrypt("alice", secret)
    assert bytes(first) != bytes(second)
    for encrypted in (first, second):
        assert secret.encode() not in bytes(encrypted)
        assert b"diagnosis" not in bytes(encrypted)


async def test_each_user_has_a_key_of_their_own(keys: UserKeys) -> None:
    """Alice's and bob's values name different data keys; each user's values name one key."""
    alice = [await keys.encrypt("alice", i) for i in range(3)]
    bob = await keys.encrypt("bob", 0)
    assert len({_key_id(value) for value in alice}) == 1
    assert _key_id(bob) != _key_id(alice[0])


async def test_many_tasks_create_one_key(keys: UserKeys, new_keys: Any) -> None:
    """Fifty tasks encrypting a new user's values at once, through two key caches: one key."""
    other: UserKeys = new_keys()
    values = await asyncio.gather(
        *(k.encrypt("carol", f"value {i}") for i in range(25) for k in (keys, other))
    )
    assert len({_key_id(value) for value in values}) == 1
    for i, value in enumerate(values):
        assert await keys.decrypt("carol", value) == f"value {i // 2}"


async def test_deleting_the_key_makes_content_unreadable(keys: UserKeys, new_keys: Any) -> None:
    """After `delete_key` no cache of the process (of keys, or of values it has decrypted)
    decrypts the user's content: a typed error that names the user and the key; other users
    are untouched."""
    other: UserKeys = new_keys()
    alice = await keys.encrypt("alice", "alice's secret")
    bob = await keys.encrypt("bob", "bob's secret")
    assert await other.decrypt("alice", alice) == "alice's secret"  # warm in both caches
    assert await keys.delete_key("alice") == 1
    for cache in (keys, other, new_keys()):
        with pytest.raises(ContentErased) as caught:
            await cache.decrypt("alice", alice)
        assert caught.value.user_id == "alice"
        assert caught.value.key_id == str(_key_id(alice))
        assert await cache.decrypt("bob", bob) == "bob's secret"
    assert not await keys.has_key("alice")
    assert await keys.delete_key("alice") == 0


class _CountingEngine:
    """Counts the values an engine really decrypts."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.decrypted = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def decrypt(self, value: Binary) -> Any:
        self.decrypted += 1
        return await self.inner.decrypt(value)


async def test_a_value_seen_lately_is_not_decrypted_again(
    new_keys: Any, setting: EncryptionOptions
) -> None:
    """A value this process encrypted or decrypted is handed out again without decrypting,
    each reader getting a copy of its own; with ``opened_cache_bytes=0``, every read
    decrypts."""
    keys: UserKeys = new_keys()
    engine = keys._engine = _CountingEngine(keys._engine)  # pyright: ignore[reportPrivateUsage]
    mine = await keys.encrypt("alice", {"text": "mine", "list": [1]})
    first = await keys.decrypt("alice", mine)
    first["list"].append(2)
    assert await keys.decrypt("alice", mine) == {"text": "mine", "list": [1]}
    assert engine.decrypted == 0
    other: UserKeys = new_keys()
    theirs = await other.encrypt("alice", "written elsewhere")
    for _ in range(3):
        assert await keys.decrypt("alice", theirs) == "written elsewhere"
    assert engine.decrypted == 1
    uncached: UserKeys = new_keys(
        EncryptionOptions(
            kms_providers=setting.kms_providers,
            key_vault_namespace=setting.key_vault_namespace,
            opened_cache_bytes=0,
        )
    )
    counted = uncached._engine = _CountingEngine(uncached._engine)  # pyright: ignore[reportPrivateUsage]
    value = await uncached.encrypt("alice", "x")
    for _ in range(3):
        assert await uncached.decrypt("alice", value) == "x"
    assert counted.decrypted == 3


async def test_a_user_erased_then_seen_again_gets_a_new_key(keys: UserKeys) -> None:
    """New content after an erasure is under a new key; the old content stays unreadable."""
    old = await keys.encrypt("alice", "before")
    await keys.delete_key("alice")
    new = await keys.encrypt("alice", "after")
    assert _key_id(new) != _key_id(old)
    assert await keys.decrypt("alice", new) == "after"
    with pytest.raises(ContentErased):
        await keys.decrypt("alice", old)


@pytest.mark.mongodb
async def test_another_master_key_cannot_read(mongo_client: Any, mongo_db: Any) -> None:
    """The wrong master key is an encryption error, not an erasure: the key is still there."""
    encrypted = await UserKeys(options_for(mongo_db), mongo_client).encrypt("alice", "secret")
    wrong = options_for(mongo_db, EncryptionOptions.generate_local_key())
    with pytest.raises(EncryptionError) as caught:
        await UserKeys(wrong, mongo_client).decrypt("alice", encrypted)
    assert not isinstance(caught.value, ContentErased)


@pytest.mark.mongodb
async def test_a_warm_user_costs_no_command(mongo_uri: str, mongo_db: Any) -> None:
    """A user's first value costs reading the key vault, its index and the key's insert; then
    encrypting and decrypting their values sends nothing to the server."""
    counter = CommandCounter()
    client: AsyncMongoClient[Any] = AsyncMongoClient(mongo_uri, event_listeners=[counter])
    try:
        keys = UserKeys(options_for(mongo_db), client)
        first = await keys.encrypt("alice", "first")
        assert counter.names == ["find", "createIndexes", "insert", "find"]
        counter.clear()
        values = [await keys.encrypt("alice", f"value {i}") for i in range(20)]
        assert [await keys.decrypt("alice", v) for v in [first, *values]] == [
            "first",
            *(f"value {i}" for i in range(20)),
        ]
        assert counter.names == []
        await keys.encrypt("bob", "second user")  # the index is made once per process
        assert counter.names == ["find", "insert", "find"]
    finally:
        await client.close()


@pytest.mark.filterwarnings("ignore:unclosed <socket:ResourceWarning")
async def test_an_unreachable_key_vault_is_an_outage() -> None:
    """No server for the key vault: both an encryption error and `StorageUnavailable`."""
    client: AsyncMongoClient[Any] = AsyncMongoClient(
        f"mongodb://127.0.0.1:{closed_port()}/", serverSelectionTimeoutMS=200
    )
    try:
        keys = UserKeys(options_for(None), client)
        with pytest.raises(EncryptionError) as caught:
            await keys.encrypt("alice", "x")
        assert isinstance(caught.value, StorageUnavailable)
    finally:
        await client.close()
        # A client closed while it still tries the refused port can leave that attempt's
        # socket to the garbage collector (PyMongo's, not ours): collect it here, where its
        # ResourceWarning is expected, instead of in whichever test runs next.
        gc.collect()


async def test_rotation_rewraps_keys_and_leaves_content_alone(keys: UserKeys) -> None:
    """Rewrapping changes every user's wrapped key and not the content: old values decrypt."""
    values = {user: await keys.encrypt(user, f"{user}'s text") for user in ("alice", "bob")}
    assert await keys.rotate() == 2
    assert await keys.rotate(user_id="alice") == 1
    for user, value in values.items():
        assert await keys.decrypt(user, value) == f"{user}'s text"


@pytest.mark.mongodb
async def test_rotation_to_a_new_master_key_retires_the_old(
    mongo_client: Any, mongo_db: Any
) -> None:
    """Keys moved to a new local master key are read with only the new key configured."""
    namespace = f"{mongo_db.name}.keyvault"
    new_key = EncryptionOptions.generate_local_key()
    old = UserKeys(EncryptionOptions.local(LOCAL_KEY, key_vault_namespace=namespace), mongo_client)
    encrypted = await old.encrypt("alice", "kept across the rotation")
    both = EncryptionOptions(
        kms_providers={"local": {"key": LOCAL_KEY}, "local:2026": {"key": new_key}},
        provider="local:2026",
        key_vault_namespace=namespace,
    )
    assert await UserKeys(both, mongo_client).rotate(provider="local:2026") == 1
    only_new = EncryptionOptions(
        kms_providers={"local:2026": {"key": new_key}}, key_vault_namespace=namespace
    )
    assert await UserKeys(only_new, mongo_client).decrypt("alice", encrypted) == (
        "kept across the rotation"
    )
    with pytest.raises(EncryptionError):  # the old master key alone no longer opens it
        await UserKeys(options_for(mongo_db), mongo_client).decrypt("alice", encrypted)


async def test_rotation_to_a_new_master_key_in_process() -> None:
    """The same move on the in-process vault, which keeps one setting's keys."""
    new_key = EncryptionOptions.generate_local_key()
    both = EncryptionOptions(
        kms_providers={"local": {"key": LOCAL_KEY}, "local:2026": {"key": new_key}},
        provider="local",
    )
    keys = UserKeys(both)
    encrypted = await keys.encrypt("alice", "kept")
    assert await keys.rotate(provider="local:2026") == 1
    assert await UserKeys(both).decrypt("alice", encrypted) == "kept"


async def test_bad_arguments_are_usage_errors(keys: UserKeys) -> None:
    """Not an encrypted value, a value BSON cannot hold, an unknown provider."""
    with pytest.raises(UsageError):
        await keys.decrypt("alice", Binary(b"plain", 0))
    with pytest.raises(UsageError):
        await keys.encrypt("alice", {1, 2})
    with pytest.raises(UsageError):
        await keys.rotate(provider="aws")
    with pytest.raises(UsageError):
        await keys.rotate(master_key={"key": "x"})


@pytest.mark.mongodb
async def test_the_key_vault_holds_wrapped_keys_under_a_unique_name(
    mongo_client: Any, mongo_db: Any
) -> None:
    """A key document names its user and holds key material encrypted by the master key; the
    index that makes names unique exists after the first key."""
    keys = UserKeys(options_for(mongo_db), mongo_client)
    await keys.encrypt("alice", "x")
    docs = await mongo_db["keyvault"].find({}).to_list()
    assert len(docs) == 1
    assert docs[0]["keyAltNames"] == [key_name("alice")]
    assert docs[0]["masterKey"] == {"provider": "local"}
    assert bytes(range(96)) not in bytes(docs[0]["keyMaterial"])
    indexes = await mongo_db["keyvault"].index_information()
    unique = [spec for spec in indexes.values() if spec.get("unique")]
    assert [spec["key"] for spec in unique] == [[("keyAltNames", 1)]]
    assert unique[0]["partialFilterExpression"] == {"keyAltNames": {"$exists": True}}
