"""Tool calls across OS processes killed with ``kill -9``: the call a dead process recorded is
answered once, by whichever process gets there first; a retry that takes the request over never
runs a completed tool again, runs an interrupted one again only when it is idempotent, and
reports any other to the model as interrupted.

Each process is ``tool_worker.py``: a chat client over one MongoDB store, with a scripted model
of its own whose first request calls a tool that blocks until told to return.
"""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository, Tool
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

sys.path.insert(0, str(Path(__file__).parents[1] / "advisors"))
from workers import Worker, launch, workers  # the process harness of the turn's process tests

WORKER = Path(__file__).with_name("tool_worker.py")
INTERRUPTED = "Error: this tool call was interrupted before it returned a result"

pytestmark = pytest.mark.mongodb
__all__ = ["workers"]


async def _start(
    uri: str, db: AsyncDatabase[dict[str, Any]], workers: list[Worker], *arguments: str
) -> Worker:
    return await launch(WORKER, workers, uri, db.name, *arguments)


async def _kill(worker: Worker) -> None:
    worker.process.send_signal(signal.SIGKILL)
    await worker.process.wait()


async def _results(db: AsyncDatabase[dict[str, Any]]) -> list[list[str]]:
    """The stored results of call ``c1``: one list of data per result event."""
    service = DefaultSessionService(MongoSessionRepository(db))
    found: list[list[str]] = []
    for event in await service.get_events("s1"):
        responses = getattr(event.message, "responses", ())
        data = [r.data for r in responses if r.id == "c1"]
        if data:
            found.append(data)
    return found


async def test_a_call_killed_before_its_result_is_answered_once_by_the_next_turns(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """A process is killed while its tool runs (its call stored, its result not). Four
    processes then send new requests at once: one result saying the call was interrupted is
    stored, each of them sends the model the pair whole, and none runs the tool."""
    holder = await _start(mongo_uri, mongo_db, workers, "r0", "charge")
    assert await holder.line() == "tool charge"
    await _kill(holder)

    others = await asyncio.gather(
        *(_start(mongo_uri, mongo_db, workers, f"r{n}", "charge") for n in range(1, 5))
    )
    outcomes = await asyncio.gather(*(worker.outcome() for worker in others))

    results = await _results(mongo_db)
    assert len(results) == 1
    assert results[0][0].startswith(INTERRUPTED)
    assert {o["runs"] for o in outcomes} == {0}
    assert {o["reply"] for o in outcomes} == {f"final: {results[0][0]}"}


@pytest.mark.parametrize(
    ("tool", "runs", "reply"),
    [
        pytest.param("charge", 0, f"final: {INTERRUPTED}", id="not-idempotent"),
        pytest.param("fetch", 1, "final: fetchd x", id="idempotent"),
    ],
)
async def test_a_retry_after_a_kill_during_the_tool_runs_it_again_only_if_idempotent(
    tool: str,
    runs: int,
    reply: str,
    mongo_uri: str,
    mongo_db: AsyncDatabase[dict[str, Any]],
    workers: list[Worker],
) -> None:
    """Killed while its tool runs, a request is retried from another process: the retry takes
    the turn over once the lease expires. A tool that is not idempotent is not run again, the
    model is told the run was interrupted; an idempotent one runs again."""
    holder = await _start(mongo_uri, mongo_db, workers, "r1", tool)
    assert await holder.line() == f"tool {tool}"
    await _kill(holder)

    retry = await _start(mongo_uri, mongo_db, workers, "r1", tool)
    if runs:
        assert await retry.line() == f"tool {tool}"
        await retry.answer()
    outcome = await retry.outcome()

    assert outcome["runs"] == runs
    assert outcome["reply"].startswith(reply)
    assert len(await _results(mongo_db)) == 1


async def test_a_retry_after_a_kill_past_the_tool_never_runs_it_again(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """Killed after its tool's result was stored (while the model answers), a request is
    retried from another process: the completed tool is not run again, the model reads its
    stored result."""
    holder = await _start(mongo_uri, mongo_db, workers, "r1", "charge", "hold")
    assert await holder.line() == "tool charge"
    await holder.answer()
    assert await holder.line() == "model 2"
    await _kill(holder)

    retry = await _start(mongo_uri, mongo_db, workers, "r1", "charge")
    outcome = await retry.outcome()

    assert outcome == {"reply": "final: charged x", "runs": 0}
    assert await _results(mongo_db) == [["charged x"]]


async def _paused(db: AsyncDatabase[dict[str, Any]]) -> None:
    """Session ``s1`` with a turn stopped for the approval of call ``c1`` of ``charge``."""

    async def charge(item: str) -> str:
        raise AssertionError("a paused turn runs no tool")

    service = DefaultSessionService(MongoSessionRepository(db))
    tool = Tool.from_function(charge, needs_approval=True)
    async with ScriptedOpenAIServer() as server:
        server.enqueue(
            ScriptedReply.tool_calls([ScriptedToolCall("charge", {"item": "x"}, id="c1")])
        )
        chat = ChatClient(server.client(), model="gpt-test", sessions=service, tools=[tool])
        paused = await chat.call("charge it", session_id="s1", user_id="alice")
    assert [call.id for call in paused.pending_approvals] == ["c1"]


async def test_concurrent_resumes_from_processes_continue_the_turn_once(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """Four processes resume one paused turn at once: one runs the approved tool and calls the
    model; the others wait for it and return its reply."""
    await _paused(mongo_db)
    resumers = await asyncio.gather(
        *(_start(mongo_uri, mongo_db, workers, "-", "charge", "resume") for _ in range(4))
    )
    printing = [asyncio.ensure_future(w.printed("tool")) for w in resumers]
    done, waiting = await asyncio.wait(printing, return_when=asyncio.FIRST_COMPLETED)
    for task in waiting:  # the others print it only if they run the tool too: checked below
        task.cancel()
    assert [task.result() for task in done] == ["tool charge"]
    running = [w for w in resumers if "tool charge" in w.lines]
    assert len(running) == 1
    await running[0].answer()
    outcomes = await asyncio.gather(*(w.outcome() for w in resumers))

    assert sorted(o["runs"] for o in outcomes) == [0, 0, 0, 1]
    assert {o["reply"] for o in outcomes} == {"final: charged x"}
    assert await _results(mongo_db) == [["charged x"]]


async def test_a_resume_killed_during_the_tool_is_taken_over_without_running_it_again(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], workers: list[Worker]
) -> None:
    """A resume is killed while the approved tool runs; the next resume, from another
    process, takes the turn over once the lease expires and, the tool not being idempotent,
    tells the model the run was interrupted instead of running it again."""
    await _paused(mongo_db)
    first = await _start(mongo_uri, mongo_db, workers, "-", "charge", "resume")
    assert await first.line() == "tool charge"
    await _kill(first)

    second = await _start(mongo_uri, mongo_db, workers, "-", "charge", "resume")
    outcome = await second.outcome()

    assert outcome["runs"] == 0
    assert outcome["reply"].startswith(f"final: {INTERRUPTED}")
    assert len(await _results(mongo_db)) == 1
