"""Writes that a cancelled caller does not abandon halfway."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import TypeVar

__all__ = ["shielded"]

_T = TypeVar("_T")
_log = logging.getLogger("asyncsession")


async def shielded(write: Awaitable[_T]) -> _T:
    """Run ``write`` to its end even if the caller is cancelled, then re-raise the cancellation.

    A write that has started is never abandoned halfway, and the caller's cancellation waits for
    its outcome, so whatever the caller does next (release a lock, read back) sees the write
    done or not started, never in progress. asyncio's own ``shield`` does not wait: the caller
    goes on while the write runs. A write that fails while its caller is being cancelled is
    logged; the cancellation is what the caller gets.
    """
    task = asyncio.ensure_future(write)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            try:
                await asyncio.wait({task})
            except asyncio.CancelledError:
                continue  # cancelled again: keep waiting, the cancellation is re-raised below
        if not task.cancelled() and task.exception() is not None:
            _log.warning(
                "A write failed while its caller was being cancelled", exc_info=task.exception()
            )
        raise
