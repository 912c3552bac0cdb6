"""Chat Completions wire shapes: `chat.completion` JSON, `chat.completion.chunk` SSE, errors."""

from __future__ import annotations

import json
import secrets
import time
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from .script import (
    DEFAULT_MODEL,
    FinishReason,
    RecordedRequest,
    ScriptedError,
    ScriptedReply,
    ScriptedUsage,
    estimate_tokens,
)

__all__ = ["chat_completion", "chat_stream_events", "error_body", "split_text"]


class _Wire(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class _Sparse(_Wire):
    """A shape whose unset (``None``) fields are left out, as in the API's stream deltas."""

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class _Usage(_Wire):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _Function(_Wire):
    name: str
    arguments: str


class _ToolCall(_Wire):
    id: str
    type: Literal["function"] = "function"
    function: _Function


class _Message(_Wire):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    annotations: list[Any] = []
    tool_calls: list[_ToolCall] | None = None

    @model_serializer(mode="wrap")
    def _omit_empty_tool_calls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("tool_calls") is None:
            data.pop("tool_calls", None)
        return data


class _Choice(_Wire):
    index: int = 0
    message: _Message
    logprobs: None = None
    finish_reason: FinishReason


class _Completion(_Wire):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[_Choice]
    usage: _Usage
    service_tier: str = "default"
    system_fingerprint: str = "fp_scripted"


class _DeltaFunction(_Sparse):
    name: str | None = None
    arguments: str | None = None


class _DeltaToolCall(_Sparse):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: _DeltaFunction


class _Delta(_Sparse):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[_DeltaToolCall] | None = None


class _ChunkChoice(_Wire):
    index: int = 0
    delta: _Delta
    logprobs: None = None
    finish_reason: FinishReason | None = None


class _Chunk(_Wire):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[_ChunkChoice]
    service_tier: str = "default"
    system_fingerprint: str = "fp_scripted"
    usage: _Usage | None = None


class _ErrorDetail(_Wire):
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorBody(_Wire):
    error: _ErrorDetail


def error_body(failure: ScriptedError) -> bytes:
    detail = _ErrorDetail(
        message=failure.message, type=failure.type, param=failure.param, code=failure.code
    )
    return _ErrorBody(error=detail).model_dump_json().encode()


def split_text(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _usage_for(request: RecordedRequest, reply: ScriptedReply) -> _Usage:
    usage = reply.usage
    if usage is None:
        prompt = json.dumps([request.messages, request.tools], ensure_ascii=False)
        completion = (reply.content or "") + "".join(
            call.name + call.arguments_json for call in reply.calls
        )
        usage = ScriptedUsage(
            prompt_tokens=estimate_tokens(prompt),
            completion_tokens=estimate_tokens(completion),
        )
    return _Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def chat_completion(request: RecordedRequest, reply: ScriptedReply) -> _Completion:
    tool_calls = [
        _ToolCall(id=call.id, function=_Function(name=call.name, arguments=call.arguments_json))
        for call in reply.calls
    ]
    message = _Message(content=reply.content, tool_calls=tool_calls or None)
    return _Completion(
        id=f"chatcmpl-{secrets.token_hex(12)}",
        created=int(time.time()),
        model=request.model or DEFAULT_MODEL,
        choices=[_Choice(message=message, finish_reason=reply.effective_finish_reason)],
        usage=_usage_for(request, reply),
    )


def chat_stream_events(request: RecordedRequest, reply: ScriptedReply) -> list[bytes]:
    """The SSE events of a streamed reply, each one ``data: ...`` line pair, ``[DONE]`` last."""
    completion_id = f"chatcmpl-{secrets.token_hex(12)}"
    created = int(time.time())
    model = request.model or DEFAULT_MODEL
    include_usage = request.include_usage

    def chunk(choices: list[_ChunkChoice], usage: _Usage | None = None) -> bytes:
        payload = _Chunk(
            id=completion_id, created=created, model=model, choices=choices, usage=usage
        ).model_dump(mode="json")
        if not include_usage:
            # The API only sends "usage": null on every chunk when usage was asked for.
            payload.pop("usage")
        return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"

    def delta(value: _Delta, finish_reason: FinishReason | None = None) -> bytes:
        return chunk([_ChunkChoice(delta=value, finish_reason=finish_reason)])

    # Like the API: the first delta has the role, and an empty content only for text replies.
    events = [delta(_Delta(role="assistant", content="" if reply.content is not None else None))]
    events += [
        delta(_Delta(content=piece)) for piece in split_text(reply.content or "", reply.chunk_size)
    ]
    for index, call in enumerate(reply.calls):
        opening = _DeltaToolCall(
            index=index,
            id=call.id,
            type="function",
            function=_DeltaFunction(name=call.name, arguments=""),
        )
        events.append(delta(_Delta(tool_calls=[opening])))
        events += [
            delta(
                _Delta(
                    tool_calls=[
                        _DeltaToolCall(index=index, function=_DeltaFunction(arguments=piece))
                    ]
                )
            )
            for piece in split_text(call.arguments_json, reply.chunk_size)
        ]
    events.append(delta(_Delta(), reply.effective_finish_reason))
    if include_usage:
        events.append(chunk([], _usage_for(request, reply)))
    events.append(b"data: [DONE]\n\n")
    return events
