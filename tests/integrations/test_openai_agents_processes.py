"""Several OS processes writing one Agents SDK session on the test server."""

from __future__ import annotations

from typing import Any

from processes_support import start_writers
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.openai_agents import AgentsSession

_WRITER = """
import asyncio, sys
from pymongo import AsyncMongoClient
from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.openai_agents import AgentsSession

async def main(uri: str, db: str, who: str, count: int) -> None:
    client = AsyncMongoClient(uri, tz_aware=True)
    session = AgentsSession("shared", DefaultSessionService(MongoSessionRepository(client[db])))
    for n in range(count):
        await session.add_items([
            {"role": "user", "content": f"{who}-{n}-q"},
            {"type": "function_call", "call_id": f"{who}-{n}", "name": "f", "arguments": "{}"},
            {"type": "function_call_output", "call_id": f"{who}-{n}", "output": "ok"},
        ])
        if n % 3 == 2:  # a pop and a re-add racing the other writers
            popped = await session.pop_item()
            assert popped is not None
            await session.add_items([popped])
        print(f"{who}-{n}", flush=True)
    await client.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""


async def test_processes_lose_and_duplicate_nothing(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Four processes adding batches to one session, popping and re-adding items as they go:
    every acknowledged item is stored exactly once, and every call keeps its output."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    processes = await start_writers(_WRITER, mongo_uri, mongo_db.name, 4, 6)
    acknowledged: list[str] = []
    for process in processes:
        out, _ = await process.communicate()
        assert process.returncode == 0
        acknowledged += out.decode().split()
    assert len(acknowledged) == 24
    session = AgentsSession("shared", DefaultSessionService(repository))
    items: list[Any] = await session.get_items()
    assert len(items) == 72
    questions = [item["content"][:-2] for item in items if item.get("role") == "user"]
    assert sorted(questions) == sorted(acknowledged)
    calls = [item["call_id"] for item in items if item.get("type") == "function_call"]
    outputs = [item["call_id"] for item in items if item.get("type") == "function_call_output"]
    assert sorted(calls) == sorted(outputs) == sorted(acknowledged)
