"""Building and running the chain of one call: sort by order, fold, run.

The clients (`ChatClient`, `ResponsesClient`) run every call and stream through these
functions; a client for another model API does the same: `sort_advisors` once, then
`run_call` with its own innermost model call, or `start_stream` with its own stream opener.

Right before the model is called, the chain runs the hooks advisors registered with
`CallContext.before_model_call`: work that must be done before the model runs, whatever sits
between the advisor that registered it and the model. The chain knows nothing else about what
the advisors do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence

from ..chat import ChatChunk, ChatRequest, ChatResponse, StreamAggregator
from .base import Advisor, CallContext, CallNext, ChunkStream, StreamNext

__all__ = ["close_streams", "run_call", "sort_advisors", "start_stream"]


def sort_advisors(advisors: Iterable[Advisor]) -> tuple[Advisor, ...]:
    """The chain, outermost first: by ``order``; ties keep registration order (stable sort)."""
    return tuple(sorted(advisors, key=lambda advisor: advisor.order))


async def run_call(
    ctx: CallContext,
    request: ChatRequest,
    model: Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]],
) -> ChatResponse:
    """Run ``ctx.advisors`` around ``model`` on the call path."""

    async def model_step(ctx: CallContext, request: ChatRequest) -> ChatResponse:
        await ctx.run_before_model_hooks()
        return await model(ctx, request)

    call_next: CallNext = model_step
    for advisor in reversed(ctx.advisors):
        call_next = _call_step(advisor, call_next)
    return await call_next(ctx, request)


def _call_step(advisor: Advisor, call_next: CallNext) -> CallNext:
    # A plain function that hands back the advisor's awaitable: no frame of its own stays on
    # the stack while the advisor runs.
    def step(ctx: CallContext, request: ChatRequest) -> Awaitable[ChatResponse]:
        return advisor.call(ctx, request, call_next)

    return step


def start_stream(
    ctx: CallContext,
    request: ChatRequest,
    model: Callable[[CallContext, ChatRequest], ChunkStream],
) -> ChunkStream:
    """The stream of ``ctx.advisors`` around ``model``; nothing runs until it is iterated."""
    return _stream_step(ctx.advisors, 0, model)(ctx, request)


def _stream_step(
    advisors: Sequence[Advisor],
    index: int,
    model: Callable[[CallContext, ChatRequest], ChunkStream],
) -> StreamNext:
    def step(ctx: CallContext, request: ChatRequest) -> ChunkStream:
        stream: ChunkStream
        if index == len(advisors):
            hooks_first = ctx.has_before_model_hooks
            stream = _HooksFirst(ctx, request, model) if hooks_first else model(ctx, request)
        else:
            level = _AdvisorStream()
            inner_step = _stream_step(advisors, index + 1, model)

            def call_next(ctx: CallContext, request: ChatRequest) -> ChunkStream:
                inner = inner_step(ctx, request)
                level.inner = inner
                return inner

            level.source = advisors[index].stream(ctx, request, call_next)
            stream = level
        ctx._streams.append(stream)  # pyright: ignore[reportPrivateUsage]
        return stream

    return step


class _HooksFirst(ChunkStream):
    """The model's stream, opened only once the before-model hooks have run."""

    __slots__ = ("_ctx", "_done", "_inner", "_model", "_request")

    def __init__(
        self,
        ctx: CallContext,
        request: ChatRequest,
        model: Callable[[CallContext, ChatRequest], ChunkStream],
    ) -> None:
        super().__init__()
        self._ctx = ctx
        self._request = request
        self._model = model
        self._inner: ChunkStream | None = None
        self._done = False

    async def __anext__(self) -> ChatChunk:
        if self._inner is None:
            await self._ctx.run_before_model_hooks()
            self._inner = self._model(self._ctx, self._request)
        try:
            return await self._inner.__anext__()
        except StopAsyncIteration:
            self._done = True
            raise

    def _produced(self) -> ChatResponse | None:
        return self._inner.response if self._done and self._inner is not None else None

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()


class _AdvisorStream(ChunkStream):
    """One advisor's stream; its response is that of the last stream it called further in.

    An advisor that answers without calling further in (a cache, say) gets its chunks
    aggregated here instead.
    """

    __slots__ = ("_aggregator", "_done", "inner", "source")

    def __init__(self) -> None:
        super().__init__()
        self.source: AsyncIterator[ChatChunk] | None = None
        self.inner: ChunkStream | None = None
        self._aggregator: StreamAggregator | None = None
        self._done = False

    async def __anext__(self) -> ChatChunk:
        assert self.source is not None
        try:
            chunk = await self.source.__anext__()
        except StopAsyncIteration:
            self._done = True
            raise
        if self.inner is None and not isinstance(self.source, ChunkStream):
            if self._aggregator is None:
                self._aggregator = StreamAggregator()
            self._aggregator.add(chunk)
        return chunk

    def _produced(self) -> ChatResponse | None:
        if not self._done:
            return None
        if self.inner is not None:
            return self.inner.response
        if isinstance(self.source, ChunkStream):  # e.g. ChunkStream.of_response(cached)
            return self.source.response
        return None if self._aggregator is None else self._aggregator.response()

    async def aclose(self) -> None:
        close = getattr(self.source, "aclose", None)
        if close is not None:
            await close()


async def close_streams(ctx: CallContext) -> None:
    """Close every stream the chain opened during the call, outermost first.

    Advisors close what they called with ``aclosing``; this is the safety net for one that
    did not, so that no generator is left for the garbage collector to finalise in a task.
    """
    streams = ctx._streams  # pyright: ignore[reportPrivateUsage]
    for stream in list(streams):
        await stream.aclose()
