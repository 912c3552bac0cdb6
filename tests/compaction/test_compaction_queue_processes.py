"""The compaction queue across OS processes: a killed worker, signals, coalescing, one
compactor per session across a fleet, and the ``asyncsession worker`` command."""

from __future__ import annotations

import asyncio
import json
import signal
from collections import Counter
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase
from queue_support import (
    ArchiveOldest,
    Outcomes,
    WorkerProcess,
    always,
    archived_count,
    new_session,
    reap,
)

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.compaction import MongoCompactionQueue, MongoCompactionWorker


@pytest.fixture
async def service(mongo_db: AsyncDatabase[dict[str, Any]]) -> DefaultSessionService:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return DefaultSessionService(repository)


@pytest.fixture
async def queue(mongo_db: AsyncDatabase[dict[str, Any]]) -> AsyncIterator[MongoCompactionQueue]:
    async with MongoCompactionQueue(mongo_db) as queue:
        await queue.ensure_indexes()
        yield queue


@pytest.fixture
async def processes() -> AsyncIterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    try:
        yield started
    finally:
        await reap(started)


async def test_a_killed_workers_job_is_taken_over_after_its_lease_and_applied_once(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """SIGKILL a worker process mid-compaction: its job stays leased until the lease expires,
    then another worker claims it and the compaction is applied exactly once."""
    sid = await new_session(service)
    await queue.submit(sid)
    doomed = await WorkerProcess.start(
        "work", mongo_uri, mongo_db.name, "--mode", "gate", "--lease", "5", "--owner", "doomed"
    )
    processes.append(doomed)
    await doomed.until("started", sid)
    held = await queue.get_job(sid)
    assert held is not None
    assert (held.state, held.lease_owner, held.attempts) == ("running", "doomed", 1)
    assert await doomed.kill() == -signal.SIGKILL
    assert await queue.claim("too-early", timedelta(seconds=5)) is None  # the lease still holds

    outcomes = Outcomes()
    async with MongoCompactionWorker(
        service,
        always,
        ArchiveOldest(),
        queue=queue,
        wake="poll",
        poll_interval=0.05,
        on_outcome=outcomes,
        owner="heir",
    ):
        (outcome,) = await outcomes.wait_for(1)
    assert outcome.ok
    assert outcome.result is not None
    assert outcome.result.applied
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts, job.applied, job.lease_owner) == ("done", 2, True, None)
    assert await archived_count(service, sid) == 1


async def test_sigterm_gives_a_held_job_back_when_the_grace_is_over(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """SIGTERM with no grace left cancels the held compaction, re-queues its job with the
    attempt uncounted, and exits 0; nothing is applied."""
    sid = await new_session(service)
    await queue.submit(sid)
    worker = await WorkerProcess.start(
        "work", mongo_uri, mongo_db.name, "--mode", "gate", "--grace", "0.001"
    )
    processes.append(worker)
    await worker.until("started", sid)
    worker.process.send_signal(signal.SIGTERM)
    await worker.until("state", "stopped")
    assert await worker.process.wait() == 0
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts, job.lease_owner) == ("queued", 0, None)
    assert await archived_count(service, sid) == 0


