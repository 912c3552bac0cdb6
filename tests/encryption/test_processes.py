"""Many OS processes meet a new user at once: one data key, and each reads the others' values
(through the keys alone, and through session stores)."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from bson import Binary
from encryption_support import encrypted, options_for

from asyncsession import EventFilter, MongoSessionRepository, Session
from asyncsession.encryption import UserKeys
from asyncsession.encryption._keys import key_name

WORKER = Path(__file__).with_name("key_worker.py")
PROCESSES = 8


async def test_processes_racing_for_a_new_user_share_one_key(
    mongo_uri: str, mongo_client: Any, mongo_db: Any
) -> None:
    """Eight processes encrypt for the same new user at the same moment, on an empty key
    vault without its index: one key is created, and every value decrypts here."""
    namespace = f"{mongo_db.name}.keyvault"
    outputs = await _run_together(
        [(str(WORKER), mongo_uri, namespace, "dave") for _ in range(PROCESSES)]
    )
    docs = await mongo_db["keyvault"].find({"keyAltNames": key_name("dave")}).to_list()
    assert len(docs) == 1
    keys = UserKeys(options_for(mongo_db), mongo_client)
    for output in outputs:
        value = Binary(base64.b64decode(output["value"]), 6)
        assert uuid.UUID(bytes=bytes(value)[1:17]) == docs[0]["_id"].as_uuid()
        assert await keys.decrypt("dave", value) == f"from process {output['pid']}"
    assert await mongo_db["keyvault"].count_documents({}) == 1


SESSION_WORKER = Path(__file__).with_name("session_worker.py")


async def test_processes_meeting_a_new_user_through_the_store_lose_nothing(
    mongo_uri: str, mongo_client: Any, mongo_db: Any
) -> None:
    """Eight processes, each with an encrypted session store, meet dave at the same moment:
    each saves a session of his (encrypted metadata), appends to it (an offloaded body among
    the events) and to one shared session. One data key is created; every session, event and
    body decrypts in a cold store here, none lost or twice."""
    setting = options_for(mongo_db)
    repository = MongoSessionRepository(mongo_db, **encrypted(setting))
    await repository.save(Session(id="shared", user_id="dave"))  # no metadata: no key yet
    assert await mongo_db["keyvault"].count_documents({}) == 0
    outputs = await _run_together(
        [(str(SESSION_WORKER), mongo_uri, mongo_db.name) for _ in range(PROCESSES)]
    )
    assert len(await mongo_db["keyvault"].find({"keyAltNames": key_name("dave")}).to_list()) == 1
    assert await mongo_db["keyvault"].count_documents({}) == 1
    cold = MongoSessionRepository(mongo_db, **encrypted(UserKeys(setting, mongo_client)))
    for output in outputs:
        pid, session_id = output["pid"], output["session"]
        session = await cold.find_by_id(session_id)
        assert session is not None
        assert session.metadata == {"who": f"pid {pid}"}
        events = await cold.find_events(session_id, EventFilter.all())
        assert [e.text for e in events][:2] == [f"{pid} question", f"{pid} answer"]
        whole = await cold.read_body(session_id, events[2].id)
        assert whole is not None
        assert whole.text == f"{pid} " * 600
    shared = await cold.find_events("shared", EventFilter.all())
    assert sorted(e.text or "" for e in shared) == sorted(f"from {o['pid']}" for o in outputs)
    assert await cold.get_event_version("shared") == PROCESSES


async def _run_together(commands: list[tuple[str, ...]]) -> list[dict[str, Any]]:
    """Start a worker per command (a script and its arguments), wait until every one is ready,
    let them all go at once, and collect their outputs (one JSON object each)."""
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            *command,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for command in commands
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            async with asyncio.timeout(60):
                assert json.loads(await worker.stdout.readline()) == {"ready": True}
        for worker in workers:
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            await worker.stdin.drain()
        outputs = []
        for worker in workers:
            async with asyncio.timeout(60):
                stdout, _ = await worker.communicate()
            assert worker.returncode == 0
            outputs.append(json.loads(stdout))
        return outputs
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
