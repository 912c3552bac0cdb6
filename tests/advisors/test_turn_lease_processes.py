"""One model call per request id across four OS processes sharing a MongoDB store.

Each process is ``lease_worker.py``: its own event loop, client, advisors and in-process locks.
The scripted server (in this process) counts the model calls.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    MongoSessionRepository,
    UserMessage,
)
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

WORKER = Path(__file__).with_name("lease_worker.py")


async def start(
    uri: str,
    db: AsyncDatabase[dict[str, Any]],
    server: ScriptedOpenAIServer,
    lease: float = 60,
    mode: str = "call",
) -> asyncio.subprocess.Process:
    """A worker process that has printed ``started`` (it is about to make its call, or its
    stream with ``mode="stream"``)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        uri,
        db.name,
        server.base_url,
        "s1",
        "request-1",
        str(lease),
        "60",
        mode,
        stdout=asyncio.subprocess.PIPE,
    )
    assert process.stdout is not None
    assert (await asyncio.wait_for(process.stdout.readline(), 60)).strip() == b"started"
    return process


async def output_of(process: asyncio.subprocess.Process, read: bytes = b"") -> dict[str, Any]:
    """What the worker printed after ``started`` (with ``read``, the lines read already): its
    last line's JSON, and ``refused``: whether it waited for another attempt's lease."""
    out, _ = await asyncio.wait_for(process.communicate(), 90)
    assert process.returncode == 0
    lines = (read + out).decode().strip().splitlines()
    result: dict[str, Any] = json.loads(lines[-1])
    result["refused"] = "refused" in lines[:-1]
    return result


async def reply_of(process: asyncio.subprocess.Process) -> str:
    text: str = (await output_of(process))["reply"]
    return text


def model_calls(server: ScriptedOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.endswith("/chat/completions"))


async def texts(db: AsyncDatabase[dict[str, Any]]) -> list[str | None]:
    service = DefaultSessionService(MongoSessionRepository(db))
    return [e.text for e in await service.get_events("s1") if e.message is not None]


@pytest.mark.parametrize("new_session", [True, False], ids=["new-session", "existing-session"])
async def test_four_processes_with_one_request_id_call_the_model_once(
    new_session: bool, mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Four overlapping attempts in four processes: one model call, one reply, four answers."""
    if not new_session:
        service = DefaultSessionService(MongoSessionRepository(mongo_db))
        await service.create(CreateSessionRequest(id="s1", user_id="alice"))
        await service.append_message("s1", UserMessage(text="earlier"))
        await service.append_message("s1", AssistantMessage(text="before"))
    hold = asyncio.Event()
    async with ScriptedOpenAIServer([ScriptedReply.text("the answer", hold=hold)]) as server:
        processes = [await start(mongo_uri, mongo_db, server) for _ in range(4)]
        await asyncio.wait_for(server.wait_for_request(0), 60)
        hold.set()
        replies = [await reply_of(p) for p in processes]

        assert replies == ["the answer"] * 4
        assert model_calls(server) == 1
        server.assert_done()
    earlier = [] if new_session else ["earlier", "before"]
    assert await texts(mongo_db) == [*earlier, "question?", "the answer"]


async def test_four_streaming_processes_with_one_request_id_call_the_model_once(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Four streams of one request on a new session, in four processes: the three that find
    the request leased wait, then stream the holder's stored reply; one model call."""
    hold = asyncio.Event()
    answer = "the streamed answer"
    script = [ScriptedReply.text(answer, hold=hold, chunk_size=3)]
    async with ScriptedOpenAIServer(script) as server:
        processes = [await start(mongo_uri, mongo_db, server, mode="stream") for _ in range(4)]
        await asyncio.wait_for(server.wait_for_request(0), 60)
        lines = [asyncio.create_task(p.stdout.readline()) for p in processes if p.stdout]
        assert len(lines) == 4
        pending = set(lines)
        async with asyncio.timeout(60):
            while len(pending) > 1:  # the holder prints nothing more until the model answered
                _, pending = await asyncio.wait(pending, return_when="FIRST_COMPLETED")
        assert sorted(line.result() for line in lines if line.done()) == [b"refused\n"] * 3
        hold.set()
        await asyncio.wait_for(asyncio.gather(*lines), 60)
        pairs = zip(processes, lines, strict=True)
        outputs = [await output_of(process, line.result()) for process, line in pairs]

        assert sorted(o["refused"] for o in outputs) == [False, True, True, True]
        assert [o["streamed"] for o in outputs] == [answer] * 4
        assert [o["reply"] for o in outputs] == [answer] * 4
        assert model_calls(server) == 1
        server.assert_done()
    assert await texts(mongo_db) == ["question?", answer]


async def test_a_holder_killed_mid_turn_is_replaced_after_its_lease_expires(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """``kill -9`` while the model answers: a retry in another process takes over once."""
    async with ScriptedOpenAIServer(
        [ScriptedReply.text("never sent", hold=asyncio.Event()), ScriptedReply.text("retried")]
    ) as server:
        holder = await start(mongo_uri, mongo_db, server, lease=2)
        await asyncio.wait_for(server.wait_for_request(0), 60)
        holder.send_signal(signal.SIGKILL)
        await holder.wait()
        retries = [await start(mongo_uri, mongo_db, server, lease=2) for _ in range(3)]
        replies = [await reply_of(p) for p in retries]

        assert holder.returncode == -signal.SIGKILL
        assert replies == ["retried"] * 3
        assert model_calls(server) == 2  # the killed attempt's, and the one retry's
    assert await texts(mongo_db) == ["question?", "retried"]
