"""Leases work by default across OS processes: one model call per request id while its holder
lives, the holder's lease renewed however long it works, and a holder killed mid-turn replaced
within seconds.

Each process is ``turn_worker.py``: the chat client a web app builds with its defaults, over one
MongoDB store, with a scripted model of its own that answers when told to.
"""

from __future__ import annotations

import asyncio
import signal
import time
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase
from workers import Worker, start, workers

from asyncsession import DefaultSessionService, MongoSessionRepository

__all__ = ["workers"]

RENEWALS = 4
"""How many times the holder takes or renews its lease before it is killed: more than a whole
lease's length at the renewal interval, so only renewals kept the others waiting."""
TAKEOVER_SECONDS = 15
"""The bound on how long after the kill the other attempt calls the model."""


async def _model_call(worker: Worker) -> str:
    """The worker's next ``model`` line; before it, it may only have taken the lease."""
    while not (line := await worker.line()).startswith("model "):
        assert line == "lease", worker.lines
    return line


async def test_a_killed_holder_is_replaced_within_seconds_and_renews_until_then(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """Two processes send one request. The first calls the model and holds the turn; the second
    finds its lease and waits, calling no model, while the holder renews its lease for longer
    than a lease lasts. Killed with ``kill -9``, the holder is replaced within seconds: the
    second calls the model once and stores the turn once."""
    holder = await start(mongo_uri, mongo_db, workers)
    await _model_call(holder)
    retry = await start(mongo_uri, mongo_db, workers)
    assert await retry.line() == "waiting"
    for _ in range(RENEWALS):
        assert await holder.line() == "lease"

    killed_at = time.time()
    holder.process.send_signal(signal.SIGKILL)
    await holder.process.wait()
    called = await asyncio.wait_for(_model_call(retry), TAKEOVER_SECONDS + 5)

    assert 0 < float(called.split()[1]) - killed_at < TAKEOVER_SECONDS
    await retry.answer()
    assert (await retry.outcome())["reply"] == "the answer"
    assert [line for line in retry.lines if line.startswith("model ")] == [called]
    service = DefaultSessionService(MongoSessionRepository(mongo_db))
    assert [e.text for e in await service.get_events("s1")] == ["question?", "the answer"]
