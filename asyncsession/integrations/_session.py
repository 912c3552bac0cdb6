"""What the chat-history adapters do with their session: read it, write it, guard its owner.

[`AdapterSession`][asyncsession.integrations._session.AdapterSession] is one session id of one
adapter object (a LangChain history, a Pydantic AI history, an Agents SDK session). It keeps the
ownership rule every adapter shares: given a ``user_id``, it refuses a session of another user
with `AccessDenied` before reading or writing anything; it creates the session on the first
write, owned by that user; and it keeps the event ids of a batch whose write failed, so that
storing the same batch again is a replay.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Final

from pydantic import JsonValue

from ..compaction import CompactionResult, CompactionStrategy
from ..compaction_protocols import TriggerLike
from ..events import CreateSessionRequest, Session, SessionEvent
from ..exceptions import AccessDenied, SessionExists, SessionNotFound
from ..filters import EventFilter
from ..repository import SessionSnapshot
from ..service import SessionService

__all__ = ["AdapterSession"]

_PENDING_LIMIT: Final = 64
"""How many failed batches an adapter remembers for their retries."""


class AdapterSession:
    """One session of one adapter object: reads and writes that check the owner.

    The owner is checked by every read (the read returns the session with its events) and,
    before a write, once per object: a write after a read, or after an earlier write, of the
    same object relies on that check. A session created by another writer in between is checked
    when this one's creation finds it taken.

    Args:
        service: where the session lives.
        session_id: the session's id.
        user_id: the user whose sessions this object may use; ``None``: any session.
        creator: the owner of a session this object creates.
        metadata: metadata of a session this object creates.
    """

    def __init__(
        self,
        service: SessionService,
        session_id: str,
        *,
        user_id: str | None,
        creator: str,
        metadata: Mapping[str, JsonValue],
    ) -> None:
        self.service = service
        self.session_id = session_id
        self._user_id = user_id
        self._creator = creator
        self._metadata = dict(metadata)
        self._known: bool | None = None
        """Whether the session exists and is this object's to use, as last seen."""
        self._pending: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def check(self, session: Session | None) -> None:
        """Note what a read found; `AccessDenied` when it is another user's session."""
        if session is not None and self._user_id is not None and session.user_id != self._user_id:
            self._known = None
            raise AccessDenied(self.session_id, self._user_id)
        self._known = session is not None

    async def snapshot(self, read: EventFilter) -> SessionSnapshot | None:
        """The session and the events ``read`` selects; ``None`` if it does not exist.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        found = await self.service.get_snapshot(self.session_id, read)
        self.check(found.session if found is not None else None)
        return found

    async def active(self, limit: int | None) -> list[SessionEvent]:
        """The events of the active view, oldest first (the newest ``limit`` of them, extended
        to the start of their turn, when given); empty when the session does not exist.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        read = (
            EventFilter.active()
            if limit is None
            else EventFilter(exclude_archived=True, active_view=True, last_n=limit)
        )
        found = await self.snapshot(read)
        return list(found.events) if found is not None else []

    async def exists(self) -> bool:
        """Whether the session exists (checking its owner unless this object did already).

        Raises:
            AccessDenied: the session belongs to another user.
        """
        if self._known is None:
            self.check(await self.service.find_by_id(self.session_id))
        return bool(self._known)

    async def check_owner(self) -> None:
        """Raise `AccessDenied` if the session belongs to another user (read unless this object
        has seen it as its own)."""
        if self._user_id is not None:
            await self._exists_now()

    async def _exists_now(self) -> bool:
        """`exists`, read again unless this object has seen the session as its own."""
        if self._known is not True:
            self._known = None
        return await self.exists()

    async def append(self, events: Sequence[SessionEvent]) -> None:
        """Append ``events`` as one batch, creating the session first if it does not exist.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
        """
        checked = self._user_id is not None or self._known is False
        if checked and not await self.exists():
            await self._create()
        try:
            await self.service.append_events(self.session_id, events)
        except SessionNotFound:  # deleted since, or never created (no owner to check)
            await self._create()
            await self.service.append_events(self.session_id, events)
        self._known = True

    async def _create(self) -> None:
        request = CreateSessionRequest(
            id=self.session_id, user_id=self._creator, metadata=self._metadata
        )
        try:
            await self.service.create(request)
        except SessionExists:  # another writer created it first: whose is it?
            self._known = None
            if not await self.exists():
                await self._create()
            return
        self._known = True

    async def delete(self) -> None:
        """Delete the session and its events (nothing happens for an unknown one).

        Raises:
            AccessDenied: the session belongs to another user; nothing was deleted.
        """
        if self._user_id is not None and not await self._exists_now():
            return
        await self.service.delete(self.session_id)
        self._known = False

    async def compact(
        self, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult | None:
        """Compact when ``trigger`` fires; ``None`` when the session does not exist.

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        if self._user_id is not None and not await self._exists_now():
            return None
        try:
            return await self.service.compact(self.session_id, trigger, strategy)
        except SessionNotFound:
            self._known = False
            return None

    async def append_retrying(
        self,
        key: str,
        count: int,
        build: Callable[[Sequence[str]], Sequence[SessionEvent]],
        new_id: Callable[[int], str],
    ) -> None:
        """Append the batch ``build(ids)`` of ``count`` events, one write.

        A batch whose write failed keeps its ids under ``key`` (a fingerprint of its content):
        building the same batch again on this object reuses them, so a write that did land is a
        replay. Otherwise the ids are ``new_id(i)`` for each position ``i``.
        """
        ids = self._pending.pop(key, None) or tuple(new_id(i) for i in range(count))
        try:
            await self.append(build(ids))
        except Exception:
            self._pending[key] = ids
            while len(self._pending) > _PENDING_LIMIT:
                self._pending.popitem(last=False)
            raise

    def forget_retries(self) -> None:
        """Drop the ids kept for retries (the adapter object is closed)."""
        self._pending.clear()
