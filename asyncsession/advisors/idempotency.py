"""``IdempotentTurnAdvisor``: a retried request gets the reply its first attempt stored.

A client retries a POST after a timeout or a reconnect. With a request id in the advisor
context (``REQUEST_ID_CONTEXT_KEY``, e.g. from an ``Idempotency-Key`` header) and the memory
advisor storing user messages with a `RequestIdEventIdGenerator`, the request's user message has
an id fixed by the request. Before the turn, this advisor looks for that event in the session's
recent log:

- found, and followed by a final reply (an assistant message asking for no tools) before the
  next user message: the attempt completed, so the stored reply is returned (replayed as chunks
  on the stream path) and the model is not called;
- found without a final reply (the attempt failed or is still running), or not found: the turn
  runs; the user message is stored once, because its id is taken.

Guarantee: a retry that starts after an attempt of the same request completed never calls the
model. Attempts of one request that overlap in one process run one after the other (a lock per
session and request id), so the model is called once when the first completes. Attempts that
overlap in different processes may each call the model; the user message is still stored once,
each reply is stored, and later retries get the first stored reply.
Without a request id the advisor does nothing and costs nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

from ..chat import ChatChunk, ChatRequest, ChatResponse
from ..events import SessionEvent
from ..exceptions import AccessDenied, UsageError
from ..filters import EventFilter
from ..messages import AssistantMessage, UserMessage
from ..service import SessionService
from .base import HIGHEST_PRECEDENCE, CallContext, CallNext, ChunkStream, StreamNext
from .contexts import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SessionContexts,
)
from .ids import REQUEST_ID_CONTEXT_KEY, RequestIdEventIdGenerator

__all__ = ["IdempotentTurnAdvisor"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Stored:
    """A completed attempt: its reply and the ids of the events it stored."""

    reply: AssistantMessage
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
    """

    DEFAULT_ORDER: Final = HIGHEST_PRECEDENCE + 100
    """The default order: outside ``SessionTurnAdvisor`` (``+ 200``), so a replay resolves
    nothing and calls no tool."""

    def __init__(
        self, service: SessionService, *, lookback: int = 200, order: int = DEFAULT_ORDER
    ) -> None:
        if lookback <= 0:
            raise ValueError(f"lookback must be positive, got {lookback!r}")
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
            return await call_next(ctx, request)
        finally:
            self._locks.release(key)

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The stored reply of a completed attempt as chunks, else the turn's stream."""
        if ctx.context.get(REQUEST_ID_CONTEXT_KEY) is None:
            return call_next(ctx, request)

        async def open_stream() -> tuple[tuple[str, str], ChunkStream]:
            key = self._key(ctx)
            assert key is not None
            await self._locks.acquire(key)
            try:
                stored = await self._find(ctx, request, key[0])
            except BaseException:
                self._locks.release(key)
                raise
            if stored is not None:
                return key, ChunkStream.of_response(_replay(ctx, stored))
            return key, call_next(ctx, request)

        return _LockedStream(self._locks, open_stream)

    def _user_event_id(self, ctx: CallContext, request: ChatRequest) -> str | None:
        user = next((m for m in reversed(request.messages) if isinstance(m, UserMessage)), None)
        if user is None:
            return None
        for advisor in ctx.advisors:
            generator = getattr(advisor, "request_event_id_generator", None)
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
        else:
            request_ids.append(event.id)
    return None


def _replay(ctx: CallContext, stored: _Stored) -> ChatResponse:
    ctx.context[REQUEST_EVENT_IDS_CONTEXT_KEY] = list(stored.request_ids)
    ctx.context[RESPONSE_EVENT_IDS_CONTEXT_KEY] = list(stored.response_ids)
    return ChatResponse(message=stored.reply, finish_reason="stop", context=dict(ctx.context))


class _LockedStream(ChunkStream):
    """Holds the request's lock from the first chunk until the stream ends or is closed."""

    __slots__ = ("_closed", "_key", "_locks", "_open", "_source")

    def __init__(
        self,
        locks: _Locks,
        open_stream: Callable[[], Awaitable[tuple[tuple[str, str], ChunkStream]]],
    ) -> None:
        super().__init__()
        self._locks = locks
        self._open = open_stream
        self._key: tuple[str, str] | None = None
        self._source: ChunkStream | None = None
        self._closed = False

    async def __anext__(self) -> ChatChunk:
        if self._source is None:
            if self._closed:
                raise StopAsyncIteration
            self._key, self._source = await self._open()
        try:
            return await self._source.__anext__()
        except BaseException:
            self._release()
            raise

    def _release(self) -> None:
        if self._key is not None:
            key, self._key = self._key, None
            self._locks.release(key)

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
            self._release()
