"""Compaction strategies: what to archive, and what (if anything) replaces it.

A strategy is pure: it receives the active events in a :class:`CompactionRequest` and returns a
:class:`CompactionResult`; it never touches the repository.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from .request import CompactionRequest, CompactionResult

__all__ = ["CompactionStrategy"]


@runtime_checkable
class CompactionStrategy(Protocol):
    """Turns the active events into a smaller active window."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        """The new active window and the events that leave it."""
        ...
