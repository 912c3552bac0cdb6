"""Shared helpers of the Agents SDK session tests."""

from __future__ import annotations

from collections.abc import Callable

from agents.memory import Session

SessionFactory = Callable[..., Session]
"""Builds a session: ``make(session_id, **options)``."""

__all__ = ["SessionFactory"]
