"""Doubles shared by the compaction queue tests: strategies, an outcome collector, processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    UserMessage,
)
from asyncsession._compaction_pass import CompactionOutcome
from asyncsession.compaction import CompactionRequest, CompactionResult

WORKER_SCRIPT = Path(__file__).with_name("queue_worker_proc.py")


def always(request: CompactionRequest) -> bool:
    return True


class ArchiveOldest:
    """Archives the oldest active event and nothing else: every applied run archives one more,
    so the archived count says how many runs were applied."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.calls.append(request.session.id)
        events = request.events
        return CompactionResult(compacted_events=events[1:], archived_events=events[:1])


class FailingStrategy(ArchiveOldest):
    """Raises for the first ``failures`` calls (all of them when ``None``), then archives."""

    def __init__(self, failures: int | None = None) -> None:
        super().__init__()
        self.failures = failures

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        if self.failures is None or len(self.calls) < self.failures:
            self.calls.append(request.session.id)
            raise RuntimeError(f"model down (call {len(self.calls)})")
        return await super().compact(request)


class GateStrategy(ArchiveOldest):
    """Archives the oldest event once its gate opens; says when a run has started."""

    def __init__(self) -> None:
        super().__init__()
        self.gate = asyncio.Event()
        self.started = asyncio.Event()
        self.cancelled = 0

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.started.set()
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return await super().compact(request)


class Outcomes:
    """An ``on_outcome`` callback that tests can wait on."""

    def __init__(self) -> None:
        self.seen: list[CompactionOutcome] = []
        self._changed = asyncio.Event()

    def __call__(self, outcome: CompactionOutcome) -> None:
        self.seen.append(outcome)
        self._changed.set()

    async def wait_for(self, count: int, within: float = 30.0) -> list[CompactionOutcome]:
        async with asyncio.timeout(within):
            while len(self.seen) < count:
                self._changed.clear()
                await self._changed.wait()
        return self.seen


async def new_session(
    service: DefaultSessionService, turns: int = 3, sid: str | None = None
) -> str:
    session = await service.create(CreateSessionRequest(user_id="alice", id=sid))
    for i in range(turns):
        await service.append_message(session.id, UserMessage(text=f"u{i}"))
        await service.append_message(session.id, AssistantMessage(text=f"a{i}"))
    return session.id


async def archived_count(service: DefaultSessionService, session_id: str) -> int:
    events = await service.get_events(session_id, EventFilter.all())
    return sum(1 for event in events if event.archived)


class WorkerProcess:
    """``queue_worker_proc.py`` in an OS process of its own, speaking JSON lines on stdout."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    @classmethod
    async def start(cls, *args: str, script: Path = WORKER_SCRIPT) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            str(script),
            *args,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(process)

    @classmethod
    async def cli(cls, *args: str) -> WorkerProcess:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "asyncsession",
            *args,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        return cls(process)

    async def line(self, within: float = 60.0) -> dict[str, Any]:
        """The next JSON line; fails if the process ends first."""
        assert self.process.stdout is not None
        async with asyncio.timeout(within):
            raw = await self.process.stdout.readline()
        if not raw:
            raise AssertionError(f"the worker exited ({await self.process.wait()}) before a line")
        return dict(json.loads(raw))

    async def until(self, key: str, value: Any, within: float = 60.0) -> dict[str, Any]:
        """Read lines until one has ``key == value``."""
        while True:
            line = await self.line(within)
            if line.get(key) == value:
                return line

    def send(self, text: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(text.encode() + b"\n")

    async def kill(self) -> int:
        self.process.kill()
        return await self.process.wait()


async def reap(processes: Sequence[WorkerProcess]) -> None:
    """Kill whatever is still running (a failed test must not leave processes behind)."""
    for worker in processes:
        if worker.process.returncode is None:
            await worker.kill()
