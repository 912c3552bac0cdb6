"""The innermost step of a Responses API chain: ``responses.create`` itself (call or stream)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from openai import AsyncOpenAI, AsyncStream
from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseErrorEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseOutputItem,
    ResponseOutputItemDoneEvent,
    ResponseStreamEvent,
)

from ..advisors import ChunkStream
from ..chat import ChatChunk, ChatRequest, ChatResponse
from ..exceptions import ChatError
from ._chat import map_openai_errors
from ._responses_convert import (
    chunk_from_event,
    create_params,
    failure_of,
    response_from_response,
)

__all__ = ["ResponsesModelStream", "complete_response"]


async def complete_response(
    client: AsyncOpenAI,
    request: ChatRequest,
    default_model: str,
    *,
    store: bool,
    include: Sequence[str],
    context_management: Sequence[Mapping[str, Any]] = (),
) -> ChatResponse:
    """One non-streamed ``responses.create`` request."""
    params = create_params(
        request,
        default_model,
        store=store,
        include=include,
        context_management=context_management,
    )
    with map_openai_errors():
        response: Response = await client.responses.create(**params, stream=False)
    return response_from_response(response)


class ResponsesModelStream(ChunkStream):
    """One streamed ``responses.create`` request: every event becomes a chunk at once.

    The reply is the ``response.completed`` event's response (the items of the
    ``response.output_item.done`` events when it carries none). ``response.failed``,
    ``response.incomplete`` and ``error`` events raise ``ChatError``; a stream that ends without
    ``response.completed`` raises ``ChatError``. Either way nothing is produced, so no
    advisor stores a half reply.
    """

    __slots__ = ("_client", "_closed", "_done_items", "_params", "_reply", "_sdk")

    def __init__(
        self,
        client: AsyncOpenAI,
        request: ChatRequest,
        default_model: str,
        *,
        store: bool,
        include: Sequence[str],
        context_management: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__()
        self._client = client
        self._params = create_params(
            request,
            default_model,
            store=store,
            include=include,
            context_management=context_management,
        )
        self._sdk: AsyncStream[ResponseStreamEvent] | None = None
        self._done_items: dict[int, ResponseOutputItem] = {}
        self._reply: ChatResponse | None = None
        self._closed = False

    async def __anext__(self) -> ChatChunk:
        if self._closed:
            raise StopAsyncIteration
        if self._reply is not None:
            await self._drain()
            raise StopAsyncIteration
        if self._sdk is None:
            with map_openai_errors():
                self._sdk = await self._client.responses.create(**self._params, stream=True)
        try:
            with map_openai_errors(streaming=True):
                event = await self._sdk.__anext__()
        except StopAsyncIteration:
            await self.aclose()
            raise ChatError(
                "The model's stream ended before it finished (no response.completed event)"
            ) from None
        except BaseException:
            await self.aclose()
            raise
        try:
            self._fold(event)
        except ChatError:
            await self.aclose()
            raise
        chunk = chunk_from_event(event)
        if self._reply is not None:
            return _final_chunk(chunk, self._reply)
        return chunk

    async def _drain(self) -> None:
        """Read the body to its end after ``response.completed``, so the connection is reused."""
        try:
            if self._sdk is not None:
                with map_openai_errors(streaming=True):
                    async for _ in self._sdk:
                        pass
        finally:
            await self.aclose()

    def _fold(self, event: ResponseStreamEvent) -> None:
        if isinstance(event, ResponseOutputItemDoneEvent):
            self._done_items[event.output_index] = event.item
        elif isinstance(event, ResponseCompletedEvent):
            output = None
            if not event.response.output and self._done_items:
                output = [item for _, item in sorted(self._done_items.items())]
            self._reply = response_from_response(event.response, output)
        elif isinstance(event, ResponseFailedEvent | ResponseIncompleteEvent):
            failure = failure_of(event.response)
            raise failure or ChatError(f"The model's stream reported {event.type}")
        elif isinstance(event, ResponseErrorEvent):
            raise ChatError(f"The model's stream reported an error ({event.code}: {event.message})")

    def _produced(self) -> ChatResponse | None:
        return self._reply

    async def aclose(self) -> None:
        """Close the HTTP stream (the server sees the client go away if it was not done)."""
        self._closed = True
        sdk, self._sdk = self._sdk, None  # closed once, however often this is called
        if sdk is not None:
            await sdk.close()


def _final_chunk(chunk: ChatChunk, reply: ChatResponse) -> ChatChunk:
    return ChatChunk(
        finish_reason=reply.finish_reason,
        usage=reply.usage,
        id=reply.id,
        model=reply.model,
        raw=chunk.raw,
    )