async def test_sigterm_lets_a_held_job_finish_within_the_grace(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """After SIGTERM the worker claims nothing new but finishes what it holds, then exits 0."""
    first, second = await new_session(service), await new_session(service)
    await queue.submit(first)
    worker = await WorkerProcess.start(
        "work", mongo_uri, mongo_db.name, "--mode", "gate", "--concurrency", "1"
    )
    processes.append(worker)
    await worker.until("started", first)
    worker.process.send_signal(signal.SIGTERM)
    await worker.until("state", "stopping")
    await queue.submit(second)
    worker.send("go")
    done = await worker.until("outcome", first)
    assert done["applied"] is True
    await worker.until("state", "stopped")
    assert await worker.process.wait() == 0
    first_job, second_job = await queue.get_job(first), await queue.get_job(second)
    assert first_job is not None
    assert second_job is not None
    assert (first_job.state, second_job.state, second_job.attempts) == ("done", "queued", 0)


async def test_submits_from_many_processes_coalesce_into_one_job(
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """Six processes submitting one session 25 times each, all at once, leave one job."""
    submitters = [
        await WorkerProcess.start("submit", mongo_uri, mongo_db.name, "s-shared", "25")
        for _ in range(6)
    ]
    processes.extend(submitters)
    for submitter in submitters:
        assert (await submitter.until("submitted", 25))["submitted"] == 25
        assert await submitter.process.wait() == 0
    jobs = await queue.list_jobs()
    assert [(j.session_id, j.state, j.submits) for j in jobs] == [("s-shared", "queued", 150)]


async def test_a_fleet_never_compacts_one_session_twice_at_once(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """Four worker processes, three jobs each at a time, 24 sessions submitted twice while
    they run: no session is ever compacted by two workers at once, every applied run is one
    archived event, and every job ends done."""
    sessions = [await new_session(service) for _ in range(24)]
    fleet = [
        await WorkerProcess.start(
            "work", mongo_uri, mongo_db.name, "--mode", "record", "--concurrency", "3"
        )
        for _ in range(4)
    ]
    processes.extend(fleet)
    for worker in fleet:
        await worker.until("state", "running")
    lines: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()

    async def pump(worker: WorkerProcess) -> None:
        assert worker.process.stdout is not None
        while raw := await worker.process.stdout.readline():
            await lines.put(json.loads(raw))
        await lines.put(None)  # the process closed its output: it is ending

    runs: Counter[str] = Counter()
    async with asyncio.timeout(120), asyncio.TaskGroup() as group:
        for worker in fleet:
            group.create_task(pump(worker))
        for _ in range(2):
            await asyncio.gather(*(queue.submit(sid) for sid in sessions))
        while True:  # until every job has ended
            line = await lines.get()
            assert line is not None, "a worker process ended early"
            if "outcome" in line:
                assert line["ok"], line
                runs[line["outcome"]] += 1
                counts = await queue.count_jobs()
                if set(runs) == set(sessions) and counts["queued"] == counts["running"] == 0:
                    break
        for worker in fleet:
            worker.process.send_signal(signal.SIGTERM)
        ended = 0
        while ended < len(fleet):  # the outcomes still on their way, up to each one's end
            line = await lines.get()
            if line is None:
                ended += 1
            elif "outcome" in line:
                runs[line["outcome"]] += 1
    for worker in fleet:
        assert await worker.process.wait() == 0
    probes = {doc["_id"]: doc async for doc in mongo_db["probe"].find()}
    assert set(probes) == set(sessions)
    assert [sid for sid, doc in probes.items() if doc.get("overlaps", 0)] == []
    assert all(doc["active"] == 0 for doc in probes.values())
    for sid in sessions:
        assert 1 <= runs[sid] <= 2  # the second submit re-runs a session at most once
        assert probes[sid]["runs"] == runs[sid]
        assert await archived_count(service, sid) == runs[sid]
    assert (await queue.count_jobs())["done"] == len(sessions)


async def test_the_worker_command_compacts_and_stops_on_sigterm(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """``asyncsession worker`` claims a submitted session, prints its outcome, and exits 0 on
    SIGTERM."""
    sid = await new_session(service, turns=4)
    worker = await WorkerProcess.cli(
        "--uri", mongo_uri, "--db", mongo_db.name, "--json",
        "worker", "--strategy", "sliding", "--max-events", "2", "--wake", "poll",
        "--poll-interval", "0.05", "--lease", "5",
    )  # fmt: skip
    processes.append(worker)
    running = await worker.until("state", "running")
    assert running["wake"] == "poll"
    await queue.submit(sid)
    outcome = await worker.until("session_id", sid)
    assert (outcome["ok"], outcome["applied"], outcome["archived"]) == (True, True, 6)
    worker.process.send_signal(signal.SIGTERM)
    await worker.until("state", "stopped")
    assert await worker.process.wait() == 0
    job = await queue.get_job(sid)
    assert job is not None
    assert job.state == "done"


async def test_the_worker_command_shows_the_queue_state(
    queue: MongoCompactionQueue,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    processes: list[WorkerProcess],
) -> None:
    """``asyncsession worker --status`` prints the job counts and each failed job's error."""
    await queue.submit("s-broken")
    lease = await queue.claim("w", timedelta(seconds=5))
    assert lease is not None
    assert await queue.fail(lease, "RuntimeError: model down", retry_at=None)
    await queue.submit("s-waiting")
    status = await WorkerProcess.cli(
        "--uri", mongo_uri, "--db", mongo_db.name, "--json", "worker", "--status"
    )
    processes.append(status)
    state = await status.line()
    assert await status.process.wait() == 0
    assert state["counts"] == {"queued": 1, "running": 0, "done": 0, "failed": 1}
    assert [(j["session_id"], j["last_error"]) for j in state["failed"]] == [
        ("s-broken", "RuntimeError: model down")
    ]
