"""Leases work by default across OS processes: one model call per request id while its holder
lives, the holder's lease renewed however long it works, and a holder killed mid-turn replaced
within seconds.

Each process is ``turn_worker.py``: the chat client a web app builds with its defaults, over one
MongoDB store, with a scripted model of its own that answers when told to.
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository

WORKER = Path(__file__).with_name("turn_worker.py")
RENEWALS = 4
"""How many times the holder takes or renews its lease before it is killed: more than a whole
lease's length at the renewal interval, so only renewals kept the others waiting."""
TAKEOVER_SECONDS = 15
"""The bound on how long after the kill the other attempt calls the model."""


class Worker:
    """A worker process and the lines it printed."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []

    async def line(self) -> str:
        assert self.process.stdout is not None
        raw = await asyncio.wait_for(self.process.stdout.readline(), 60)
        assert raw, f"the worker ended early after {self.lines}"
        self.lines.append(raw.decode().strip())
        return self.lines[-1]

    async def answer(self) -> dict[str, Any]:
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()
        while not (await self.line()).startswith("{"):
            pass
        assert await asyncio.wait_for(self.process.wait(), 60) == 0
        result: dict[str, Any] = json.loads(self.lines[-1])
        return result


@pytest.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    """The workers a test starts; any still running at its end is killed."""
    started: list[Worker] = []
    yield started
    for worker in started:
        if worker.process.returncode is None:
            worker.process.kill()
            await worker.process.wait()


async def start(uri: str, db: AsyncDatabase[dict[str, Any]], workers: list[Worker]) -> Worker:
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        uri,
        db.name,
        "s1",
        "request-1",
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    worker = Worker(process)
    workers.append(worker)
    assert await worker.line() == "started"
    return worker


async def test_a_killed_holder_is_replaced_within_seconds_and_renews_until_then(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """Two processes send one request. The first calls the model and holds the turn; the second
    finds its lease and waits, calling no model, while the holder renews its lease for longer
    than a lease lasts. Killed with ``kill -9``, the holder is replaced within seconds: the
    second calls the model once and stores the turn once."""
    holder = await start(mongo_uri, mongo_db, workers)
    assert (await holder.line()).startswith("model ")
    retry = await start(mongo_uri, mongo_db, workers)
    assert await retry.line() == "waiting"
    for _ in range(RENEWALS):
        assert await holder.line() == "lease"

    killed_at = time.time()
    holder.process.send_signal(signal.SIGKILL)
    await holder.process.wait()
    called = await asyncio.wait_for(retry.line(), TAKEOVER_SECONDS + 5)

    assert called.startswith("model "), retry.lines
    assert 0 < float(called.split()[1]) - killed_at < TAKEOVER_SECONDS
    assert (await retry.answer())["reply"] == "the answer"
    assert [line for line in retry.lines if line.startswith("model ")] == [called]
    service = DefaultSessionService(MongoSessionRepository(mongo_db))
    assert [e.text for e in await service.get_events("s1")] == ["question?", "the answer"]
