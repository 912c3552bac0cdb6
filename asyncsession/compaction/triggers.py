"""Compaction triggers: when to compact.

A trigger looks at a :class:`CompactionRequest` and says whether the session should be
compacted now. Anything with an ``async should_compact(request) -> bool`` method is a trigger,
and so is a plain function, sync or async, taking the request and returning a bool.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeAlias, runtime_checkable

from .request import CompactionRequest

__all__ = ["CompactionTrigger", "TriggerLike", "should_compact"]


@runtime_checkable
class CompactionTrigger(Protocol):
    """Decides whether to compact. Keep it cheap: it runs after every turn."""

    async def should_compact(self, request: CompactionRequest) -> bool:
        """Whether the session in ``request`` should be compacted now."""
        ...


TriggerLike: TypeAlias = CompactionTrigger | Callable[[CompactionRequest], bool | Awaitable[bool]]
"""A trigger, or a sync or async function of the request."""


async def should_compact(trigger: TriggerLike, request: CompactionRequest) -> bool:
    """Ask ``trigger`` (a trigger object or a plain function) about ``request``."""
    if isinstance(trigger, CompactionTrigger):
        return bool(await trigger.should_compact(request))
    outcome = trigger(request)
    if inspect.isawaitable(outcome):
        outcome = await outcome
    return bool(outcome)
