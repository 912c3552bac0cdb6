"""CompactionWorker: coalescing, bounded concurrency, shutdown, and error isolation."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

import pytest
from compaction_support import GatedStrategy, let_the_loop_run

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    UserMessage,
)
from asyncsession._compaction_pass import CompactionOutcome, CompactionTicket
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    CompactionWorker,
    SlidingWindowCompactionStrategy,
)
from asyncsession.events import EventType, SessionEvent
from asyncsession.exceptions import CompactionError, SessionNotFound, UsageError
from asyncsession.repository import Lease


def always(request: CompactionRequest) -> bool:
    return True


@pytest.fixture
def service() -> DefaultSessionService:
    return DefaultSessionService(InMemorySessionRepository())


async def new_session(service: DefaultSessionService, turns: int = 3) -> str:
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for i in range(turns):
        await service.append_message(session.id, UserMessage(text=f"u{i}"))
        await service.append_message(session.id, AssistantMessage(text=f"a{i}"))
    return session.id


async def test_repeated_submits_while_running_coalesce_into_one_more_run(
    service: DefaultSessionService,
) -> None:
    """Fifty submits of a session that is running lead to exactly one more run, one ticket."""
    sid = await new_session(service)
    strategy = GatedStrategy()
    async with CompactionWorker(service, always, strategy) as worker:
        first = worker.submit(sid)
        await strategy.wait_started(1)
        later = {id(worker.submit(sid)) for _ in range(50)}
        assert len(later) == 1
        strategy.open()
        await worker.join()
    assert strategy.started == [sid, sid]
    assert first.done()
    assert (await first.result()).applied


async def test_repeated_submits_while_queued_share_one_run(service: DefaultSessionService) -> None:
    """A queued session is not queued again: every submit returns its one ticket."""
    busy, sid = await new_session(service), await new_session(service)
    strategy = GatedStrategy()
    async with CompactionWorker(service, always, strategy, max_concurrency=1) as worker:
        worker.submit(busy)
        await strategy.wait_started(1)
        tickets = {worker.submit(sid) for _ in range(50)}
        assert len(tickets) == 1
        strategy.open()
        await worker.join()
    assert strategy.started == [busy, sid]


async def test_at_most_max_concurrency_compactions_run_at_once(
    service: DefaultSessionService,
) -> None:
    """With ten sessions and max_concurrency=3, three run at once and never more."""
    sessions = [await new_session(service) for _ in range(10)]
    strategy = GatedStrategy()
    async with CompactionWorker(service, always, strategy, max_concurrency=3) as worker:
        tickets = [worker.submit(sid) for sid in sessions]
        await strategy.wait_started(3)
        assert strategy.current == 3
        strategy.open()
        await worker.join()
    assert strategy.max_seen == 3
    assert sorted(strategy.finished) == sorted(sessions)
    assert all(t.outcome is not None and t.outcome.ok for t in tickets)


async def test_one_session_never_runs_twice_at_once(service: DefaultSessionService) -> None:
    """Even with spare capacity, a session's rerun waits for its current run."""
    sid = await new_session(service)
    strategy = GatedStrategy()
    async with CompactionWorker(service, always, strategy, max_concurrency=8) as worker:
        worker.submit(sid)
        await strategy.wait_started(1)
        worker.submit(sid)
        await let_the_loop_run()  # room for a second run to start, if the worker allowed one
        assert strategy.current == 1
        strategy.open()
    assert strategy.max_seen == 1
    assert strategy.started == [sid, sid]


async def test_drain_runs_everything_submitted(service: DefaultSessionService) -> None:
    """aclose(drain=True) waits for queued and running work, reruns included."""
    sessions = [await new_session(service) for _ in range(5)]
    strategy = GatedStrategy()
    worker = CompactionWorker(service, always, strategy, max_concurrency=2)
    async with worker:
        tickets = [worker.submit(sid) for sid in sessions]
        await strategy.wait_started(1)
        rerun = worker.submit(sessions[0])
        closing = asyncio.create_task(worker.aclose())
        await let_the_loop_run()
        with pytest.raises(UsageError, match="closing"):
            worker.submit(sessions[1])
        strategy.open()
        await closing
    assert all(t.outcome is not None and t.outcome.ok for t in [*tickets, rerun])
    assert len(strategy.finished) == 6
    for sid in sessions:
        assert len(await service.get_events(sid, EventFilter.active())) == 2


