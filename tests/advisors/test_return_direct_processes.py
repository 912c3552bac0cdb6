"""A request that ends on a return-direct tool, attempted by four OS processes sharing a MongoDB
store at once and retried by four more: the tool runs once and the model is called once.

Each process is ``turn_worker.py``: its own event loop, client, store and tool, and a scripted
model of its own that says when it is called and answers when told to.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from workers import Worker, start, workers

from asyncsession import DefaultSessionService, MongoSessionRepository

__all__ = ["workers"]


async def test_four_processes_and_four_retries_run_a_return_direct_tool_once(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """Four overlapping attempts (two calls, two streams) while the model answers, then four
    retries: one model call, one run of the tool, the same results everywhere, one stored turn."""
    modes = ["call", "stream"] * 2
    attempts = [await start(mongo_uri, mongo_db, workers, mode, "ticket") for mode in modes]
    calls = [asyncio.create_task(worker.printed("model ")) for worker in attempts]
    await asyncio.wait(calls, timeout=60, return_when="FIRST_COMPLETED")
    for worker in attempts:
        await worker.answer()
    outcomes = [await worker.outcome() for worker in attempts]
    retries = [await start(mongo_uri, mongo_db, workers, mode, "ticket") for mode in modes]
    outcomes += [await worker.outcome() for worker in retries]
    for task in calls:
        task.cancel()
    await asyncio.gather(*calls, return_exceptions=True)

    assert sum(worker.model_calls for worker in [*attempts, *retries]) == 1
    assert sum(o["runs"] for o in outcomes) == 1
    for i, outcome in enumerate(outcomes):
        assert outcome["finish_reason"] == "return_direct"
        assert outcome["results"] == [["c1", "ticket 7: open"]]
        assert outcome["streamed"] == ("ticket 7: open" if i % 2 == 1 else "")
    service = DefaultSessionService(MongoSessionRepository(mongo_db))
    events = [e for e in await service.get_events("s1") if e.message is not None]
    assert [e.message_type for e in events] == ["user", "assistant", "tool"]
    assert events[2].metadata == {"return_direct": True}
