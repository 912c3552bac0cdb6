"""MongoCompactionQueue and MongoCompactionWorker in one process: coalescing, leases, retries."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase
from queue_support import (
    ArchiveOldest,
    FailingStrategy,
    GateStrategy,
    Outcomes,
    always,
    archived_count,
    new_session,
)

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession._compaction_pass import CompactionQueue, Compactor
from asyncsession.compaction import CompactionWorker, MongoCompactionQueue, MongoCompactionWorker
from asyncsession.exceptions import CompactionError, SessionNotFound, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import FakeClock, ScriptedOpenAIServer, ScriptedReply
from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable


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


def worker(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    strategy: Any,
    outcomes: Outcomes,
    **options: Any,
) -> MongoCompactionWorker:
    options.setdefault("wake", "poll")
    options.setdefault("poll_interval", 0.02)
    return MongoCompactionWorker(
        service, always, strategy, queue=queue, on_outcome=outcomes, **options
    )


async def test_concurrent_submits_of_one_session_make_one_job(queue: MongoCompactionQueue) -> None:
    """Fifty concurrent submits of one session leave one queued job that counted them all."""
    await asyncio.gather(*(queue.submit("s-1") for _ in range(50)))
    jobs = await queue.list_jobs()
    assert [(j.session_id, j.state, j.submits, j.attempts) for j in jobs] == [
        ("s-1", "queued", 50, 0)
    ]


async def test_a_worker_compacts_what_was_queued_before_it_started(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """Jobs survive without a worker; a worker started later compacts each once."""
    sessions = [await new_session(service) for _ in range(5)]
    for sid in sessions:
        await queue.submit(sid)
    outcomes = Outcomes()
    async with worker(service, queue, ArchiveOldest(), outcomes, max_concurrency=2):
        await outcomes.wait_for(5)
    assert sorted(o.session_id for o in outcomes.seen) == sorted(sessions)
    assert all(o.ok and o.result is not None and o.result.applied for o in outcomes.seen)
    for sid in sessions:
        job = await queue.get_job(sid)
        assert job is not None
        assert (job.state, job.attempts, job.applied, job.lease_owner) == ("done", 1, True, None)
        assert await archived_count(service, sid) == 1


async def test_the_test_server_wakes_workers_with_a_change_stream(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """With wake="auto" on a replica set, a submit wakes a worker that would poll once an hour."""
    sid = await new_session(service)
    outcomes = Outcomes()
    async with worker(
        service, queue, ArchiveOldest(), outcomes, wake="auto", poll_interval=3600
    ) as running:
        assert running.wake_mode == "change_stream"
        await running.submit(sid)
        await outcomes.wait_for(1, within=20)  # far below the 60 s safety interval
    assert outcomes.seen[0].ok


async def test_polling_by_configuration_never_opens_a_change_stream(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """wake="poll" polls even where change streams exist, and still picks up submits."""
    sid = await new_session(service)
    outcomes = Outcomes()
    async with worker(service, queue, ArchiveOldest(), outcomes, wake="poll") as running:
        assert running.wake_mode == "poll"
        await running.submit(sid)
        await outcomes.wait_for(1)
    assert outcomes.seen[0].ok


async def test_a_submit_while_running_runs_the_session_once_more(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """Submits during a run mark the job; it runs exactly once more, then is done."""
    sid = await new_session(service)
    strategy = GateStrategy()
    outcomes = Outcomes()
    await queue.submit(sid)
    async with worker(service, queue, strategy, outcomes, max_concurrency=4):
        await strategy.started.wait()
        for _ in range(10):
            await queue.submit(sid)
        job = await queue.get_job(sid)
        assert job is not None
        assert (job.state, job.rerun) == ("running", True)
        strategy.gate.set()
        await outcomes.wait_for(2)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.rerun, job.submits) == ("done", False, 11)
    assert strategy.calls == [sid, sid]
    assert await archived_count(service, sid) == 2


async def test_failures_are_retried_with_doubling_backoff(
    service: DefaultSessionService, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Two failures are retried after 1 s, then 2 s (queue time), and the third run applies."""
    clock = FakeClock()
    queue = MongoCompactionQueue(mongo_db, clock=clock)
    sid = await new_session(service)
    await queue.submit(sid)
    outcomes = Outcomes()
    strategy = FailingStrategy(failures=2)
    async with worker(service, queue, strategy, outcomes, backoff=1.0, max_attempts=5):
        await outcomes.wait_for(1)
        job = await queue.get_job(sid)
        assert job is not None
        assert (job.state, job.attempts) == ("queued", 1)
        assert job.due_at == clock.now + timedelta(seconds=1)
        assert job.last_error == "RuntimeError: model down (call 1)"
        clock.advance(timedelta(seconds=1))
        await outcomes.wait_for(2)
        job = await queue.get_job(sid)
        assert job is not None
        assert (job.state, job.attempts) == ("queued", 2)
        assert job.due_at == clock.now + timedelta(seconds=2)
        clock.advance(timedelta(seconds=1))
        assert await queue.claim("someone", timedelta(seconds=5)) is None  # not due yet
        clock.advance(timedelta(seconds=1))
        await outcomes.wait_for(3)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts, job.applied, job.last_error) == ("done", 3, True, None)
    assert [o.ok for o in outcomes.seen] == [False, False, True]


