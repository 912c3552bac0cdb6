"""Running ``turn_worker.py`` as OS processes: start one, read what it prints, let its model
answer, and kill what a test leaves running."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

WORKER = Path(__file__).with_name("turn_worker.py")


class Worker:
    """A worker process and the lines it printed, read as they come."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.lines: list[str] = []
        """Every line it printed so far."""
        self._read = 0
        self._printed = asyncio.Condition()
        self._ended = False
        self._reader = asyncio.get_running_loop().create_task(self._read_lines())

    async def _read_lines(self) -> None:
        assert self.process.stdout is not None
        while raw := await self.process.stdout.readline():
            async with self._printed:
                self.lines.append(raw.decode().strip())
                self._printed.notify_all()
        async with self._printed:
            self._ended = True
            self._printed.notify_all()

    async def line(self) -> str:
        """The next line it prints (waiting at most a minute)."""
        async with asyncio.timeout(60), self._printed:
            await self._printed.wait_for(lambda: len(self.lines) > self._read or self._ended)
        assert len(self.lines) > self._read, f"the worker ended early after {self.lines}"
        self._read += 1
        return self.lines[self._read - 1]

    async def printed(self, prefix: str) -> str:
        """The first line it printed (or prints) that starts with ``prefix``."""
        async with asyncio.timeout(60), self._printed:
            await self._printed.wait_for(
                lambda: self._ended or any(line.startswith(prefix) for line in self.lines)
            )
        found = [line for line in self.lines if line.startswith(prefix)]
        assert found, f"the worker ended without printing {prefix!r}: {self.lines}"
        return found[0]

    async def answer(self) -> None:
        """Let its model answer (when it is asked, or now if it is waiting)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")
        await self.process.stdin.drain()

    async def outcome(self) -> dict[str, Any]:
        """The JSON it prints last, once it has exited cleanly."""
        while not (await self.line()).startswith("{"):
            pass
        assert await asyncio.wait_for(self.process.wait(), 60) == 0
        result: dict[str, Any] = json.loads(self.lines[-1])
        return result

    @property
    def model_calls(self) -> int:
        """How often its model was called, as far as it printed so far."""
        return sum(line.startswith("model ") for line in self.lines)

    async def close(self) -> None:
        """Kill it if it still runs, and stop reading."""
        if self.process.returncode is None:
            self.process.kill()
            await self.process.wait()
        await self._reader


@pytest.fixture
async def workers() -> AsyncIterator[list[Worker]]:
    """The workers a test starts; any still running at its end is killed."""
    started: list[Worker] = []
    yield started
    for worker in started:
        await worker.close()


async def start(
    uri: str, db: AsyncDatabase[dict[str, Any]], workers: list[Worker], *options: str
) -> Worker:
    """A worker for request ``request-1`` of session ``s1`` that has printed ``started``."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        uri,
        db.name,
        "s1",
        "request-1",
        *options,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    worker = Worker(process)
    workers.append(worker)
    assert await worker.line() == "started"
    return worker