async def test_cancel_drops_queued_work_and_cancels_running_work(
    service: DefaultSessionService,
) -> None:
    """aclose(drain=False) cancels what runs, drops what waits, and tells every ticket."""
    sessions = [await new_session(service) for _ in range(5)]
    strategy = GatedStrategy()
    outcomes: list[CompactionOutcome] = []
    worker = CompactionWorker(
        service, always, strategy, max_concurrency=2, on_outcome=outcomes.append
    )
    async with worker:
        tickets = [worker.submit(sid) for sid in sessions]
        await strategy.wait_started(2)
        rerun = worker.submit(sessions[0])
        versions = [await service.get_event_version(sid) for sid in sessions]
        await worker.aclose(drain=False)
    assert sorted(strategy.cancelled) == sorted(sessions[:2])
    assert strategy.started == sessions[:2]
    for ticket in [*tickets, rerun]:
        with pytest.raises(CompactionError, match=r"cancelled|dropped"):
            await ticket.result()
    assert len(outcomes) == 6
    assert [await service.get_event_version(sid) for sid in sessions] == versions


async def test_a_compaction_cancelled_while_writing_completes_its_write() -> None:
    """Cancelling the worker while a plan is being applied lets the write finish whole."""
    writing, release = asyncio.Event(), asyncio.Event()

    class SlowWrites(InMemorySessionRepository):
        async def append_events(
            self,
            session_id: str,
            events: Sequence[SessionEvent],
            expected_version: int | None = None,
            *,
            lease: Lease | None = None,
        ) -> bool:
            if events and events[-1].type == EventType.COMPACTION:
                writing.set()
                await release.wait()
            return await super().append_events(session_id, events, expected_version, lease=lease)

    service = DefaultSessionService(SlowWrites())
    sid = await new_session(service)
    async with CompactionWorker(service, always, SlidingWindowCompactionStrategy(1)) as worker:
        ticket = worker.submit(sid)
        await writing.wait()
        closing = asyncio.create_task(worker.aclose(drain=False))
        await let_the_loop_run()
        assert not closing.done()  # waiting for the write, not abandoning it
        release.set()
        await closing
    with pytest.raises(CompactionError, match="cancelled"):
        await ticket.result()
    assert [e.text for e in await service.get_events(sid, EventFilter.active())] == ["u2", "a2"]


async def test_an_error_in_one_compaction_does_not_stop_the_others(
    service: DefaultSessionService, caplog: pytest.LogCaptureFixture
) -> None:
    """A failing compaction is logged and reported on its ticket; the rest go on."""
    good, bad = await new_session(service), await new_session(service)
    strategy = GatedStrategy(fail_for=[bad])
    strategy.open()
    with caplog.at_level(logging.ERROR, "asyncsession.compaction"):
        async with CompactionWorker(service, always, strategy, max_concurrency=1) as worker:
            failing = worker.submit(bad)
            missing = worker.submit("no-such-session")
            working = worker.submit(good)
            await worker.join()
            after = worker.submit(bad)
    with pytest.raises(RuntimeError, match="strategy failed"):
        await failing.result()
    with pytest.raises(SessionNotFound):
        await missing.result()
    assert (await working.result()).applied
    outcome = await after.wait()
    assert not outcome.ok
    assert isinstance(outcome.error, RuntimeError)
    assert "Compaction of session" in caplog.text


async def test_on_outcome_sees_every_run_and_its_errors_are_ignored(
    service: DefaultSessionService, caplog: pytest.LogCaptureFixture
) -> None:
    """The callback gets each outcome; if it raises, the worker logs it and goes on."""
    sessions = [await new_session(service) for _ in range(3)]
    seen: list[str] = []

    def on_outcome(outcome: CompactionOutcome) -> None:
        seen.append(outcome.session_id)
        raise ValueError("callback bug")

    strategy = SlidingWindowCompactionStrategy(1)
    with caplog.at_level(logging.ERROR, "asyncsession.compaction"):
        async with CompactionWorker(service, always, strategy, on_outcome=on_outcome) as worker:
            for sid in sessions:
                worker.submit(sid)
    assert sorted(seen) == sorted(sessions)
    assert "on_outcome callback" in caplog.text