async def test_a_job_out_of_attempts_is_failed_visibly_until_submitted_again(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """After max_attempts failures the job is failed with its last error; a submit revives it."""
    sid = await new_session(service)
    await queue.submit(sid)
    outcomes = Outcomes()
    strategy = FailingStrategy()
    async with worker(service, queue, strategy, outcomes, backoff=0.01, max_attempts=3):
        await outcomes.wait_for(3)
    failed = await queue.list_jobs("failed")
    assert [(j.session_id, j.attempts) for j in failed] == [(sid, 3)]
    assert failed[0].last_error == "RuntimeError: model down (call 3)"
    assert failed[0].finished_at is not None
    assert (await queue.count_jobs())["failed"] == 1
    assert len(strategy.calls) == 3
    await queue.submit(sid)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts, job.last_error) == ("queued", 0, failed[0].last_error)


async def test_a_deleted_session_ends_its_job_as_done(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """A session deleted before its compaction is done, not retried."""
    sid = await new_session(service)
    await queue.submit(sid)
    await service.delete(sid)
    outcomes = Outcomes()
    async with worker(service, queue, ArchiveOldest(), outcomes):
        (outcome,) = await outcomes.wait_for(1)
    assert isinstance(outcome.error, SessionNotFound)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.applied) == ("done", False)


