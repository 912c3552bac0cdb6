"""`asyncsession erase-user` and `asyncsession rotate-keys` on the test server."""

from __future__ import annotations

import base64
import io
import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from bson import Binary
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from encryption_support import LOCAL_KEY

from asyncsession import (
    AssistantMessage,
    EventFilter,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.cli import run
from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.exceptions import ContentErased, EncryptionError
from asyncsession.memory import MongoMemoryStore

pytestmark = pytest.mark.mongodb
RAW: CodecOptions[RawBSONDocument] = CodecOptions(document_class=RawBSONDocument)


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


async def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = await run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
async def deployment(mongo_uri: str, mongo_client: Any, tmp_path: Path) -> Any:
    """A database with alice's and bob's sessions and memories, and the setting's file."""
    name = f"cli_{uuid.uuid4().hex[:12]}"
    database = mongo_client[name]
    setting_file = tmp_path / "encryption.json"
    namespace = f"{name}.keyvault"
    setting_file.write_text(
        json.dumps(
            {"kms_providers": {"local": {"key": LOCAL_KEY}}, "key_vault_namespace": namespace}
        )
    )
    keys = UserKeys(EncryptionOptions.local(LOCAL_KEY, key_vault_namespace=namespace), mongo_client)
    repository = MongoSessionRepository(database, encryption=keys)
    for session_id, user in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
        await repository.save(Session(id=session_id, user_id=user, metadata={"about": user}))
        await repository.append_events(
            session_id,
            [
                SessionEvent(session_id=session_id, message=UserMessage(text=f"{user} asks")),
                SessionEvent(session_id=session_id, message=AssistantMessage(text="answer")),
            ],
        )
    for user in ("alice", "bob"):
        store = MongoMemoryStore(database, scope=user, encryption=keys)
        await store.write("MEMORY.md", f"{user}'s memory", expected_version=None)
    backup = await keys.encrypt("alice", "backup")
    base = ["--uri", mongo_uri, "--db", name]
    try:
        yield base, str(setting_file), database, keys, backup
    finally:
        await mongo_client.drop_database(name)


async def test_erase_user_needs_a_confirmation(
    deployment: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Without --yes: refused when nobody can answer; on a terminal, the user id typed back
    confirms, anything else erases nothing."""
    base, setting, database, _, _ = deployment
    monkeypatch.setattr(sys, "stdin", io.StringIO("alice\n"))  # not a terminal
    code, _, err = await _cli(*base, "erase-user", "alice", "--encryption", setting)
    assert code == 2
    assert "--yes" in err
    monkeypatch.setattr(sys, "stdin", _Tty("bob\n"))
    code, _, err = await _cli(*base, "erase-user", "alice", "--encryption", setting)
    assert code == 2
    assert "nothing was erased" in err
    assert await database["sessions"].count_documents({"user_id": "alice"}) == 2
    monkeypatch.setattr(sys, "stdin", _Tty("alice\n"))
    code, out, err = await _cli(*base, "erase-user", "alice", "--encryption", setting)
    assert code == 0, err
    assert "Type the user id to confirm" in err
    assert "erased user 'alice': 1 data key(s), 2 session(s), 1 memory entry" in out


async def test_erase_user_with_yes_erases_for_good(deployment: Any) -> None:
    """--yes --json: the report; the key, sessions and memories are gone, bob's are not."""
    base, setting, database, keys, backup = deployment
    code, out, err = await _cli(
        *base, "--json", "erase-user", "alice", "--yes", "--encryption", setting
    )
    assert code == 0, err
    assert json.loads(out) == {
        "user_id": "alice",
        "keys_deleted": 1,
        "sessions_deleted": 2,
        "memory_entries_deleted": 1,
        "resumed": False,
    }
    assert await database["sessions"].count_documents({}) == 1
    assert await database["memories"].count_documents({"scope": "alice"}) == 0
    assert await database["memories"].count_documents({"scope": "bob"}) == 1
    with pytest.raises(ContentErased):
        await UserKeys(keys.options, database.client).decrypt("alice", backup)


async def test_erase_user_pending_finishes_interrupted_erasures(deployment: Any) -> None:
    """--pending runs what the ledger holds; with nothing pending it says so."""
    base, setting, database, _, _ = deployment
    await database["erasures"].insert_one(
        {"_id": "alice", "started_at": datetime.now(UTC), "session_ids": []}
    )
    code, out, err = await _cli(*base, "erase-user", "--pending", "--encryption", setting)
    assert code == 0, err
    assert "erased user 'alice'" in out
    assert "(finished an interrupted erasure)" in out
    code, out, _ = await _cli(*base, "erase-user", "--pending", "--encryption", setting)
    assert (code, out.strip()) == (0, "no erasure was pending")
    code, _, err = await _cli(*base, "erase-user", "alice", "--pending", "--yes")
    assert code == 2


async def test_erase_user_without_the_setting_warns(deployment: Any) -> None:
    """Without the encryption setting the content is deleted, the key is not, and it says so
    (sessions written without encryption); encrypted sessions cannot even be listed: the
    erasure stops before deleting anything, asking for the setting, and the same erasure
    with the setting (``--pending``) finishes it."""
    base, setting, database, keys, _ = deployment
    plain = MongoSessionRepository(database)
    await plain.save(Session(id="c1", user_id="carol"))
    code, _, err = await _cli(*base, "erase-user", "carol", "--yes")
    assert code == 0, err
    assert "no data key is deleted" in err
    assert await database["sessions"].count_documents({"user_id": "carol"}) == 0
    code, _, err = await _cli(*base, "erase-user", "alice", "--yes")
    assert code == 1
    assert "encryption setting" in err
    assert await database["sessions"].count_documents({"user_id": "alice"}) == 2
    assert await keys.has_key("alice")
    code, out, err = await _cli(*base, "erase-user", "--pending", "--encryption", setting)
    assert code == 0, err
    assert "erased user 'alice': 1 data key(s), 2 session(s)" in out
    assert await database["sessions"].count_documents({"user_id": "alice"}) == 0
    assert not await keys.has_key("alice")


async def test_rotate_keys_rewraps_every_key(deployment: Any) -> None:
    """rotate-keys rewraps each user's key (or one user's); the content still decrypts."""
    base, setting, database, keys, backup = deployment
    commits = database.get_collection("session_commits", codec_options=RAW)
    content = sorted(doc.raw for doc in await commits.find({}).to_list())
    before = {d["_id"]: d["keyMaterial"] for d in await database["keyvault"].find().to_list()}
    code, out, err = await _cli(*base, "--json", "rotate-keys", "--encryption", setting)
    assert code == 0, err
    assert json.loads(out) == {"rewrapped": 2}
    after = {d["_id"]: d["keyMaterial"] for d in await database["keyvault"].find().to_list()}
    assert before.keys() == after.keys()
    assert all(before[k] != after[k] for k in before)
    code, out, _ = await _cli(*base, "rotate-keys", "--user", "bob", "--encryption", setting)
    assert (code, out.strip()) == (0, "rewrapped 1 data key(s); no content was re-encrypted")
    assert await UserKeys(keys.options, database.client).decrypt("alice", backup) == "backup"
    assert sorted(doc.raw for doc in await commits.find({}).to_list()) == content  # untouched
    code, _, err = await _cli(*base, "rotate-keys")
    assert code == 2
    assert "encryption setting" in err


async def test_rotate_keys_moves_every_key_to_a_new_master_key(
    deployment: Any, tmp_path: Path
) -> None:
    """rotate-keys --to another provider of the setting: the keys are rewrapped under the new
    master key, the content is not touched, and a setting holding only the new master key
    reads every session; the old master key can be retired."""
    base, _, database, keys, _ = deployment
    new_key = base64.b64encode(bytes(range(96, 192))).decode()
    namespace = keys.options.key_vault_namespace
    both = tmp_path / "both.json"
    both.write_text(
        json.dumps(
            {
                "kms_providers": {"local": {"key": LOCAL_KEY}, "local:new": {"key": new_key}},
                "provider": "local",
                "key_vault_namespace": namespace,
            }
        )
    )
    commits = database.get_collection("session_commits", codec_options=RAW)
    content = sorted(doc.raw for doc in await commits.find({}).to_list())
    code, out, err = await _cli(
        *base, "--json", "rotate-keys", "--to", "local:new", "--encryption", str(both)
    )
    assert code == 0, err
    assert json.loads(out) == {"rewrapped": 2}
    assert sorted(doc.raw for doc in await commits.find({}).to_list()) == content
    providers = {d["masterKey"]["provider"] for d in await database["keyvault"].find().to_list()}
    assert providers == {"local:new"}
    only_new = EncryptionOptions(
        kms_providers={"local:new": {"key": new_key}}, key_vault_namespace=namespace
    )
    reader = MongoSessionRepository(database, encryption=only_new)
    for session_id, user in (("a1", "alice"), ("b1", "bob")):
        events = await reader.find_events(session_id, EventFilter.all())
        assert [e.text for e in events] == [f"{user} asks", "answer"]
    with pytest.raises(EncryptionError):  # the old master key opens nothing any more
        await UserKeys(keys.options, database.client).decrypt("alice", await _a_body(database))


async def _a_body(database: Any) -> Binary:
    doc = await database["session_commits"].find_one({"session": "a1"})
    body: Binary = doc["events"][0]["body"]
    return body


async def test_export_decrypts_for_the_owner_with_the_setting(deployment: Any) -> None:
    """export (and show) with the setting write the session decrypted; without it, a usage
    error that asks for the setting, never ciphertext."""
    base, setting, _, _, _ = deployment
    code, out, err = await _cli(*base, "--encryption", setting, "export", "a1")
    assert code == 0, err
    events = [SessionEvent.model_validate_json(line) for line in out.splitlines()]
    assert [e.text for e in events] == ["alice asks", "answer"]
    code, out, err = await _cli(*base, "show", "a1", "--encryption", setting)
    assert code == 0, err
    assert "alice asks" in out
    code, out, err = await _cli(*base, "export", "a1")
    assert code == 1
    assert "encryption setting" in err
    assert "alice asks" not in out
