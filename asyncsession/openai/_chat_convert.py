"""Our chat values <-> OpenAI Chat Completions shapes, at the edge only."""

from __future__ import annotations

from typing import Any

from openai.types.chat import ChatCompletion, ChatCompletionChunk, ChatCompletionMessage
from openai.types.completion_usage import CompletionUsage

from ..chat import ChatChunk, ChatRequest, ChatResponse, ToolCallDelta, Usage
from ..messages import AssistantMessage, ToolCall, messages_to_openai
from ..tools import Tool

__all__ = [
    "chunk_from_openai",
    "create_params",
    "response_from_completion",
    "tool_to_openai",
]


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
    params: dict[str, Any] = {
        "model": options.model or default_model,
        "messages": messages_to_openai(request.messages),
    }
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