async def test_an_expired_lease_is_taken_over_and_its_old_holder_cancels(
    service: DefaultSessionService, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Once a lease expires another worker claims the job; the old holder, renewing, finds it
    lost and cancels its compaction before any write."""
    # Two clocks: on the slow worker's the lease keeps holding (it renews it from its own
    # time), on the fast worker's it is long over; so the takeover does not race the renewals.
    slow_clock, fast_clock = FakeClock(), FakeClock()
    fast_clock.advance(timedelta(hours=1))
    slow_queue = MongoCompactionQueue(mongo_db, clock=slow_clock)
    fast_queue = MongoCompactionQueue(mongo_db, clock=fast_clock)
    sid = await new_session(service)
    await slow_queue.submit(sid)
    slow, slow_outcomes = GateStrategy(), Outcomes()
    fast, fast_outcomes = ArchiveOldest(), Outcomes()
    async with worker(service, slow_queue, slow, slow_outcomes, lease=0.3, owner="slow"):
        await slow.started.wait()
        async with worker(service, fast_queue, fast, fast_outcomes, owner="fast"):
            (taken,) = await fast_outcomes.wait_for(1)
            (lost,) = await slow_outcomes.wait_for(1)
    assert taken.ok
    assert taken.result is not None
    assert taken.result.applied
    assert isinstance(lost.error, CompactionError)
    assert "another worker" in str(lost.error)
    assert slow.cancelled == 1
    job = await fast_queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts) == ("done", 2)
    assert await archived_count(service, sid) == 1


async def test_stopping_without_drain_gives_held_jobs_back(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """aclose(drain=False) cancels the running compaction and re-queues it, attempt uncounted."""
    sid = await new_session(service)
    await queue.submit(sid)
    strategy, outcomes = GateStrategy(), Outcomes()
    running = worker(service, queue, strategy, outcomes)
    async with running:
        await strategy.started.wait()
        await running.aclose(drain=False)
    (outcome,) = outcomes.seen
    assert isinstance(outcome.error, CompactionError)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.attempts, job.lease_owner) == ("queued", 0, None)
    assert await archived_count(service, sid) == 0


async def test_draining_finishes_the_held_jobs(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """Leaving the block waits for the running compaction and records it done."""
    sid = await new_session(service)
    await queue.submit(sid)
    strategy, outcomes = GateStrategy(), Outcomes()
    running = worker(service, queue, strategy, outcomes)
    async with running:
        await strategy.started.wait()
        closing = asyncio.create_task(running.aclose())
        assert await queue.claim("other", timedelta(seconds=5)) is None  # still held
        strategy.gate.set()
        await closing
    job = await queue.get_job(sid)
    assert job is not None
    assert job.state == "done"


async def test_both_workers_and_the_queue_share_one_interface(
    service: DefaultSessionService,
    queue: MongoCompactionQueue,
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """The in-process worker, the Mongo worker and the queue are CompactionQueues over a
    Compactor; the service is a Compactor."""
    in_process = CompactionWorker(service, always, ArchiveOldest())
    fleet = MongoCompactionWorker(service, always, ArchiveOldest(), queue=queue)
    assert isinstance(service, Compactor)
    for candidate in (in_process, fleet, queue):
        assert isinstance(candidate, CompactionQueue)
    assert fleet.trigger is always
    assert in_process.trigger is always
    assert queue.trigger is None
    assert MongoCompactionQueue(mongo_db, trigger=always).trigger is always


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"max_concurrency": 0}, id="concurrency"),
        pytest.param({"lease": 0}, id="lease"),
        pytest.param({"poll_interval": -1}, id="poll"),
        pytest.param({"wake": "sometimes"}, id="wake"),
        pytest.param({"max_attempts": 0}, id="attempts"),
    ],
)
def test_bad_worker_settings_are_refused(
    service: DefaultSessionService, queue: MongoCompactionQueue, options: dict[str, Any]
) -> None:
    """Non-positive numbers and unknown wake modes are usage errors."""
    with pytest.raises(UsageError):
        MongoCompactionWorker(service, always, ArchiveOldest(), queue=queue, **options)


async def test_an_empty_session_id_is_refused(queue: MongoCompactionQueue) -> None:
    """submit("") is a usage error and writes nothing."""
    with pytest.raises(UsageError):
        await queue.submit(" ")
    assert await queue.list_jobs() == []


@pytest.fixture(scope="module")
def standalone_uri() -> Iterator[str]:
    """A standalone test server: one without change streams."""
    executable = find_server_executable()
    if executable is None:
        pytest.fail("this test starts a standalone test server: run it with scripts/test")
    server = LocalMongoServer(executable, standalone=True)
    server.start()
    try:
        yield server.uri()
    finally:
        server.stop()


@pytest.mark.mongodb
async def test_without_change_streams_auto_falls_back_to_polling(standalone_uri: str) -> None:
    """On a standalone server wake="auto" polls (and still compacts), while
    wake="change_stream" is refused at start."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(standalone_uri, tz_aware=True)
    try:
        db = client["standalone_queue"]
        service = DefaultSessionService(MongoSessionRepository(db))
        sid = await new_session(service)
        queue = MongoCompactionQueue(db)
        assert await queue.watch() is None
        with pytest.raises(UsageError, match="change_stream"):
            async with MongoCompactionWorker(
                service, always, ArchiveOldest(), queue=queue, wake="change_stream"
            ):
                pass
        outcomes = Outcomes()
        async with worker(service, queue, ArchiveOldest(), outcomes, wake="auto") as running:
            assert running.wake_mode == "poll"
            await queue.submit(sid)
            await outcomes.wait_for(1)
        assert outcomes.seen[0].ok
    finally:
        await client.drop_database("standalone_queue")
        await client.close()


async def test_the_turn_advisor_enqueues_on_the_shared_queue(
    service: DefaultSessionService, queue: MongoCompactionQueue
) -> None:
    """A client with ``compaction=queue`` submits after a complete turn, and a worker running
    elsewhere compacts the session; the client needs nothing else."""
    sid = await new_session(service, turns=2)
    async with ScriptedOpenAIServer() as server:
        openai_client = server.client()
        server.enqueue(ScriptedReply.text("a2"))
        client = ChatClient(openai_client, model="gpt-test", sessions=service, compaction=queue)
        await client.call("u2", session_id=sid)
    job = await queue.get_job(sid)
    assert job is not None
    assert (job.state, job.submits) == ("queued", 1)
    outcomes = Outcomes()
    async with worker(service, queue, ArchiveOldest(), outcomes):
        await outcomes.wait_for(1)
    assert await archived_count(service, sid) == 1
