"""The MongoDB memory store writes durably: journaled majority, whatever the client's default."""

from __future__ import annotations

import uuid
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from pymongo import AsyncMongoClient, monitoring

from asyncsession.memory import MongoMemoryStore


class _Writes(monitoring.CommandListener):
    """Records the write concern of every write command sent."""

    def __init__(self) -> None:
        self.concerns: dict[str, list[Any]] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name in ("insert", "update", "delete", "findAndModify"):
            concern = event.command.get("writeConcern")
            self.concerns.setdefault(event.command_name, []).append(concern)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


async def test_every_write_of_the_memory_store_asks_for_journaled_majority(
    mongo_uri: str,
) -> None:
    """Create, edit, rename and delete each send ``w: majority, j: true`` over a ``w=1`` client."""
    listener = _Writes()
    parts = urlsplit(mongo_uri)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k.lower() not in ("w", "journal")]
    base = urlunsplit(parts._replace(query=urlencode(query)))
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        base, w=1, event_listeners=[listener]
    )
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        store = MongoMemoryStore(client[name], scope="alice")
        await store.ensure_indexes()
        created = await store.write("notes.md", "one", expected_version=None)
        await store.write("notes.md", "two", expected_version=created.version)
        await store.rename("notes.md", "kept.md")
        await store.delete("kept.md")
    finally:
        await client.drop_database(name)
        await client.close()

    assert set(listener.concerns) >= {"insert", "update", "delete"}
    sent = [concern for concerns in listener.concerns.values() for concern in concerns]
    assert sent
    assert all(concern == {"w": "majority", "j": True} for concern in sent), listener.concerns
