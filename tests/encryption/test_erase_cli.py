"""`asyncsession erase-user` and `asyncsession rotate-keys` on the test server."""

from __future__ import annotations

import io
import json
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from encryption_support import LOCAL_KEY

from asyncsession import MongoSessionRepository, Session
from asyncsession.cli import run
from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.exceptions import ContentErased
from asyncsession.memory import MongoMemoryStore

pytestmark = pytest.mark.mongodb


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
    repository = MongoSessionRepository(database)
    for session_id, user in (("a1", "alice"), ("a2", "alice"), ("b1", "bob")):
        await repository.save(Session(id=session_id, user_id=user))
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
    """Without the encryption setting the content is deleted, the key is not, and it says so."""
    base, _, database, keys, _ = deployment
    code, _, err = await _cli(*base, "erase-user", "alice", "--yes")
    assert code == 0
    assert "no data key is deleted" in err
    assert await database["sessions"].count_documents({"user_id": "alice"}) == 0
    assert await keys.has_key("alice")


async def test_rotate_keys_rewraps_every_key(deployment: Any) -> None:
    """rotate-keys rewraps each user's key (or one user's); the content still decrypts."""
    base, setting, database, keys, backup = deployment
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
    code, _, err = await _cli(*base, "rotate-keys")
    assert code == 2
    assert "encryption setting" in err
