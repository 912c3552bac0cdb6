"""``IdempotentTurnAdvisor``: a retried request gets the reply its first attempt stored.

A client retries a POST after a timeout or a reconnect. With a request id in the advisor
context (``REQUEST_ID_CONTEXT_KEY``, e.g. from an ``Idempotency-Key`` header) and the memory
advisor storing user messages with a `RequestIdEventIdGenerator`, the request's user message has
an id fixed by the request. Before the turn, this advisor looks for that event in the session's
recent log:

- found, and followed by a final reply (an assistant message asking for no tools) before the
  next user message: the attempt completed, so the stored reply is returned (replayed as chunks
  on the stream path) and the model is not called;
- found, and followed by the results of return-direct tools that answer the stored tool call
  before them (the turn advisor marks them): the attempt completed on those tools, so the
  response is their tool call with the stored results (``tool_results``, finish reason
  ``"return_direct"``; on the stream path the round's chunk, then one chunk per result), and
  neither the model nor the tools run;
- found without a final reply (the attempt failed or is still running), or not found: the turn
  runs; the user message is stored once, because its id is taken.

Guarantee: a retry that starts after an attempt of the same request completed never calls the
model. Attempts of one request that overlap in one process run one after the other (a lock per
session and request id), so the model is called once when the first completes.

Across processes, give the advisor the store as ``leases``. The attempt that will call the model
first takes a lease on the session (``acquire_lease`` at version 0, a compare-and-swap on the
session document with an expiry, ``lease_ttl``), so attempts of one session with a request id
run one at a time; an overlapping attempt
in any process waits, at most ``wait`` seconds, for the holder's reply and returns it (replayed
as chunks on the stream path), takes the turn over if the holder let go (it failed, or crashed
and its lease expired), or raises `TurnInProgress`. The model is then called once per request
id while the holder lives; a holder that dies mid-turn is replaced after ``lease_ttl``. A call
on a session that does not exist yet creates it first (as the turn advisor would), so four first
attempts on a new session call the model once too. Without ``leases``, attempts that overlap in
different processes may each call the model; the user message is still stored once, each reply
is stored, and later retries get the first stored reply.
Without a request id the advisor does nothing and costs nothing.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Final

from .._checks import require_int
from ..chat import ChatChunk, ChatRequest, ChatResponse
from ..events import SessionEvent
from ..exceptions import AccessDenied, SessionNotFound, TurnInProgress, UsageError
from ..filters import EventFilter
from ..messages import AssistantMessage, ToolResponseMessage, UserMessage
from ..repository import Lease, SessionRepository
from ..service import SessionService
from ._return_direct import returned_results
from ._returned import RETURN_DIRECT
from ._session import check_service
from .base import IDEMPOTENCY_ORDER, CallContext, CallNext, ChunkStream, StreamNext
from .contexts import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SessionContexts,
)
from .ids import REQUEST_ID_CONTEXT_KEY, RequestIdEventIdGenerator, StoresRequestMessages

__all__ = ["IdempotentTurnAdvisor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stored:
    """A completed attempt: its reply (with the results of return-direct tools, if they
    ended it) and the ids of the events it stored."""

    reply: AssistantMessage
    results: ToolResponseMessage | None = None
    request_ids: list[str]
    response_ids: list[str]


class _Locks:
    """One lock per (session, request id) while any attempt of it runs in this process."""

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[tuple[str, str], tuple[asyncio.Lock, int]] = {}

    async def acquire(self, key: tuple[str, str]) -> None:
        lock, users = self._held.get(key, (asyncio.Lock(), 0))
        self._held[key] = (lock, users + 1)
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise

    def release(self, key: tuple[str, str]) -> None:
        self._held[key][0].release()
        self._forget(key)

    def _forget(self, key: tuple[str, str]) -> None:
        lock, users = self._held[key]
        if users == 1:
            del self._held[key]
        else:
            self._held[key] = (lock, users - 1)


class IdempotentTurnAdvisor:
    """Answers a retried request from the log when its first attempt completed.

    Place it outside the session advisors (its default order does), and store user messages
    with ``SessionMemoryAdvisor(request_event_id_generator=RequestIdEventIdGenerator())``.

    Args:
        service: the session service the memory advisor stores the turn with.
        lookback: how many of the session's newest events are searched for the request; an
            attempt older than that runs again (its user message is still stored once).
        order: the position in the chain.
        leases: the store the service writes to, to lease request ids across processes.
        lease_ttl: how long a lease lasts: longer than a turn takes (tool rounds included).
        wait: how long an overlapping attempt waits for the holder's reply, in seconds.
        poll: the first pause between two looks at the log while waiting (it doubles up to one
            second).

    Raises:
        UsageError: ``service`` or ``leases`` is not one, or a duration is out of range.
        ValueError: ``lookback`` is not positive.
    """

    DEFAULT_ORDER: Final = IDEMPOTENCY_ORDER
    """The default order: outside ``SessionTurnAdvisor`` (``+ 200``), so a replay resolves
    nothing and calls no tool."""

    def __init__(
        self,
        service: SessionService,
        *,
        lookback: int = 200,
        order: int = DEFAULT_ORDER,
        leases: SessionRepository | None = None,
        lease_ttl: timedelta = timedelta(seconds=120),
        wait: float = 30.0,
        poll: float = 0.05,
    ) -> None:
        check_service(service, "IdempotentTurnAdvisor")
        if require_int(lookback, "lookback") <= 0:
            raise ValueError(f"lookback must be positive, got {lookback!r}")
        if leases is not None and not all(
            callable(getattr(leases, name, None)) for name in ("acquire_lease", "release_lease")
        ):
            raise UsageError(f"leases must be a SessionRepository, not {leases!r}")
        if lease_ttl <= timedelta(0) or wait < 0 or poll <= 0:
            raise UsageError("lease_ttl and poll must be positive and wait not negative")
        self.leases = leases
        """The store that leases request ids, or ``None`` (one process only)."""
        self.lease_ttl = lease_ttl
        """How long a lease lasts."""
        self.wait = wait
        """How long an overlapping attempt waits, in seconds."""
        self.poll = poll
        """The first pause between two looks at the log while waiting."""
        self.service = service
        """The session service."""
        self.lookback = lookback
        """How many of the newest events are searched."""
        self.order = order
        """The position in the chain."""
        self._locks = _Locks()

    def _key(self, ctx: CallContext) -> tuple[str, str] | None:
        request_id = ctx.context.get(REQUEST_ID_CONTEXT_KEY)
        if request_id is None:
            return None
        return SessionContexts.session_id(ctx.context), str(request_id)

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """The stored reply of a completed attempt, else the turn.

        Raises:
            AccessDenied: the context's user does not own the session.
            UsageError: no memory advisor stores user messages with a
                `RequestIdEventIdGenerator`.
        """
        key = self._key(ctx)
        if key is None:
            return await call_next(ctx, request)
        await self._locks.acquire(key)
        try:
            stored = await self._find(ctx, request, key[0])
            if stored is not None:
                return _replay(ctx, stored)
            holder, stored = await self._lease(ctx, request, key)
            if stored is not None:
                return _replay(ctx, stored)
            try:
                return await call_next(ctx, request)
            finally:
                await self._release(key, holder)
        finally:
            self._locks.release(key)

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The stored reply of a completed attempt as chunks, else the turn's stream."""
        if ctx.context.get(REQUEST_ID_CONTEXT_KEY) is None:
            return call_next(ctx, request)

        async def open_stream() -> tuple[tuple[str, str], ChunkStream, str | None]:
            key = self._key(ctx)
            assert key is not None
            await self._locks.acquire(key)
            try:
                stored = await self._find(ctx, request, key[0])
                holder = None
                if stored is None:
                    holder, stored = await self._lease(ctx, request, key)
            except BaseException:
                self._locks.release(key)
                raise
            if stored is not None:
                return key, ChunkStream.of_response(_replay(ctx, stored)), None
            return key, call_next(ctx, request), holder

        return _LockedStream(self, open_stream)

    async def _lease(
        self, ctx: CallContext, request: ChatRequest, key: tuple[str, str]
    ) -> tuple[str | None, _Stored | None]:
        """Lease the request (``(holder, None)``), or the reply the holder stored meanwhile.

        Without ``leases``: ``(None, None)`` at once.

        Raises:
            TurnInProgress: another holder still runs after ``wait`` seconds.
        """
        leases = self.leases
        if leases is None:
            return None, None
        session_id, request_id = key
        holder = str(uuid.uuid4())
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.wait
        pause = self.poll
        while True:
            try:
                lease = Lease(holder=holder, expires_at=datetime.now(UTC) + self.lease_ttl)
                taken = await leases.acquire_lease(session_id, 0, lease)
            except SessionNotFound:
                create = SessionContexts.create_request(session_id, ctx.context)
                await self.service.find_or_create(create)
                continue
            # Taken or not, the holder may have stored its reply since the first look.
            stored = await self._find(ctx, request, session_id)
            if taken:
                if stored is not None:
                    await self._release(key, holder)
                    return None, stored
                return holder, None
            if stored is not None:
                return None, stored
            remaining = deadline - loop.time()
            if remaining <= 0:
                retry_after = max(1.0, self.lease_ttl.total_seconds())
                raise TurnInProgress(session_id, request_id, retry_after)
            await asyncio.sleep(min(pause, remaining))
            pause = min(pause * 2, 1.0)

    async def _release(self, key: tuple[str, str], holder: str | None) -> None:
        if holder is not None and self.leases is not None:
            await self.leases.release_lease(key[0], 0, holder)

    def _user_event_id(self, ctx: CallContext, request: ChatRequest) -> str | None:
        user = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
        if user is None:
            return None
        for advisor in ctx.advisors:
            if not isinstance(advisor, StoresRequestMessages):
                continue
            generator = advisor.request_event_id_generator
            if isinstance(generator, RequestIdEventIdGenerator):
                return generator.generate(ctx.context, user)
        raise UsageError(
            "IdempotentTurnAdvisor needs a SessionMemoryAdvisor that stores user messages with "
            "request_event_id_generator=RequestIdEventIdGenerator()"
        )

    async def _find(
        self, ctx: CallContext, request: ChatRequest, session_id: str
    ) -> _Stored | None:
        event_id = self._user_event_id(ctx, request)
        if event_id is None:
            return None
        snapshot = await self.service.get_snapshot(session_id, EventFilter(last_n=self.lookback))
        if snapshot is None:
            return None
        user_id = SessionContexts.user_id(ctx.context)
        if user_id is not None and snapshot.session.user_id != user_id:
            raise AccessDenied(session_id, user_id)
        return _completed(snapshot.events, event_id)


