"""Agents SDK tool approvals and crashes across OS processes, on the test server.

Each step of a run is its own OS process (``agents_tools_script.py``): a run pauses on a tool
that needs approval and prints its serialized ``RunState``; another process resumes it on a new
``AgentsSession`` with approve or reject. The same steps run on the SDK's own ``SQLiteSession``
(the reference), and the session must end up holding exactly the reference's items: nothing
twice, every function call with its output. A process killed (``kill -9``) inside a tool, or one
whose paused run is never resumed, leaves a session whose next run sends the model a well-formed
request.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.openai_agents import AgentsSession

SCRIPT = Path(__file__).with_name("agents_tools_script.py")
LIMIT = 120.0
"""Seconds a step may take before the test fails."""
REJECTION = "A person declined this refund."

pytestmark = pytest.mark.parametrize("api", ["responses", "chat"])


class Runs:
    """The steps of one scenario on one store, and the tool runs they recorded."""

    def __init__(self, api: str, store: str, target: str, directory: Path) -> None:
        self.api, self.store, self.target = api, store, target
        self.tool_runs = directory / f"{store}-runs.txt"
        self.tool_runs.touch()

    def _command(self, step: str, *rest: str) -> list[str]:
        return [sys.executable, str(SCRIPT), step, self.api, self.store, self.target, "s", *rest]

    def _env(self) -> dict[str, str]:
        return {**os.environ, "TOOL_RUNS": str(self.tool_runs)}

    async def step(self, step: str, *rest: str, stdin: str | None = None) -> dict[str, Any]:
        process = await asyncio.create_subprocess_exec(
            *self._command(step, *rest),
            env=self._env(),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        try:
            out, err = await asyncio.wait_for(
                process.communicate(stdin.encode() if stdin is not None else None), LIMIT
            )
        except TimeoutError:
            process.kill()
            await process.wait()
            raise AssertionError(f"{step} did not finish within {LIMIT:g} s") from None
        assert process.returncode == 0, err.decode()[-3000:]
        result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
        return result

    async def killed_in_the_tool(self) -> None:
        """Run ``crash`` until its tool runs, then ``kill -9`` it."""
        process = await asyncio.create_subprocess_exec(
            *self._command("crash"),
            env=self._env(),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = await asyncio.wait_for(process.stdout.readline(), LIMIT)
        assert line == b"running\n", (await process.stderr.read()).decode()[-3000:]  # type: ignore[union-attr]
        process.send_signal(signal.SIGKILL)
        assert await process.wait() == -signal.SIGKILL

    def ran(self) -> list[str]:
        return self.tool_runs.read_text().splitlines()


async def _items(runs: Runs, mongo_db: AsyncDatabase[dict[str, Any]]) -> list[dict[str, Any]]:
    """The session's items, as the SDK reads them, without the ids the model's replies drew."""
    if runs.store == "sqlite":
        from agents.memory import SQLiteSession

        reference = SQLiteSession("s", runs.target)
        items: list[Any] = await reference.get_items()
        reference.close()
    else:
        session = AgentsSession("s", DefaultSessionService(MongoSessionRepository(mongo_db)))
        items = await session.get_items()
    return [_anonymous(item) for item in items]


def _anonymous(item: dict[str, Any]) -> dict[str, Any]:
    kept = {key: value for key, value in item.items() if key != "id"}
    if isinstance(kept.get("provider_data"), dict):
        kept["provider_data"] = {
            k: v for k, v in kept["provider_data"].items() if k != "response_id"
        }
    return kept


def _paired(items: list[dict[str, Any]]) -> None:
    """Every function call has exactly one output, after it, and no item is there twice."""
    calls = [i["call_id"] for i in items if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in items if i.get("type") == "function_call_output"]
    assert Counter(calls) == Counter(outputs)
    assert len(set(calls)) == len(calls)
    for call_id in calls:
        kinds = [i.get("type") for i in items if i.get("call_id") == call_id]
        assert kinds == ["function_call", "function_call_output"]


def _sent_pairs(api: str, sent: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """The (call id, output) pairs of a model request, checking each call has its output."""
    if api == "responses":
        _paired(sent)
        return [
            (i["call_id"], i["output"]) for i in sent if i.get("type") == "function_call_output"
        ]
    pairs: list[tuple[str, str]] = []
    for n, message in enumerate(sent):
        tool_calls: list[dict[str, Any]] = message.get("tool_calls") or []
        calls = [c["id"] for c in tool_calls]
        answers = sent[n + 1 : n + 1 + len(calls)]
        assert [a.get("tool_call_id") for a in answers] == calls
        pairs += [(a["tool_call_id"], a["content"]) for a in answers]
    assert len(pairs) == sum(m.get("role") == "tool" for m in sent)
    return pairs


@pytest.fixture
def stores(
    api: str, tmp_path: Path, mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> tuple[Runs, Runs]:
    return (
        Runs(api, "sqlite", str(tmp_path / "reference.db"), tmp_path),
        Runs(api, "mongo", f"{mongo_uri} {mongo_db.name}", tmp_path),
    )


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_a_paused_run_resumes_in_another_process(
    api: str,
    decision: str,
    stores: tuple[Runs, Runs],
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """Paused on ``refund`` in one process, resumed with approve or reject in another: the
    session holds what the SDK's own session holds, at the pause and after the resume; the
    tool ran once when approved and never when rejected, and the model was sent its result or
    the rejection, paired with the call."""
    await MongoSessionRepository(mongo_db).ensure_indexes()
    seen: dict[str, list[dict[str, Any]]] = {}
    for runs in stores:
        paused = await runs.step("pause")
        assert paused["pending"] == ["call_refund_7"]
        at_pause = await _items(runs, mongo_db)
        resumed = await runs.step("resume", decision, stdin=paused["state"])
        assert resumed["final"] == "Done."
        answer = "order 7 refunded" if decision == "approve" else REJECTION
        assert _sent_pairs(api, resumed["sent"]) == [("call_refund_7", answer)]
        assert runs.ran() == (["refund 7"] if decision == "approve" else [])
        after = await _items(runs, mongo_db)
        _paired(after)
        seen[runs.store] = [*at_pause, {"resumed": True}, *after]
    assert seen["mongo"] == seen["sqlite"]
    after = seen["mongo"][seen["mongo"].index({"resumed": True}) + 1 :]
    assert [i.get("type", "message") for i in after] == [
        "message",
        "function_call",
        "function_call_output",
        "message",
    ]


async def test_a_run_killed_in_its_tool_leaves_a_session_the_next_run_can_use(
    api: str, stores: tuple[Runs, Runs], mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """``kill -9`` while a tool runs: the SDK stores a call together with its output (one
    ``add_items``, one commit), so the session keeps the question and no orphaned call, as the
    SDK's own session does; the next run, in another process, sends a well-formed request."""
    await MongoSessionRepository(mongo_db).ensure_indexes()
    seen: dict[str, list[dict[str, Any]]] = {}
    for runs in stores:
        await runs.killed_in_the_tool()
        assert runs.ran() == ["lookup 9"]
        left = await _items(runs, mongo_db)
        _paired(left)
        following = await runs.step("next")
        assert following["final"] == "Nothing else."
        _sent_pairs(api, following["sent"])
        seen[runs.store] = [*left, {"next": True}, *await _items(runs, mongo_db)]
    assert seen["mongo"] == seen["sqlite"]
    assert seen["mongo"][0] == {"role": "user", "content": "look up order 9"}


async def test_a_pause_never_resumed_leaves_a_session_the_next_run_can_use(
    api: str, stores: tuple[Runs, Runs], mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """A run paused for approval whose state is lost (its process gone): the session holds the
    call without an output, as the SDK's own session does, and the next run's request leaves
    that call out (the SDK drops calls without outputs from the history it sends)."""
    await MongoSessionRepository(mongo_db).ensure_indexes()
    seen: dict[str, list[dict[str, Any]]] = {}
    for runs in stores:
        await runs.step("pause")
        following = await runs.step("next")
        assert following["final"] == "Nothing else."
        assert _sent_pairs(api, following["sent"]) == []
        seen[runs.store] = await _items(runs, mongo_db)
    assert seen["mongo"] == seen["sqlite"]
    assert [i.get("type", "message") for i in seen["mongo"]] == [
        "message",
        "function_call",
        "message",
        "message",
    ]
