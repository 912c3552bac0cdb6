"""What the chat-history adapters share: their session (reads and writes that guard its owner),
the window that keeps whole turns, and the constructor of an adapter object."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Final, TypeVar

from pydantic import JsonValue

from .._checks import require_nonblank, require_service
from ..compaction import CompactionResult, CompactionStrategy
from ..compaction_protocols import TriggerLike
from ..events import CreateSessionRequest, Session, SessionEvent
from ..exceptions import AccessDenied, SessionExists, SessionNotFound, UsageError
from ..filters import EventFilter
from ..service import SessionService
from ._loops import StoreLoop

__all__ = ["AdapterSession", "History", "whole_turns"]

_PENDING_LIMIT: Final = 64
"""How many failed batches an adapter remembers for their retries."""
_T = TypeVar("_T")


def whole_turns(items: Sequence[_T], keep: int, starts_turn: Callable[[_T], bool]) -> list[_T]:
    """About the newest ``keep`` items, extended back to one that ``starts_turn``, so a reply
    is never cut from its question nor a tool result from its call; empty for ``keep`` below 1.
    """
    if keep <= 0:
        return []
    cut = max(len(items) - keep, 0)
    while cut > 0 and not starts_turn(items[cut]):
        cut -= 1
    return list(items[cut:])


class AdapterSession:
    """One session of one adapter object: reads and writes that check the owner.

    Given a ``user_id``, it refuses another user's session with `AccessDenied` before reading
    or writing anything. Every read checks the owner; a write checks it once per object (a
    write after a read or an earlier write relies on that check), and a session created by
    another writer in between is checked when this one's creation finds it taken. The session
    is created on the first write, owned by ``creator``.
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

    async def active(self, limit: int | None) -> list[SessionEvent]:
        """The events of the active view, oldest first (the newest ``limit`` of them, extended
        to the start of their turn, when given); empty when the session does not exist."""
        read = (
            EventFilter.active()
            if limit is None
            else EventFilter(exclude_archived=True, active_view=True, last_n=limit)
        )
        found = await self.service.get_snapshot(self.session_id, read)
        self.check(found.session if found is not None else None)
        return list(found.events) if found is not None else []

    async def exists(self) -> bool:
        """Whether the session exists (checking its owner unless this object did already)."""
        if self._known is None:
            self.check(await self.service.find_by_id(self.session_id))
        return bool(self._known)

    async def _exists_now(self) -> bool:
        """`exists`, read again unless this object has seen the session as its own."""
        if self._known is not True:
            self._known = None
        return await self.exists()

    async def append(self, events: Sequence[SessionEvent]) -> None:
        """Append ``events`` as one batch, creating the session first if it does not exist."""
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
        """Delete the session and its events (nothing happens for an unknown one)."""
        if self._user_id is not None and not await self._exists_now():
            return
        await self.service.delete(self.session_id)
        self._known = False

    async def compact(
        self, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult | None:
        """Compact when ``trigger`` fires; ``None`` when the session does not exist."""
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


class History:
    """What an adapter object of one session id is built from (checked), shared by the
    LangChain, Pydantic AI and Agents SDK adapters."""

    session_id: str
    """The session's id."""

    def __init__(
        self,
        session_id: str,
        service: SessionService,
        user_id: str | None,
        metadata: Mapping[str, JsonValue] | None,
        trigger: TriggerLike | None,
        strategy: CompactionStrategy | None,
    ) -> None:
        require_nonblank(session_id, "session_id")
        require_service(service, "service")
        if user_id is not None:
            require_nonblank(user_id, "user_id")
        if (trigger is None) != (strategy is None):
            raise UsageError("compaction needs both a trigger and a strategy")
        self.session_id = session_id
        self.service = service
        """The service the session lives in."""
        self.user_id: str = user_id or session_id
        """The owner of a session this object creates."""
        self.metadata: dict[str, JsonValue] = dict(metadata or {})
        """Metadata of a session this object creates."""
        self._owner = user_id
        self._trigger = trigger
        self._strategy = strategy
        self._session = self._new_session(session_id)
        self._loop = StoreLoop(service, f"{type(self).__name__} {session_id!r}")

    def _new_session(self, session_id: str) -> AdapterSession:
        return AdapterSession(
            self.service,
            session_id,
            user_id=self._owner,
            creator=self.user_id,
            metadata=self.metadata,
        )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(session_id={self.session_id!r})"

    async def _compact(self) -> CompactionResult | None:
        if self._trigger is None or self._strategy is None:
            return None
        return await self._session.compact(self._trigger, self._strategy)