def _completed(events: Sequence[SessionEvent], event_id: str) -> _Stored | None:
    """The attempt that stored ``event_id`` as its user message, if it reached a final reply."""
    start = next((i for i, e in enumerate(events) if e.id == event_id), None)
    if start is None:
        return None
    request_ids: list[str] = [event_id]
    response_ids: list[str] = []
    call: AssistantMessage | None = None  # the newest tool call of the attempt
    for event in events[start + 1 :]:
        message = event.message
        if message is None:
            continue
        if isinstance(message, UserMessage):
            return None  # another request followed before this one's reply
        if isinstance(message, AssistantMessage):
            response_ids.append(event.id)
            if not message.tool_calls:
                return _Stored(reply=message, request_ids=request_ids, response_ids=response_ids)
            call = message
        else:
            request_ids.append(event.id)
            results = None if call is None else returned_results(event, call)
            if call is not None and results is not None:
                return _Stored(
                    reply=call, results=results, request_ids=request_ids, response_ids=response_ids
                )
    return None


def _replay(ctx: CallContext, stored: _Stored) -> ChatResponse:
    ctx.context[REQUEST_EVENT_IDS_CONTEXT_KEY] = list(stored.request_ids)
    ctx.context[RESPONSE_EVENT_IDS_CONTEXT_KEY] = list(stored.response_ids)
    if stored.results is not None:
        return ChatResponse(
            message=stored.reply,
            finish_reason=RETURN_DIRECT,
            tool_results=stored.results,
            context=dict(ctx.context),
        )
    return ChatResponse(message=stored.reply, finish_reason="stop", context=dict(ctx.context))


