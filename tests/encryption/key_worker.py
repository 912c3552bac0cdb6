"""A process that encrypts for one user on a shared key vault: `python key_worker.py URI NS USER`.

It connects, prints ``ready``, waits for a line on standard input (so that every process
starts at once), encrypts a value naming itself, prints the ciphertext (base64) and exits.
Run by tests/encryption/test_processes.py.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession.encryption import EncryptionOptions, UserKeys

LOCAL_KEY = base64.b64encode(bytes(range(96))).decode()


async def main(uri: str, namespace: str, user_id: str) -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri)
    try:
        await client.admin.command("ping")
        keys = UserKeys(EncryptionOptions.local(LOCAL_KEY, key_vault_namespace=namespace), client)
        print(json.dumps({"ready": True}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        encrypted = await keys.encrypt(user_id, f"from process {os.getpid()}")
        print(json.dumps({"pid": os.getpid(), "value": base64.b64encode(encrypted).decode()}))
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
