"""``ResponsesClient``: Responses API calls and streams, with the turn and advisors of
``ChatClient``; and the Responses API at the edge: our chat values <-> its request parameters,
responses and stream events, and ``responses.create`` itself (call or stream).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack, cast

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
    ResponseUsage,
)

from .._responses_items import assistant_from_output, items_to_messages, messages_to_items
from ..chat import (
    CallContext,
    ChatChunk,
    ChatRequest,
    ChatResponse,
    ChunkStream,
    ToolCallDelta,
    Usage,
)
from ..exceptions import ChatError, UsageError
from ..messages import Message
from ..tools import Tool
from ._client import ChatClient, ClientOptions, map_openai_errors

__all__ = ["DEFAULT_INCLUDE", "ResponsesClient"]


DEFAULT_INCLUDE: tuple[str, ...] = ("reasoning.encrypted_content",)
"""What a call asks to be included by default: the reasoning items' encrypted content, so a
call with ``store=False`` can replay them."""


def tool_to_responses(tool: Tool) -> dict[str, Any]:
    """A function tool parameter for the Responses API."""
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": dict(tool.parameters),
        "strict": bool(tool.strict),
    }


def _tool_choice(choice: str | Mapping[str, Any]) -> str | dict[str, Any]:
    if isinstance(choice, str):
        return choice
    shape = dict(choice)
    function: Any = shape.get("function")
    if shape.get("type") == "function" and isinstance(function, Mapping) and "name" not in shape:
        named = cast(Mapping[str, Any], function)  # the Chat Completions shape
        return {"type": "function", "name": named.get("name")}
    return shape


def _text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    shape = dict(response_format)
    schema: Any = shape.get("json_schema")
    if shape.get("type") == "json_schema" and isinstance(schema, Mapping):
        flat = cast(Mapping[str, Any], schema)  # the Chat Completions shape, flattened
        return {"type": "json_schema", **flat}
    return shape


def create_params(
    request: ChatRequest,
    default_model: str,
    *,
    store: bool,
    include: Sequence[str],
    context_management: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Any]:
    """The keyword arguments of ``responses.create`` for ``request``.

    Raises:
        UsageError: an option the Responses API does not take (``stop``, ``seed``).
    """
    options = request.options
    for name in ("stop", "seed"):
        if getattr(options, name) is not None:
            raise UsageError(f"The Responses API takes no {name!r} option; leave it unset")
    params: dict[str, Any] = {
        "model": options.model or default_model,
        "input": messages_to_items(request.messages),
        "store": store,
    }
    if context_management:
        params["context_management"] = [dict(entry) for entry in context_management]
    if include:
        params["include"] = list(include)
    if request.tools:
        params["tools"] = [tool_to_responses(t) for t in request.tools]
    for name in ("temperature", "top_p", "parallel_tool_calls", "timeout"):
        value = getattr(options, name)
        if value is not None:
            params[name] = value
    if options.max_completion_tokens is not None:
        params["max_output_tokens"] = options.max_completion_tokens
    if options.reasoning_effort is not None:
        params["reasoning"] = {"effort": options.reasoning_effort}
    if options.tool_choice is not None:
        params["tool_choice"] = _tool_choice(options.tool_choice)
    if options.response_format is not None:
        params["text"] = {"format": _text_format(options.response_format)}
    if options.extra_body:
        params["extra_body"] = dict(options.extra_body)
    return params


def _usage(usage: ResponseUsage | None) -> Usage | None:
    if usage is None:
        return None
    return Usage(
        prompt_tokens=usage.input_tokens,
        completion_tokens=usage.output_tokens,
        total_tokens=usage.total_tokens,
    )


def failure_of(response: Response) -> ChatError | None:
    """The error a failed or incomplete response stands for; ``None`` when it completed."""
    if response.status == "failed":
        error = response.error
        detail = f"{error.code}: {error.message}" if error is not None else "no error details"
        return ChatError(f"The model's response {response.id!r} failed ({detail})")
    if response.status == "incomplete":
        details = response.incomplete_details
        reason = details.reason if details is not None else None
        return ChatError(f"The model's response {response.id!r} is incomplete ({reason})")
    return None


def response_from_response(response: Response, output: Sequence[Any] | None = None) -> ChatResponse:
    """A completed Responses API response as ours (``output`` overrides its output items).

    Raises:
        ChatError: the response failed or is incomplete.
    """
    failure = failure_of(response)
    if failure is not None:
        raise failure
    message = assistant_from_output(response.output if output is None else output)
    return ChatResponse(
        message=message,
        finish_reason="tool_calls" if message.tool_calls else "stop",
        usage=_usage(response.usage),
        model=response.model,
        id=response.id,
    )


def chunk_from_event(event: ResponseStreamEvent) -> ChatChunk:
    """One streamed event as our chunk; the event stays reachable as ``chunk.raw``."""
    match event.type:
        case "response.output_text.delta":
            return ChatChunk(text=event.delta, raw=event)
        case "response.reasoning_summary_text.delta":
            return ChatChunk(reasoning=event.delta, raw=event)
        case "response.function_call_arguments.delta":
            delta = ToolCallDelta(index=event.output_index, arguments=event.delta)
            return ChatChunk(tool_calls=(delta,), raw=event)
        case "response.output_item.added" if event.item.type == "function_call":
            item = event.item
            delta = ToolCallDelta(index=event.output_index, id=item.call_id, name=item.name)
            return ChatChunk(tool_calls=(delta,), raw=event)
        case "response.created" | "response.in_progress":
            return ChatChunk(id=event.response.id, model=event.response.model, raw=event)
        case _:
            return ChatChunk(raw=event)


class ResponsesModelStream(ChunkStream):
    """One streamed ``responses.create`` request: every event becomes a chunk at once.

    The reply is the ``response.completed`` event's response (the items of the
    ``response.output_item.done`` events when it carries none). ``response.failed``,
    ``response.incomplete`` and ``error`` events raise ``ChatError``; a stream that ends without
    ``response.completed`` raises ``ChatError``. Either way nothing is produced, so no
    advisor stores a half reply.
    """

    __slots__ = ("_client", "_closed", "_done_items", "_params", "_reply", "_sdk")

    def __init__(self, client: AsyncOpenAI, params: dict[str, Any]) -> None:
        super().__init__()
        self._client = client
        self._params = params
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


class ResponsesClient(ChatClient):
    """The Responses API (``client.responses.create``) over a borrowed ``openai.AsyncOpenAI``.

    It takes the arguments of [`ChatClient`][asyncsession.openai.ChatClient] and raises the
    same errors; the turn, the advisors and the session log cannot tell the two apart. What
    differs is the wire: the prompt goes as input items,
    reasoning items come back on the assistant message and are replayed in the next request,
    and a stream yields one chunk per semantic event (``chunk.raw`` is the SDK's event).
    ``default_messages`` and ``messages=`` may be Responses input items.

    The session is the history: every call sends ``store=False`` and asks for
    ``reasoning.encrypted_content`` (pass ``include=()`` for a model without reasoning, which
    refuses it). ``previous_response_id`` is never sent; if you pass one in
    ``ChatOptions.extra_body``, the server prepends that response's history to the input the
    turn already replays, so do it only without session memory.

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        store: whether OpenAI stores the responses (default ``False``).
        include: the ``include`` list of every request.
        context_management: the ``context_management`` of every request, e.g.
            ``[{"type": "compaction", "compact_threshold": 200_000}]``: the server then compacts
            during a response that reaches the threshold. The turn stores a reply that carries
            a ``compaction`` item as a compaction of the session covering exactly what the
            request sent, so every later request sends the active view, starting at the item.
        **options: the arguments of ``ChatClient`` (``sessions``, ``tools``, ``advisors``, ...;
            ``stop`` and ``seed`` options do not exist on this API and raise ``UsageError``).
    """

    def __init__(
        self,
        openai_client: AsyncOpenAI,
        *,
        model: str,
        store: bool = False,
        include: Sequence[str] = DEFAULT_INCLUDE,
        context_management: Sequence[Mapping[str, Any]] = (),
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(openai_client, model=model, **options)
        self.store = store
        """Whether OpenAI stores the responses."""
        self.include: tuple[str, ...] = tuple(include)
        """The ``include`` list of every request."""
        self.context_management: tuple[dict[str, Any], ...] = tuple(
            dict(entry) for entry in context_management
        )
        """The ``context_management`` entries of every request."""

    @staticmethod
    def _convert_dicts(messages: list[dict[str, Any]]) -> list[Message]:
        """Messages given as dicts are Responses API input items."""
        return items_to_messages(messages)

    def _params(self, request: ChatRequest) -> dict[str, Any]:
        return create_params(
            request,
            self.model,
            store=self.store,
            include=self.include,
            context_management=self.context_management,
        )

    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        with map_openai_errors():
            response: Response = await self.openai_client.responses.create(
                **self._params(request), stream=False
            )
        return response_from_response(response)

    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        return ResponsesModelStream(self.openai_client, self._params(request))