async def test_leaving_the_block_with_an_error_cancels_the_work(
    service: DefaultSessionService,
) -> None:
    """An exception in the body cancels pending compactions and propagates unchanged."""
    sid = await new_session(service)
    strategy = GatedStrategy()
    tickets: list[CompactionTicket] = []
    with pytest.raises(KeyError, match="boom"):
        async with CompactionWorker(service, always, strategy) as worker:
            tickets.append(worker.submit(sid))
            await strategy.wait_started(1)
            raise KeyError("boom")
    assert strategy.cancelled == [sid]
    assert not (await tickets[0].wait()).ok


async def test_a_cancelled_drain_cancels_the_rest(service: DefaultSessionService) -> None:
    """If the task draining the worker is cancelled, the remaining work is cancelled too."""
    sid = await new_session(service)
    strategy = GatedStrategy()
    worker = CompactionWorker(service, always, strategy)
    tickets: list[CompactionTicket] = []

    async def run() -> None:
        async with worker:
            tickets.append(worker.submit(sid))
        # leaving the block drains, which waits for the gated compaction

    task = asyncio.create_task(run())
    await strategy.wait_started(1)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert strategy.cancelled == [sid]
    assert not (await tickets[0].wait()).ok
    with pytest.raises(UsageError, match="closed"):
        worker.submit(sid)


async def test_lifecycle_errors_are_clear(service: DefaultSessionService) -> None:
    """Submitting before start or after close, starting twice, and bad ids are usage errors."""
    worker = CompactionWorker(service, always, SlidingWindowCompactionStrategy())
    with pytest.raises(UsageError, match="not started"):
        worker.submit("s")
    async with worker:
        with pytest.raises(UsageError, match="non-empty"):
            worker.submit(" ")
        with pytest.raises(UsageError, match="only once"):
            await worker.__aenter__()
    with pytest.raises(UsageError, match="closed"):
        worker.submit("s")
    await worker.aclose()  # idempotent
    with pytest.raises(UsageError, match="max_concurrency"):
        CompactionWorker(service, always, SlidingWindowCompactionStrategy(), max_concurrency=0)


async def test_closing_a_worker_that_never_started_is_a_no_op(
    service: DefaultSessionService,
) -> None:
    """aclose() on an unstarted worker just marks it closed."""
    worker = CompactionWorker(service, always, SlidingWindowCompactionStrategy())
    await worker.aclose()
    with pytest.raises(UsageError, match="closed"):
        await worker.__aenter__()


async def test_a_ticket_reports_its_state(service: DefaultSessionService) -> None:
    """A ticket is pending until its run ends, then holds the outcome."""
    sid = await new_session(service)
    strategy = GatedStrategy()
    async with CompactionWorker(service, always, strategy) as worker:
        ticket = worker.submit(sid)
        assert isinstance(ticket, CompactionTicket)
        assert not ticket.done()
        assert ticket.outcome is None
        assert "pending" in repr(ticket)
        assert "open" in repr(worker)
        strategy.open()
        result = await ticket.result()
    assert ticket.done()
    assert ticket.outcome == CompactionOutcome(session_id=sid, result=result)
    assert "ok" in repr(ticket)


async def test_the_worker_takes_any_compactor_not_only_a_service() -> None:
    """Anything with ``compact(session_id, trigger, strategy)`` can run the worker's jobs."""

    class Recorder:
        def __init__(self) -> None:
            self.calls: list[str] = []

        async def compact(
            self, session_id: str, trigger: object, strategy: object
        ) -> CompactionResult:
            self.calls.append(session_id)
            return CompactionResult.unchanged(())

    recorder = Recorder()
    async with CompactionWorker(recorder, always, SlidingWindowCompactionStrategy(1)) as worker:
        ticket = worker.submit("s-any")
    assert recorder.calls == ["s-any"]
    assert (await ticket.result()).applied is False
