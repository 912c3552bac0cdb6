"""The innermost step of a chain: the Chat Completions request itself (call or stream)."""

from __future__ import annotations

from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk

from ..advisors import ChunkStream
from ..chat import ChatChunk, ChatRequest, ChatResponse, StreamAggregator
from ..exceptions import StreamInterrupted
from ._chat_convert import chunk_from_openai, create_params, response_from_completion
from ._errors import map_openai_errors

__all__ = ["ModelStream", "complete"]


async def complete(client: AsyncOpenAI, request: ChatRequest, default_model: str) -> ChatResponse:
    """One non-streamed Chat Completions request."""
    with map_openai_errors():
        completion: ChatCompletion = await client.chat.completions.create(
            **create_params(request, default_model), stream=False
        )
    return response_from_completion(completion)


class ModelStream(ChunkStream):
    """The innermost stream of a chain: one streamed Chat Completions request.

    The request is sent when the first chunk is asked for. A stream that ends without a finish
    reason raises ``StreamInterrupted``, as does a connection that breaks mid-stream.
    """

    __slots__ = ("_aggregator", "_client", "_closed", "_done", "_params", "_sdk")

    def __init__(self, client: AsyncOpenAI, request: ChatRequest, default_model: str) -> None:
        super().__init__()
        self._client = client
        self._params = create_params(request, default_model)
        self._sdk: AsyncStream[ChatCompletionChunk] | None = None
        self._aggregator = StreamAggregator()
        self._done = False
        self._closed = False

    async def __anext__(self) -> ChatChunk:
        if self._closed or self._done:
            raise StopAsyncIteration
        if self._sdk is None:
            with map_openai_errors():
                self._sdk = await self._client.chat.completions.create(
                    **self._params, stream=True, stream_options={"include_usage": True}
                )
        try:
            with map_openai_errors(streaming=True):
                raw = await self._sdk.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            if not self._aggregator.is_finished:
                raise StreamInterrupted(
                    "The model's stream ended before it finished (no finish reason)"
                ) from None
            self._done = True
            raise
        chunk = chunk_from_openai(raw)
        self._aggregator.add(chunk)
        return chunk

    def _produced(self) -> ChatResponse | None:
        return self._aggregator.response() if self._done else None

    async def aclose(self) -> None:
        """Close the HTTP stream (the server sees the client go away if it was not done)."""
        self._closed = True
        sdk, self._sdk = self._sdk, None  # closed once, however often this is called
        if sdk is not None:
            await sdk.close()
