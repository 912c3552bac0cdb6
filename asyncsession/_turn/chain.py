"""Running a list of advisors around an innermost step, in the order given: fold, run; and
folding a stream's chunks into the response they add up to (`StreamAggregator`).

The client runs its ``advisors`` around the turn, and the turn runs the ``model_advisors``
around each model call, both through `run_call` (one awaited response) or `start_stream`
(chunks, lazily); without advisors they call the step directly. The chain knows nothing about
what the advisors do.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field

from ..chat import (
    Advisor,
    CallContext,
    CallNext,
    ChatChunk,
    ChatRequest,
    ChatResponse,
    ChunkStream,
    StreamNext,
    Usage,
)
from ..messages import AssistantMessage, ToolCall

__all__ = ["StepStream", "StreamAggregator", "close_streams", "run_call", "start_stream"]


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


class StepStream(ChunkStream):
    """The chunks of a turn's steps: they run as they are iterated; closing the stream early
    abandons the turn (its model stream is closed, its lease released, no reply stored)."""

    __slots__ = ("_final", "_steps")

    def __init__(
        self, steps: AsyncGenerator[ChatChunk], final: Callable[[], ChatResponse | None]
    ) -> None:
        super().__init__()
        self._steps = steps
        self._final = final

    async def __anext__(self) -> ChatChunk:
        return await self._steps.__anext__()

    def _produced(self) -> ChatResponse | None:
        return self._final()

    async def aclose(self) -> None:
        await self._steps.aclose()


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


class StreamAggregator:
    """Folds the chunks of one model round into the response they add up to.

    Text pieces are joined once at the end and tool-call fragments are folded by their index, so
    adding a chunk costs O(1) however long the reply grows. (The SDK's
    ``ChatCompletionStreamState`` re-serialises the whole snapshot on every chunk, which grows
    quadratically with the reply.)
    """

    __slots__ = ("_calls", "_finish_reason", "_id", "_model", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._id: str | None = None
        self._model: str | None = None

    def add(self, chunk: ChatChunk) -> None:
        """Fold one chunk in."""
        if chunk.text:
            self._text.append(chunk.text)
        for delta in chunk.tool_calls:
            parts = self._calls.get(delta.index)
            if parts is None:
                parts = self._calls[delta.index] = _CallParts()
            if delta.id:
                parts.id = delta.id
            if delta.name:
                parts.name += delta.name
            if delta.arguments:
                parts.arguments.append(delta.arguments)
        if chunk.finish_reason is not None:
            self._finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.id is not None and self._id is None:
            self._id = chunk.id
        if chunk.model is not None and self._model is None:
            self._model = chunk.model

    @property
    def is_finished(self) -> bool:
        """Whether a chunk with a finish reason has been folded in."""
        return self._finish_reason is not None

    def response(self) -> ChatResponse:
        """The response the chunks so far add up to."""
        calls = tuple(
            ToolCall(id=parts.id, name=parts.name, arguments="".join(parts.arguments) or "{}")
            for _, parts in sorted(self._calls.items())
        )
        text = "".join(self._text)
        message = AssistantMessage(text=text if text or not calls else None, tool_calls=calls)
        return ChatResponse(
            message=message,
            finish_reason=self._finish_reason,
            usage=self._usage,
            model=self._model,
            id=self._id,
        )
