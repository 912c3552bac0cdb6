"""A small progress bar on standard error, for terminals only."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable
from types import TracebackType
from typing import Self, TextIO, TypeVar

__all__ = ["Progress"]

T = TypeVar("T")
WIDTH = 28
TICK = 0.2


class Progress:
    """Draws `label [#####.....] done/total` (or `label: done`, when the total is unknown).

    A disabled bar draws nothing, so a command calls it the same way on a terminal, in a pipe
    and under `--json`.
    """

    def __init__(self, stream: TextIO, label: str, total: int | None, *, enabled: bool) -> None:
        self.stream = stream
        self.label = label
        self.total = total
        self.done = 0
        self.enabled = enabled
        self._started = time.monotonic()
        self._drawn = False

    def advance(self, count: int = 1) -> None:
        """Count `count` more items done and redraw."""
        self.done += count
        self._draw()

    async def around(self, work: Awaitable[T]) -> T:
        """Await `work`, redrawing the elapsed time while it runs (for one long call)."""
        if not self.enabled:
            return await work
        async with asyncio.TaskGroup() as group:
            ticker = group.create_task(self._tick())
            try:
                return await work
            finally:
                ticker.cancel()

    async def _tick(self) -> None:
        while True:
            self._draw()
            await asyncio.sleep(TICK)

    def _draw(self) -> None:
        if not self.enabled:
            return
        elapsed = time.monotonic() - self._started
        if self.total:
            filled = min(WIDTH, WIDTH * self.done // self.total)
            bar = "#" * filled + "." * (WIDTH - filled)
            line = f"{self.label} [{bar}] {self.done}/{self.total} {elapsed:.1f}s"
        else:
            line = f"{self.label}: {self.done} {elapsed:.1f}s"
        self.stream.write(f"\r{line}\x1b[K")
        self.stream.flush()
        self._drawn = True

    def close(self) -> None:
        """End the bar's line, if one was drawn."""
        if self._drawn:
            self.stream.write("\n")
            self.stream.flush()
            self._drawn = False

    def __enter__(self) -> Self:
        self._draw()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