class _LockedStream(ChunkStream):
    """Holds the request's lock (and lease) from the first chunk until the stream ends or is
    closed."""

    __slots__ = ("_advisor", "_closed", "_holder", "_key", "_open", "_source")

    def __init__(
        self,
        advisor: IdempotentTurnAdvisor,
        open_stream: Callable[[], Awaitable[tuple[tuple[str, str], ChunkStream, str | None]]],
    ) -> None:
        super().__init__()
        self._advisor = advisor
        self._open = open_stream
        self._key: tuple[str, str] | None = None
        self._holder: str | None = None
        self._source: ChunkStream | None = None
        self._closed = False

    async def __anext__(self) -> ChatChunk:
        if self._source is None:
            if self._closed:
                raise StopAsyncIteration
            self._key, self._source, self._holder = await self._open()
        try:
            return await self._source.__anext__()
        except BaseException:
            await self._release()
            raise

    async def _release(self) -> None:
        if self._key is not None:
            key, self._key = self._key, None
            holder, self._holder = self._holder, None
            try:
                await self._advisor._release(key, holder)  # pyright: ignore[reportPrivateUsage]
            finally:
                self._advisor._locks.release(key)  # pyright: ignore[reportPrivateUsage]

    def _produced(self) -> ChatResponse | None:
        if self._source is None:
            return None
        try:
            return self._source.response
        except UsageError:  # not read to the end
            return None

    async def aclose(self) -> None:
        self._closed = True
        try:
            if self._source is not None:
                await self._source.aclose()
        finally:
            await self._release()
