"""A clock that tests move by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

__all__ = ["FakeClock"]


class FakeClock:
    """A callable clock: returns ``now`` until a test moves it with `advance`."""

    def __init__(self, now: datetime | None = None) -> None:
        self.now: datetime = now or datetime(2026, 1, 1, tzinfo=UTC)
        if self.now.tzinfo is None:
            raise ValueError("FakeClock needs a timezone-aware datetime")

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta) -> datetime:
        """Move the clock forward and return the new time."""
        self.now += delta
        return self.now
