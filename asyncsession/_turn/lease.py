"""A turn's lease on its session: one turn at a time, one model call per request id.

A lease says "this attempt is working on the session until ``expires_at``": another turn that
reads the session while it is live waits (`wait_while_leased`), up to a bound, and then gets
`TurnInProgress`. The lease rides on a commit of the turn (its question, each tool round), so
taking it costs no command of its own when the turn has no request id (a turn that commits
nothing before the model call, the question stored with the reply, goes without one). A turn
with a request id takes it with one ``acquire_lease`` before its first commit: its question's id
is fixed by the request id, so a racing attempt of the same request would take the append of
that id for a replay, and the lease is what decides which attempt calls the model. While the
turn works the lease is renewed every third of its length, so a holder that dies stops blocking
within one length, however long its turns take.
The turn's last commit carries no lease, which ends it; a turn that fails releases it.

The lease is "please wait", not the arbiter: the version compare-and-swap of every commit is
what keeps the log right when two turns race anyway.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from datetime import timedelta

from .._shield import shielded
from ..events import utc_now
from ..repository import Lease
from ..service import SessionService

__all__ = ["LeaseHolder", "Waiting"]

logger = logging.getLogger("asyncsession.turn")


class LeaseHolder:
    """The lease of one turn attempt: its holder id, the commit it rides on, its renewal."""

    __slots__ = ("_renewal", "holder", "service", "session_id", "ttl", "version")

    def __init__(self, service: SessionService, session_id: str, ttl: float) -> None:
        self.service = service
        self.session_id = session_id
        self.ttl = ttl
        self.holder: str = str(uuid.uuid4())
        """This attempt's id."""
        self.version: int | None = None
        """The commit the lease rides on; ``None`` while none is held."""
        self._renewal: asyncio.Task[None] | None = None

    def lease(self) -> Lease:
        """The lease as of now: this holder, for one length from now."""
        return Lease(holder=self.holder, expires_at=utc_now() + timedelta(seconds=self.ttl))

    def mine(self, lease: Lease | None) -> bool:
        """Whether ``lease`` is this attempt's."""
        return lease is not None and lease.holder == self.holder

    def held_at(self, version: int) -> None:
        """The turn's commit ``version`` carries this lease; renew it there from now on."""
        self.version = version
        if self._renewal is None:
            self._renewal = asyncio.get_running_loop().create_task(self._renew())

    async def acquire(self, version: int) -> bool:
        """Take the lease on commit ``version`` (0: the session itself), or renew it."""
        taken = await self.service.acquire_lease(self.session_id, version, self.lease())
        if taken:
            self.held_at(version)
        return taken

    async def ended(self) -> None:
        """The turn's last commit ended the lease: stop renewing it."""
        self.version = None
        await self._stop()

    async def release(self) -> None:
        """End the lease now (the turn failed or was abandoned), so nobody waits for it."""
        version, self.version = self.version, None
        await self._stop()
        if version is not None:
            await shielded(self.service.release_lease(self.session_id, version, self.holder))

    async def _stop(self) -> None:
        task, self._renewal = self._renewal, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _renew(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            version = self.version
            if version is None:
                return
            try:
                renewed = await self.service.acquire_lease(self.session_id, version, self.lease())
            except Exception:  # the next renewal tries again; the compare-and-swap stays right
                logger.warning(
                    "Renewing the lease on session %r failed", self.session_id, exc_info=True
                )
                continue
            if not renewed:
                logger.warning(
                    "Session %r: another attempt took the turn's lease over", self.session_id
                )
                return


class Waiting:
    """The pauses of a turn waiting for another's lease: from ``poll`` seconds, doubling up to
    one second, until ``bound`` seconds have passed."""

    __slots__ = ("_deadline", "_pause")

    def __init__(self, bound: float, poll: float = 0.05) -> None:
        self._deadline = asyncio.get_running_loop().time() + bound
        self._pause = poll

    async def pause(self) -> bool:
        """Wait a little; ``False`` (at once) when the bound has passed."""
        remaining = self._deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(self._pause, remaining))
        self._pause = min(self._pause * 2, 1.0)
        return True
