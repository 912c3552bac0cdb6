"""Our chat values <-> OpenAI Responses API shapes (request parameters, responses, events)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from openai.types.responses import Response, ResponseStreamEvent, ResponseUsage

from ..chat import ChatChunk, ChatRequest, ChatResponse, ToolCallDelta, Usage
from ..exceptions import ChatError, UsageError
from ..tools import Tool
from ._responses_items import assistant_from_output, messages_to_items

__all__ = [
    "DEFAULT_INCLUDE",
    "chunk_from_event",
    "create_params",
    "failure_of",
    "response_from_response",
    "tool_to_responses",
]

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
