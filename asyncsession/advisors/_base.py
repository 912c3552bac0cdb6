"""The advisor protocol, ``BaseAdvisor`` with ``before``/``after`` hooks, the call context, and the
chunk stream the stream path passes along.

An advisor wraps what is further in: the client's ``advisors`` wrap the whole turn (once per
call), its ``model_advisors`` wrap each model call (once per round of the tool loop). Each list
runs in the order given, the first outermost; each advisor gets a ``call_next`` that runs the
rest. Every advisor has two shapes of the same lifecycle: ``call`` (one awaited response) and
``stream`` (chunks as they arrive).

On the stream path ``call_next`` returns a [`ChunkStream`][asyncsession.advisors.ChunkStream]:
iterate it to pass the chunks on, and once it is exhausted its
[`response`][asyncsession.advisors.ChunkStream.response] is the response the chunks add up to,
after everything further in has had its say. Assigning ``chunks.response`` replaces the response
that advisors further out see.

Advisors keep no per-call state on ``self``: per-call data goes on the
[`CallContext`][asyncsession.advisors.CallContext].
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from pydantic import JsonValue

from ..chat import ChatChunk, ChatRequest, ChatResponse, ToolCallDelta
from ..events import Session
from ..exceptions import UsageError
from ..filters import EventFilter

__all__ = [
    "EVENT_FILTER_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "SESSION_METADATA_CONTEXT_KEY",
    "USER_ID_CONTEXT_KEY",
    "Advisor",
    "BaseAdvisor",
    "CallContext",
    "CallNext",
    "ChunkStream",
    "StreamNext",
]

SESSION_ID_CONTEXT_KEY: Final = "chat_memory_conversation_id"
"""The advisor-context key of the session id, as the reference names it; ``session_id=`` is the
same thing as a keyword."""
USER_ID_CONTEXT_KEY: Final = "chat_memory_user_id"
"""The advisor-context key of the user id (``user_id=``)."""
EVENT_FILTER_CONTEXT_KEY: Final = "chat_memory_event_filter_id"
"""The advisor-context key of a per-call ``EventFilter`` (``event_filter=``)."""
SESSION_METADATA_CONTEXT_KEY: Final = "chat_memory_session_metadata"
"""The advisor-context key of the metadata of a session the call creates (``metadata=``)."""


@dataclass(slots=True, kw_only=True)
class CallContext:
    """What one chat call carries besides the request, shared by all its advisors.

    The keywords of the call (``session_id=``, ``user_id=``, ...) and the reference's context
    keys in ``context`` are the same values: each is filled in from the other when the call
    starts.
    """

    session_id: str | None = None
    """The call's session; ``None`` for a call without session memory."""
    user_id: str | None = None
    """The caller's user: the owner of a session the call creates, checked on an existing one."""
    request_id: str | None = None
    """The client's id of this request (an ``Idempotency-Key``): a retry carries the same one."""
    event_filter: EventFilter | None = None
    """An ``EventFilter`` laid over the client's history filter for this call."""
    metadata: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """The metadata of a session the call creates."""
    context: dict[str, Any] = field(default_factory=dict[str, Any])
    """The advisor context: the reference's keys, and whatever advisors put there; it ends up
    in ``ChatResponse.context``."""
    streaming: bool = False
    """Whether this is a stream call."""
    max_tool_rounds: int = 10
    """The most model calls of the turn's tool loop."""
    session: Session | None = None
    """The session, once the turn has found or created it and checked its owner: set before the
    first model call, so ``model_advisors`` see it; ``None`` before that."""
    _streams: list[ChunkStream] = field(default_factory=list["ChunkStream"], repr=False)


