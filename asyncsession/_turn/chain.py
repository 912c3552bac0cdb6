"""Running a list of advisors around an innermost step, in the order given: fold, run.

The client runs its ``advisors`` around the turn, and the turn runs the ``model_advisors``
around each model call, both through `run_call` (one awaited response) or `start_stream`
(chunks, lazily); without advisors they call the step directly. The chain knows nothing about
what the advisors do.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

from ..advisors import Advisor, CallContext, CallNext, ChunkStream, StreamNext
from ..chat import ChatChunk, ChatRequest, ChatResponse, StreamAggregator

__all__ = ["close_streams", "run_call", "start_stream"]


async def run_call(
    advisors: Sequence[Advisor],
    ctx: CallContext,
    request: ChatRequest,
    inner: Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]],
) -> ChatResponse:
    """Run ``advisors`` (the first outermost) around ``inner`` on the call path."""
    call_next: CallNext = inner
    for advisor in reversed(advisors):
        call_next = _call_step(advisor, call_next)
    return await call_next(ctx, request)


def _call_step(advisor: Advisor, call_next: CallNext) -> CallNext:
    # A plain function that hands back the advisor's awaitable: no frame of its own stays on
    # the stack while the advisor runs.
    def step(ctx: CallContext, request: ChatRequest) -> Awaitable[ChatResponse]:
        return advisor.call(ctx, request, call_next)

    return step


def start_stream(
    advisors: Sequence[Advisor],
    ctx: CallContext,
    request: ChatRequest,
    inner: Callable[[CallContext, ChatRequest], ChunkStream],
) -> ChunkStream:
    """The stream of ``advisors`` around ``inner``; nothing runs until it is iterated."""
    if not advisors:
        stream = inner(ctx, request)
        ctx._streams.append(stream)  # pyright: ignore[reportPrivateUsage]
        return stream
    return _stream_step(advisors, 0, inner)(ctx, request)


def _stream_step(
    advisors: Sequence[Advisor],
    index: int,
    inner: Callable[[CallContext, ChatRequest], ChunkStream],
) -> StreamNext:
    def step(ctx: CallContext, request: ChatRequest) -> ChunkStream:
        stream: ChunkStream
        if index == len(advisors):
            stream = inner(ctx, request)
        else:
            level = _AdvisorStream()
            inner_step = _stream_step(advisors, index + 1, inner)

            def call_next(ctx: CallContext, request: ChatRequest) -> ChunkStream:
                further = inner_step(ctx, request)
                level.inner = further
                return further

            level.source = advisors[index].stream(ctx, request, call_next)
            stream = level
        ctx._streams.append(stream)  # pyright: ignore[reportPrivateUsage]
        return stream

    return step


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
