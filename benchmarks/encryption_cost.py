"""What encryption at rest costs: time per value, bytes per message, a memory store's throughput.

Run ``python benchmarks/encryption_cost.py`` (``--ops`` to choose the number of operations). It
uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD``. It prints, with the URI:

- the time to encrypt and to decrypt one message body with a warm user key (in process, and
  through a MongoDB key vault: both send no command once the key is warm);
- the bytes a message body takes in clear (its UTF-8 text) and encrypted (the ciphertext),
  for a short user message, an assistant reply and a tool call;
- the throughput of ``MongoMemoryStore`` write-then-read cycles without and with encryption,
  and the commands each cycle sends (equal: encryption adds none once the key is warm).

Nothing here is a timed test.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
import uuid
from typing import Any

from pymongo import AsyncMongoClient, monitoring

from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.memory import MongoMemoryStore
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

BODIES: dict[str, str] = {
    "user message (60 B)": json.dumps(
        {"type": "USER", "text": "What did my doctor say about the dose?"}
    ),
    "assistant reply (1 KB)": json.dumps({"type": "ASSISTANT", "text": "x" * 1000}),
    "tool call (300 B)": json.dumps(
        {
            "type": "ASSISTANT",
            "tool_calls": [
                {"id": "call_1", "name": "lookup_prescription", "arguments": '{"patient": "p-1"}'}
            ],
            "text": "y" * 200,
        }
    ),
}


class _Count(monitoring.CommandListener):
    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name not in {"hello", "isMaster", "ismaster", "ping", "endSessions"}:
            self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def _per_value(keys: UserKeys, body: str, ops: int) -> tuple[float, float]:
    encrypted = await keys.encrypt("alice", body)
    start = time.perf_counter()
    for _ in range(ops):
        encrypted = await keys.encrypt("alice", body)
    middle = time.perf_counter()
    for _ in range(ops):
        await keys.decrypt("alice", encrypted)
    end = time.perf_counter()
    return (middle - start) / ops * 1e6, (end - middle) / ops * 1e6


async def _store_cycles(store: MongoMemoryStore, ops: int) -> float:
    start = time.perf_counter()
    for i in range(ops):
        written = await store.write(
            f"f{i}.md", "a memory of about eighty bytes " * 3, expected_version=None
        )
        assert (await store.read(f"f{i}.md")) is not None
        del written
    return ops / (time.perf_counter() - start)


async def run(uri: str, ops: int) -> None:
    counter = _Count()
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True, event_listeners=[counter])
    database = client[f"bench_{uuid.uuid4().hex[:10]}"]
    setting = EncryptionOptions.local(
        EncryptionOptions.generate_local_key(), key_vault_namespace=f"{database.name}.keyvault"
    )
    try:
        print(f"URI: {uri}")
        for label, keys in (
            ("in process", UserKeys(setting)),
            ("MongoDB key vault", UserKeys(setting, client)),
        ):
            for name, body in BODIES.items():
                enc, dec = await _per_value(keys, body, ops)
                print(f"{label:18} {name:24} encrypt {enc:7.1f} us  decrypt {dec:7.1f} us")
        keys = UserKeys(setting, client)
        for name, body in BODIES.items():
            clear = len(body.encode())
            encrypted = len(await keys.encrypt("alice", body))
            growth = encrypted - clear
            print(f"bytes {name:24} clear {clear:5} B  encrypted {encrypted:5} B  (+{growth} B)")
        plain = MongoMemoryStore(database, scope="plain")
        secret = MongoMemoryStore(database, scope="alice", encryption=keys)
        await plain.ensure_indexes()
        await secret.write("warm.md", "warm the key", expected_version=None)
        rates: dict[str, float] = {}
        commands: dict[str, list[str]] = {}
        for label, store in (("plain", plain), ("encrypted", secret)):
            counter.names.clear()
            await store.write("probe.md", "x", expected_version=None)
            await store.read("probe.md")
            commands[label] = list(counter.names)
            rates[label] = await _store_cycles(store, ops)
        cost = (1 - rates["encrypted"] / rates["plain"]) * 100
        print(
            f"MongoMemoryStore write+read: plain {rates['plain']:.0f}/s, encrypted "
            f"{rates['encrypted']:.0f}/s ({cost:+.1f} % cost)"
        )
        print(f"commands per cycle: plain {commands['plain']}, encrypted {commands['encrypted']}")
    finally:
        await client.drop_database(database.name)
        await client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=500)
    args = parser.parse_args()
    uri = os.environ.get("MONGODB_URI")
    if uri:
        asyncio.run(run(uri, args.ops))
        return
    executable = find_server_executable()
    if executable is None:
        raise SystemExit("set MONGODB_URI or ASYNCSESSION_SECANTUSD")
    server = LocalMongoServer(executable)
    server.start()
    try:
        asyncio.run(run(server.uri(), args.ops))
    finally:
        server.stop()


if __name__ == "__main__":
    main()
