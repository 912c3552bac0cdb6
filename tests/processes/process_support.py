"""Writer processes for the many-process tests: one command in, one answer out."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

SCRIPT = Path(__file__).with_name("writer_proc.py")
PROCESSES = 4


class Writer:
    """One writer process: send it a command, read its answer."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def ask(self, command: dict[str, Any]) -> dict[str, Any]:
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        self.process.stdin.write(json.dumps(command).encode() + b"\n")
        async with asyncio.timeout(120):
            raw = await self.process.stdout.readline()
        assert raw, f"writer process exited with {await self.process.wait()}"
        answer = dict(json.loads(raw))
        assert "error" not in answer, answer["error"]
        return answer


async def ask_all(writers: Sequence[Writer], commands: Sequence[dict[str, Any]]) -> list[Any]:
    """Send each writer its command at once, and gather the answers in order."""
    return list(await asyncio.gather(*(w.ask(c) for w, c in zip(writers, commands, strict=True))))
