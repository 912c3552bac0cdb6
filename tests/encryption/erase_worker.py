"""An erasure that is killed: `python erase_worker.py URI DB STEP` runs the store's `erase_user`
for alice and ``kill -9``s its own process right after step STEP has been written:
``record`` (the ledger), ``sessions`` (their ids recorded), ``key`` (the data key deleted),
``commits`` and ``chunks`` (inside the first session's delete: the server has deleted its
commits, or the chunks of its offloaded bodies, and the process dies before it hears of it),
``session`` (the first session deleted), ``memories`` (the first memory entry deleted).
Run by tests/encryption/test_erasure.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from pymongo import AsyncMongoClient, monitoring

from asyncsession import MongoSessionRepository
from asyncsession.encryption import UserKeys
from asyncsession.memory import MongoMemoryStore

sys.path.insert(0, os.path.dirname(__file__))
from encryption_support import encrypted, options_for

_AFTER_DELETE = {"commits": "session_commits", "chunks": "session_bodies.chunks"}
"""Steps that die as a delete command on that collection succeeds."""


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


class _DieAfterDelete(monitoring.CommandListener):
    """Kills the process when the server has answered a delete on ``collection``."""

    def __init__(self, collection: str | None) -> None:
        self.collection = collection
        self.names: dict[int, str] = {}

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name == "delete":
            self.names[event.request_id] = str(event.command.get("delete"))

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        name = self.names.pop(event.request_id, None)
        if name is not None and name == self.collection:
            _die()

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        self.names.pop(event.request_id, None)


async def main(uri: str, db_name: str, step: str) -> None:
    listener = _DieAfterDelete(_AFTER_DELETE.get(step))
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True, event_listeners=[listener])
    database = client[db_name]
    keys = UserKeys(options_for(database), client)
    repository = MongoSessionRepository(database, **encrypted(keys))
    ledger = repository._ledger  # pyright: ignore[reportPrivateUsage]
    memories = MongoMemoryStore(database, scope="-", encryption=keys)

    def after(obj: Any, name: str, when: str) -> None:
        real = getattr(obj, name)

        async def wrapped(*args: Any, **kwargs: Any) -> Any:
            result = await real(*args, **kwargs)
            if step == when:
                _die()
            return result

        setattr(obj, name, wrapped)

    after(ledger, "begin", "record")
    after(ledger, "add_sessions", "sessions")
    after(keys, "delete_key", "key")
    after(repository, "delete", "session")
    real_with_scope = memories.with_scope

    def with_scope(scope: str) -> Any:
        store = real_with_scope(scope)
        after(store, "delete", "memories")
        return store

    memories.with_scope = with_scope  # type: ignore[method-assign]
    await repository.erase_user("alice", memories=memories)
    print("finished", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
