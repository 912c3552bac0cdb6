"""Turn leases: an optional store capability, one attempt per request id across processes.

`asyncsession.advisors.IdempotentTurnAdvisor` given a store that implements
`TurnLeaseRepository` takes a lease on the request id before it calls the model: a
compare-and-swap on the session document that succeeds when no other attempt holds the
request, or its holder's lease has expired (a crashed holder lets go that way). Both stores
implement it; a store of yours may too.
"""

from __future__ import annotations

import hashlib
from datetime import timedelta
from typing import Protocol, runtime_checkable

from ._protocol import SessionRepository

__all__ = ["TurnLeaseRepository", "lease_key"]


@runtime_checkable
class TurnLeaseRepository(SessionRepository, Protocol):
    """A store that leases a session's request ids to one attempt at a time."""

    async def acquire_turn_lease(
        self, session_id: str, request_id: str, holder: str, ttl: timedelta
    ) -> bool:
        """Lease ``request_id`` of the session to ``holder`` for ``ttl``, if nobody else holds it.

        ``True`` when the request was free, its lease had expired, or ``holder`` already held
        it (the lease is then renewed); ``False`` while another holder's lease runs.

        Raises:
            SessionNotFound: the session does not exist.
        """
        ...

    async def release_turn_lease(self, session_id: str, request_id: str, holder: str) -> None:
        """Give the lease up if ``holder`` still holds it; otherwise (or with no session) do
        nothing."""
        ...


def lease_key(request_id: str) -> str:
    """A field-safe key for a request id (any text, dots and dollars included)."""
    return hashlib.sha256(request_id.encode()).hexdigest()[:32]
