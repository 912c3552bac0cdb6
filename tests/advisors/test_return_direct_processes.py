"""A request that ends on a return-direct tool, attempted by four OS processes sharing a MongoDB
store at once and retried by four more: the tool runs once and the model is called once.

Each process is ``return_direct_worker.py``: its own event loop, client, advisors, in-process
locks and tool. The scripted server (in this process) counts the model calls.
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

WORKER = Path(__file__).with_name("return_direct_worker.py")


async def start(
    uri: str, db: AsyncDatabase[dict[str, Any]], server: ScriptedOpenAIServer, *, stream: bool
) -> asyncio.subprocess.Process:
    """A worker process that has printed ``started`` (it is about to make its call)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        uri,
        db.name,
        server.base_url,
        "request-1",
        *(["stream"] if stream else []),
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"started"
    return process


async def outcome_of(process: asyncio.subprocess.Process) -> dict[str, Any]:
    out, _ = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0
    outcome: dict[str, Any] = json.loads(out.decode().strip().splitlines()[-1])
    return outcome


async def test_four_processes_and_four_retries_run_a_return_direct_tool_once(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Four overlapping attempts (two calls, two streams) while the model answers, then four
    retries: one model call, one run of the tool, the same results everywhere, one stored turn."""
    hold = asyncio.Event()
    reply = ScriptedReply.tool_calls(
        [ScriptedToolCall("ticket", {"number": 7}, id="c1")], hold=hold
    )
    async with ScriptedOpenAIServer([reply]) as server:
        attempts = [await start(mongo_uri, mongo_db, server, stream=i % 2 == 1) for i in range(4)]
        await asyncio.wait_for(server.wait_for_request(0), 60)
        hold.set()
        outcomes = [await outcome_of(p) for p in attempts]
        retries = [await start(mongo_uri, mongo_db, server, stream=i % 2 == 1) for i in range(4)]
        outcomes += [await outcome_of(p) for p in retries]

        assert len(server.requests) == 1
        server.assert_done()
    assert sum(o["runs"] for o in outcomes) == 1
    for i, outcome in enumerate(outcomes):
        assert outcome["finish_reason"] == "return_direct"
        assert outcome["results"] == [["c1", "ticket 7: open"]]
        assert outcome["streamed"] == ("ticket 7: open" if i % 2 == 1 else "")
    service = DefaultSessionService(MongoSessionRepository(mongo_db))
    events = [e for e in await service.get_events("s1") if e.message is not None]
    assert [e.message_type.value for e in events] == ["user", "assistant", "tool"]
    assert events[2].metadata == {"return_direct": True}
