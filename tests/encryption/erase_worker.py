"""An erasure that is killed: `python erase_worker.py URI DB STEP` runs `UserEraser.erase_user`
for alice and ``kill -9``s its own process right after step STEP has been written:
``record`` (the ledger), ``sessions`` (their ids recorded), ``key`` (the data key deleted),
``session`` (the first session deleted), ``memories`` (the first memory entry deleted).
Run by tests/encryption/test_erasure.py.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import MongoSessionRepository
from asyncsession.encryption import UserKeys
from asyncsession.erasure import MongoErasureLedger, UserEraser
from asyncsession.memory import MongoMemoryStore

sys.path.insert(0, os.path.dirname(__file__))
from encryption_support import options_for


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


async def main(uri: str, db_name: str, step: str) -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
    database = client[db_name]
    repository = MongoSessionRepository(database)
    ledger = MongoErasureLedger(database)
    keys = UserKeys(options_for(database), client)
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
    eraser = UserEraser(repository, ledger=ledger, keys=keys, memories=memories)
    await eraser.erase_user("alice")
    print("finished", flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:4]))
