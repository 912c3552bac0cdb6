"""Counting the database commands a client sends: the figure the command-budget tests hold."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from pymongo import AsyncMongoClient, monitoring

from asyncsession.repository.mongo import MongoSessionRepository

HANDSHAKES = frozenset(
    {"hello", "ismaster", "isMaster", "ping", "endSessions", "saslStart", "saslContinue"}
)


class CommandCounter(monitoring.CommandListener):
    """Counts the commands a client sends, handshakes and pings aside."""

    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []
        """The ``(command, collection)`` pairs sent (the collection, or other argument, the
        command named)."""

    @property
    def names(self) -> list[str]:
        """The names of the commands sent."""
        return [name for name, _ in self.sent]

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name not in HANDSHAKES:
            self.sent.append((event.command_name, str(event.command.get(event.command_name))))

    def clear(self) -> None:
        """Forget what was sent so far."""
        self.sent = []

    def take(self) -> list[tuple[str, str]]:
        """The ``(command, collection)`` pairs sent since the last call, forgetting them."""
        sent, self.sent = self.sent, []
        return sent

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


@asynccontextmanager
async def counted_repository(
    mongo_uri: str, **options: Any
) -> AsyncIterator[tuple[MongoSessionRepository, CommandCounter]]:
    """A repository on a database of its own (dropped after), on a client that counts."""
    counter = CommandCounter()
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[counter]
    )
    name = f"t_{uuid.uuid4().hex[:16]}"
    repository = MongoSessionRepository(client[name], **options)
    try:
        await repository.ensure_indexes()
        yield repository, counter
    finally:
        await client.drop_database(name)
        await client.close()
