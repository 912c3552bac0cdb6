"""Many OS processes meet a new user at once: one data key, and each reads the others' values."""

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
from encryption_support import options_for

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
    workers = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            str(WORKER),
            mongo_uri,
            namespace,
            "dave",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        for _ in range(PROCESSES)
    ]
    try:
        for worker in workers:
            assert worker.stdout is not None
            async with asyncio.timeout(60):
                assert json.loads(await worker.stdout.readline()) == {"ready": True}
        for worker in workers:  # all of them start together
            assert worker.stdin is not None
            worker.stdin.write(b"go\n")
            await worker.stdin.drain()
        outputs = []
        for worker in workers:
            async with asyncio.timeout(60):
                stdout, _ = await worker.communicate()
            assert worker.returncode == 0
            outputs.append(json.loads(stdout))
    finally:
        for worker in workers:
            if worker.returncode is None:
                worker.kill()
                await worker.wait()
    docs = await mongo_db["keyvault"].find({"keyAltNames": key_name("dave")}).to_list()
    assert len(docs) == 1
    keys = UserKeys(options_for(mongo_db), mongo_client)
    for output in outputs:
        value = Binary(base64.b64decode(output["value"]), 6)
        assert uuid.UUID(bytes=bytes(value)[1:17]) == docs[0]["_id"].as_uuid()
        assert await keys.decrypt("dave", value) == f"from process {output['pid']}"
    assert await mongo_db["keyvault"].count_documents({}) == 1
