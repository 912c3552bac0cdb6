"""A process that meets a new user through a session store: `python session_worker.py URI DB`.

It connects, prints ``ready``, waits for a line on standard input (so that every process
starts at once), then, on an encrypted `MongoSessionRepository`, creates a session of its own
for dave (with metadata), appends three events to it and one to the shared session
``shared``, and prints its session's id. Run by tests/encryption/test_processes.py.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)

sys.path.insert(0, os.path.dirname(__file__))
from encryption_support import encrypted, options_for


async def main(uri: str, db_name: str) -> None:
    client: AsyncMongoClient[Any] = AsyncMongoClient(uri, tz_aware=True)
    try:
        await client.admin.command("ping")
        database = client[db_name]
        repository = MongoSessionRepository(database, **encrypted(options_for(database)))
        print(json.dumps({"ready": True}), flush=True)
        await asyncio.to_thread(sys.stdin.readline)
        pid = os.getpid()
        mine = f"p{pid}"
        await repository.save(Session(id=mine, user_id="dave", metadata={"who": f"pid {pid}"}))
        texts = [f"{pid} question", f"{pid} answer", f"{pid} " * 600]  # the last is offloaded
        events = [
            SessionEvent(session_id=mine, message=UserMessage(text=texts[0])),
            SessionEvent(session_id=mine, message=AssistantMessage(text=texts[1])),
            SessionEvent(session_id=mine, message=AssistantMessage(text=texts[2])),
        ]
        assert await repository.append_events(mine, events, 0)
        shared = SessionEvent(session_id="shared", message=UserMessage(text=f"from {pid}"))
        assert await repository.append_events("shared", [shared])
        print(json.dumps({"pid": pid, "session": mine}), flush=True)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:3]))
