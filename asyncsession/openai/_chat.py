"""The Chat Completions API at the edge: our chat values <-> its shapes, the request itself (call
or stream), and the one boundary where OpenAI SDK errors become ours.

A chat call's errors become `ChatError` and its subclasses (`map_openai_errors`), chained to the
SDK's; a summarizer's become `CompactionError` (`map_summarizer_errors`), which a summarizing
strategy reports without touching the log. The Responses API's modules use the same mapping.
"""

from __future__ import annotations

from collections.abc import Generator
from contextlib import contextmanager
from typing import Any, cast

import openai
from openai import AsyncOpenAI, AsyncStream
from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.completion_usage import CompletionUsage

from ..advisors import ChunkStream
from ..chat import (
    ChatChunk,
    ChatRequest,
    ChatResponse,
    StreamAggregator,
    ToolCallDelta,
    Usage,
)
from ..exceptions import ChatError, ChatTimeout, CompactionError
from ..messages import AssistantMessage, ToolCall
from ..tools import Tool

__all__ = [
    "ModelStream",
    "chunk_from_openai",
    "complete",
    "create_params",
    "map_openai_errors",
    "map_summarizer_errors",
    "response_from_completion",
    "tool_to_openai",
]


@contextmanager
def map_openai_errors(*, streaming: bool = False) -> Generator[None]:
    """Translate SDK errors raised inside the block into the most specific error of ours.

    Args:
        streaming: the block reads a stream that has started: a broken connection is then a
            ``ChatError``, not a failed request.
    """
    try:
        yield
    except openai.APITimeoutError as exc:
        raise ChatTimeout("The model did not answer in time (request timed out)") from exc
    except openai.APIStatusError as exc:
        raise ChatError(
            f"The model call failed with HTTP {exc.status_code}: {_detail(exc)}",
            status_code=exc.status_code,
        ) from exc
    except openai.APIConnectionError as exc:
        if streaming:
            raise ChatError(
                f"The model's stream broke off before it finished: {exc.message}"
            ) from exc
        raise ChatError(f"Could not reach the model: {exc.message}") from exc
    except openai.OpenAIError as exc:
        raise ChatError(f"The model call failed: {exc}") from exc


@contextmanager
def map_summarizer_errors(model: str) -> Generator[None]:
    """Translate SDK errors raised inside the block into `CompactionError`, naming ``model``
    and the HTTP status when there is one."""
    try:
        yield
    except openai.OpenAIError as exc:
        status = getattr(exc, "status_code", None)
        where = f" (HTTP {status})" if isinstance(status, int) else ""
        raise CompactionError(
            f"the summarizer's call to model {model!r} failed{where}: {exc}"
        ) from exc


def _detail(exc: openai.APIStatusError) -> str:
    """The API's own error message when the body has one, else the SDK's summary."""
    body = exc.body
    if isinstance(body, dict):
        message = cast(dict[str, object], body).get("message")
        if isinstance(message, str) and message:
            return message
    return exc.message


def tool_to_openai(tool: Tool) -> dict[str, Any]:
    """A function tool parameter for Chat Completions."""
    function: dict[str, Any] = {
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
    }
    if tool.strict:
        function["strict"] = True
    return {"type": "function", "function": function}


def create_params(request: ChatRequest, default_model: str) -> dict[str, Any]:
    """The keyword arguments of ``chat.completions.create`` for ``request``."""
    options = request.options
    messages: list[Any] = []
    for message in request.messages:  # checked when the request was made
        messages.extend(message.to_openai())
    params: dict[str, Any] = {"model": options.model or default_model, "messages": messages}
    if request.tools:
        params["tools"] = [tool_to_openai(t) for t in request.tools]
    for name in (
        "temperature",
        "top_p",
        "max_completion_tokens",
        "seed",
        "parallel_tool_calls",
        "reasoning_effort",
        "timeout",
    ):
        value = getattr(options, name)
        if value is not None:
            params[name] = value
    if options.stop is not None:
        params["stop"] = list(options.stop)
    if options.tool_choice is not None:
        choice = options.tool_choice
        params["tool_choice"] = choice if isinstance(choice, str) else dict(choice)
    if options.response_format is not None:
        params["response_format"] = dict(options.response_format)
    if options.extra_body:
        params["extra_body"] = dict(options.extra_body)
    return params


def _usage(usage: CompletionUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def _assistant(message: ChatCompletionMessage) -> AssistantMessage:
    calls: list[ToolCall] = []
    for call in message.tool_calls or ():
        if call.type == "function":
            calls.append(
                ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments)
            )
        else:
            custom = call.custom
            calls.append(
                ToolCall(id=call.id, name=custom.name, arguments=custom.input, type="custom")
            )
    extra: dict[str, Any] = {}
    if message.refusal is not None:
        extra["refusal"] = message.refusal
    if message.audio is not None:
        extra["audio"] = {"id": message.audio.id}  # the assistant-message param takes the id
    return AssistantMessage(text=message.content, tool_calls=tuple(calls), extra=extra)


def response_from_completion(completion: ChatCompletion) -> ChatResponse:
    """The first choice of a completion as our response."""
    choice = completion.choices[0]
    return ChatResponse(
        message=_assistant(choice.message),
        finish_reason=choice.finish_reason,
        usage=_usage(completion.usage),
        model=completion.model,
        id=completion.id,
    )


def chunk_from_openai(chunk: ChatCompletionChunk) -> ChatChunk:
    """One SDK chunk as ours (first choice only)."""
    text = ""
    deltas: tuple[ToolCallDelta, ...] = ()
    finish_reason: str | None = None
    for choice in chunk.choices:
        if choice.index != 0:
            continue
        delta = choice.delta
        text = delta.content or ""
        if delta.tool_calls:
            deltas = tuple(
                ToolCallDelta(
                    index=call.index,
                    id=call.id,
                    name=call.function.name if call.function else None,
                    arguments=(call.function.arguments or "") if call.function else "",
                )
                for call in delta.tool_calls
            )
        finish_reason = choice.finish_reason
    return ChatChunk(
        text=text,
        tool_calls=deltas,
        finish_reason=finish_reason,
        usage=_usage(chunk.usage),
        id=chunk.id,
        model=chunk.model,
    )


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
    reason raises ``ChatError``, as does a connection that breaks mid-stream.
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
                raise ChatError(
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
