"""Shared helpers of the LangChain history tests: the factory type, sync code off the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

from langchain_core.chat_history import BaseChatMessageHistory

__all__ = ["ChatHistoryFactory", "off_the_loop"]

_T = TypeVar("_T")

ChatHistoryFactory = Callable[[str], BaseChatMessageHistory]
"""Builds a LangChain history of one session id on the store under test."""


async def off_the_loop(body: Callable[[], _T]) -> _T:
    """Runs LangChain's sync code (``invoke``, ``add_message``) in a worker thread, as a sync
    caller beside a running loop does; our history runs its calls on the test's loop."""
    return await asyncio.to_thread(body)