class ChunkStream(ABC):
    """The chunks of the rest of the chain, and the response they add up to.

    Iterate it to the end, then read [`response`][asyncsession.advisors.ChunkStream.response].
    Close it with [`aclose`][asyncsession.advisors.ChunkStream.aclose] (or
    ``contextlib.aclosing``) if you stop early: that closes the model's HTTP stream.
    """

    __slots__ = ("_override",)

    def __init__(self) -> None:
        self._override: ChatResponse | None = None

    def __aiter__(self) -> ChunkStream:
        return self

    @abstractmethod
    async def __anext__(self) -> ChatChunk:
        """The next chunk; ``StopAsyncIteration`` at the end."""

    async def aclose(self) -> None:  # noqa: B027 - a no-op default, overridden where needed
        """Stop early and release what the stream holds (the model's HTTP stream)."""

    def _produced(self) -> ChatResponse | None:
        """The response once the stream is exhausted, else ``None``."""
        return None

    @property
    def response(self) -> ChatResponse:
        """The response the chunks add up to, as what is further in left it.

        Raises:
            UsageError: the stream has not been read to the end.
        """
        if self._override is not None:
            return self._override
        produced = self._produced()
        if produced is None:
            raise UsageError("The response is known only once the stream was read to the end")
        return produced

    @response.setter
    def response(self, value: ChatResponse) -> None:
        self._override = value

    @classmethod
    def of_response(cls, response: ChatResponse) -> ChunkStream:
        """A stream that replays a finished response as chunks (for advisors that answer
        without calling further in, such as a cache)."""
        return _ReplayStream(response)


class _ReplayStream(ChunkStream):
    """A finished response as chunks: one for the model's message; after return-direct tools,
    that message's round (its tool calls) and then one chunk per result, as the tool loop
    streamed them."""

    __slots__ = ("_chunks", "_final")

    def __init__(self, response: ChatResponse) -> None:
        super().__init__()
        deltas = tuple(
            ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments)
            for index, call in enumerate(response.message.tool_calls)
        )
        results = response.tool_results
        if results is None:
            text = response.text
            finish = response.finish_reason or ("tool_calls" if deltas else "stop")
        else:  # the model's round that asked for the return-direct tools
            text, finish = response.message.text or "", "tool_calls"
        chunk = ChatChunk(
            text=text,
            tool_calls=deltas,
            finish_reason=finish,
            usage=response.usage,
            id=response.id,
            model=response.model,
        )
        chunks = [chunk] if results is None else [chunk, *response.result_chunks()]
        self._chunks = deque(chunks)
        self._final = response

    async def __anext__(self) -> ChatChunk:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.popleft()

    def _produced(self) -> ChatResponse | None:
        return None if self._chunks else self._final


CallNext = Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]]
"""Runs the rest of the chain on the call path."""
StreamNext = Callable[[CallContext, ChatRequest], ChunkStream]
"""Runs the rest of the chain on the stream path (lazily: nothing happens until iterated)."""


class Advisor(Protocol):
    """Wraps what is further in: the turn, or one model call."""

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """Handle a call: usually ``await call_next(ctx, request)`` with work around it."""
        ...

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """Handle a stream: usually yield the chunks of ``call_next(ctx, request)``.

        Never wrap a ``yield`` in a task group or an ``asyncio.timeout`` block.
        """
        ...


class BaseAdvisor:
    """An advisor with ``before``/``after`` hooks that serve the call and the stream path alike.

    Override [`before`][asyncsession.advisors.BaseAdvisor.before] and
    [`after`][asyncsession.advisors.BaseAdvisor.after] for the common case, or ``call``/``stream``
    to wrap the rest of the chain yourself.

    On the stream path the chunks pass through untouched as they arrive, ``after`` runs once
    the stream has been read to the end and sees the aggregated response; it cannot rewrite
    chunks that were already yielded. A stream abandoned by its consumer never reaches ``after``.
    """

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Change the request on its way in (default: unchanged)."""
        return request

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        """Change the response on its way out (default: unchanged)."""
        return response

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """``before``, the rest of the chain, ``after``."""
        request = await self.before(ctx, request)
        response = await call_next(ctx, request)
        return await self.after(ctx, response)

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """``before``, every chunk of the rest of the chain, then ``after`` on the aggregate."""
        request = await self.before(ctx, request)
        chunks = call_next(ctx, request)
        async with aclosing(chunks):
            async for chunk in chunks:
                yield chunk
        chunks.response = await self.after(ctx, chunks.response)
