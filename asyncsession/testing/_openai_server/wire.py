"""The JSON and SSE the scripted server sends, in the shapes of the ``openai`` SDK's types.

Chat Completions: a ``chat.completion`` object, or ``chat.completion.chunk`` events ending in
``data: [DONE]`` (a usage chunk first when ``stream_options.include_usage`` asks for one).

Responses: a ``response`` whose output is a ``compaction`` item (when ``context_management``
compacts the input), a ``reasoning`` item (when scripted), the scripted items as given, a
``message`` with one ``output_text`` part (when it has text) and one ``function_call`` item per
call, in that order. Streamed, each item is opened (``response.output_item.added``), filled with
deltas and closed (``response.output_item.done``) between ``response.created`` /
``response.in_progress`` and ``response.completed`` (or ``response.failed`` /
``response.incomplete``, or an ``error`` event).

Compaction: ``POST /v1/responses/compact`` answers a ``response.compaction`` whose output is
every user message of the input, in order, and one ``compaction`` item for the rest. With
``context_management=[{"type": "compaction", "compact_threshold": N}]``, a ``/v1/responses``
request whose input is estimated at ``N`` tokens or more starts its output with a ``compaction``
item for the whole input (streamed, announced by ``response.compaction.compacting``). A
scripted ``encrypted_content`` is not encrypted: it is base64 of ``scripted-compaction:`` and the
JSON of the items it stands for, which `covered_items` reads back.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from .script import (
    DEFAULT_MODEL,
    RecordedRequest,
    ScriptedError,
    ScriptedReply,
    estimate_tokens,
    json_objects,
)

__all__ = [
    "chat_completion",
    "chat_events",
    "compacted_body",
    "covered_items",
    "error_body",
    "input_problem",
    "response_body",
    "response_events",
]

_COMPACTED = "scripted-compaction:"


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _json(value: object) -> bytes:
    return json.dumps(value, ensure_ascii=False).encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _tokens(reply: ScriptedReply, sent: object, produced: str) -> tuple[int, int]:
    """The scripted token counts, else estimates of what was sent and produced."""
    if reply.prompt_tokens is not None and reply.completion_tokens is not None:
        return reply.prompt_tokens, reply.completion_tokens
    return estimate_tokens(json.dumps(sent, ensure_ascii=False)), estimate_tokens(produced)


def _calls_text(reply: ScriptedReply) -> str:
    return "".join(call.name + call.arguments_json for call in reply.calls)


def error_body(failure: ScriptedError) -> bytes:
    detail = {
        "message": failure.message,
        "type": failure.type,
        "param": None,
        "code": failure.code,
    }
    return _json({"error": detail})


# --- Chat Completions ---------------------------------------------------------------------------


def _chat_usage(request: RecordedRequest, reply: ScriptedReply) -> dict[str, int]:
    sent = [request.messages, request.tools]
    prompt, completion = _tokens(reply, sent, (reply.content or "") + _calls_text(reply))
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def _chat_object(request: RecordedRequest, kind: str, **fields: object) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{secrets.token_hex(12)}",
        "object": kind,
        "created": int(time.time()),
        "model": request.model or DEFAULT_MODEL,
        **fields,
        "service_tier": "default",
        "system_fingerprint": "fp_scripted",
    }


def chat_completion(request: RecordedRequest, reply: ScriptedReply) -> bytes:
    message: dict[str, Any] = {
        "role": "assistant",
        "content": reply.content,
        "refusal": None,
        "annotations": [],
    }
    if reply.calls:
        message["tool_calls"] = [
            {
                "id": call.id,
                "type": "function",
                "function": {"name": call.name, "arguments": call.arguments_json},
            }
            for call in reply.calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": reply.effective_finish_reason,
    }
    body = _chat_object(request, "chat.completion", choices=[choice])
    return _json({**body, "usage": _chat_usage(request, reply)})


def chat_events(request: RecordedRequest, reply: ScriptedReply) -> list[bytes]:
    """``data: <chunk>`` events, ``data: [DONE]`` last; "usage": null on every chunk only when
    usage was asked for, as the API does."""
    opening = _chat_object(request, "chat.completion.chunk")

    def chunk(choices: list[dict[str, Any]], usage: dict[str, int] | None = None) -> bytes:
        body = {**opening, "choices": choices}
        if request.include_usage:
            body["usage"] = usage
        return b"data: " + _json(body) + b"\n\n"

    def delta(value: dict[str, Any], finish_reason: str | None = None) -> bytes:
        return chunk(
            [{"index": 0, "delta": value, "logprobs": None, "finish_reason": finish_reason}]
        )

    # Like the API: the first delta has the role, and an empty content only for text replies.
    first: dict[str, Any] = {"role": "assistant"}
    if reply.content is not None:
        first["content"] = ""
    events = [delta(first)]
    events += [
        delta({"content": piece}) for piece in _pieces(reply.content or "", reply.chunk_size)
    ]
    for index, call in enumerate(reply.calls):
        function = {"name": call.name, "arguments": ""}
        opened = {"index": index, "id": call.id, "type": "function", "function": function}
        events.append(delta({"tool_calls": [opened]}))
        events += [
            delta({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
            for piece in _pieces(call.arguments_json, reply.chunk_size)
        ]
    events.append(delta({}, reply.effective_finish_reason))
    if request.include_usage:
        events.append(chunk([], _chat_usage(request, reply)))
    events.append(b"data: [DONE]\n\n")
    return events


# --- Responses ----------------------------------------------------------------------------------


def _responses_usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


def _compaction_item(covered: Sequence[dict[str, Any]]) -> dict[str, Any]:
    payload = _COMPACTED + json.dumps(list(covered), ensure_ascii=False, separators=(",", ":"))
    return {
        "type": "compaction",
        "id": _id("cmp"),
        "encrypted_content": base64.b64encode(payload.encode()).decode(),
        "created_by": "scripted-server",
    }


def covered_items(item: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The items a scripted ``compaction`` item stands for; ``None`` if it is not one of ours."""
    try:
        text = base64.b64decode(str(item.get("encrypted_content", "")), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not text.startswith(_COMPACTED):
        return None
    covered: object = json.loads(text.removeprefix(_COMPACTED))
    return covered if isinstance(covered, list) else None  # pyright: ignore[reportUnknownVariableType]


def _compacts(request: RecordedRequest) -> bool:
    """Whether ``context_management`` asks for a compaction this input reaches."""
    for entry in json_objects(request.body.get("context_management")):
        if entry.get("type") == "compaction":
            threshold: object = entry.get("compact_threshold")
            size = estimate_tokens(json.dumps(request.input, ensure_ascii=False))
            return size >= (threshold if isinstance(threshold, int) else 0)
    return False


def _output_items(request: RecordedRequest, reply: ScriptedReply) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    if _compacts(request):
        items.append(_compaction_item(request.input))
    if reply.reasoning is not None:
        secret = base64.b64encode(f"scripted:{reply.reasoning}".encode()).decode()
        summary = [{"type": "summary_text", "text": reply.reasoning}]
        items.append(
            {"type": "reasoning", "id": _id("rs"), "summary": summary, "encrypted_content": secret}
        )
    items += [dict(item) for item in reply.items]
    if reply.content is not None:
        text: dict[str, Any] = {
            "type": "output_text",
            "text": reply.content,
            "annotations": [],
            "logprobs": [],
        }
        items.append(
            {
                "type": "message",
                "id": _id("msg"),
                "role": "assistant",
                "status": "completed",
                "content": [text],
            }
        )
    items += [
        {
            "type": "function_call",
            "id": _id("fc"),
            "call_id": call.id,
            "name": call.name,
            "arguments": call.arguments_json,
            "status": "completed",
        }
        for call in reply.calls
    ]
    return items


class _Response:
    """One scripted response: its id, time and items fixed once, its status as asked."""

    def __init__(self, request: RecordedRequest, reply: ScriptedReply) -> None:
        self.request, self.reply = request, reply
        self.id, self.created_at = _id("resp"), int(time.time())
        self.items = _output_items(request, reply)

    def body(self, status: str, *, output: bool = True) -> dict[str, Any]:
        request, reply = self.request, self.reply
        body: dict[str, Any] = {
            "id": self.id,
            "object": "response",
            "created_at": self.created_at,
            "model": request.model or DEFAULT_MODEL,
            "status": status,
            "output": self.items if output else [],
            "parallel_tool_calls": request.body.get("parallel_tool_calls", True),
            "tool_choice": request.body.get("tool_choice", "auto"),
            "tools": request.tools,
            "store": request.body.get("store", True),
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }
        if status == "failed":
            body["error"] = {"code": "server_error", "message": "The scripted response failed."}
        elif status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        if status in ("completed", "incomplete"):
            sent = [request.input, request.tools, request.body.get("instructions")]
            produced = (reply.content or "") + (reply.reasoning or "") + _calls_text(reply)
            body["usage"] = _responses_usage(*_tokens(reply, sent, produced))
        return body


def response_body(request: RecordedRequest, reply: ScriptedReply) -> bytes:
    return _json(_Response(request, reply).body(reply.outcome))


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` announces it: no content yet."""
    match item["type"]:
        case "reasoning":
            return {"type": "reasoning", "id": item["id"], "summary": []}
        case "message":
            return {**item, "status": "in_progress", "content": []}
        case "function_call":
            return {**item, "status": "in_progress", "arguments": ""}
        case "compaction":
            return {**item, "encrypted_content": ""}
        case _:
            return {**item, "status": "in_progress"}


def _event(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": f"response.{kind}", **fields}


def _deltas(kind: str, text: str, size: int, **at: Any) -> list[dict[str, Any]]:
    return [_event(f"{kind}.delta", **at, delta=piece) for piece in _pieces(text, size)]


def _item_events(index: int, item: dict[str, Any], size: int) -> list[dict[str, Any]]:
    where = {"item_id": item["id"], "output_index": index}
    events = [_event("output_item.added", output_index=index, item=_opened(item))]
    if item["type"] == "reasoning":
        text = item["summary"][0]["text"]
        at = {**where, "summary_index": 0}
        events += [
            _event("reasoning_summary_part.added", **at, part={"type": "summary_text", "text": ""}),
            *_deltas("reasoning_summary_text", text, size, **at),
            _event("reasoning_summary_text.done", **at, text=text),
            _event(
                "reasoning_summary_part.done", **at, part={"type": "summary_text", "text": text}
            ),
        ]
    elif item["type"] == "message":
        part = item["content"][0]
        at = {**where, "content_index": 0}
        empty: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        events += [
            _event("content_part.added", **at, part=empty),
            *_deltas("output_text", part["text"], size, **at, logprobs=[]),
            _event("output_text.done", **at, text=part["text"], logprobs=[]),
            _event("content_part.done", **at, part=part),
        ]
    elif item["type"] == "compaction":
        events.append(_event("compaction.compacting", **where))
    elif item["type"] == "function_call":
        arguments = item["arguments"]
        events += [
            *_deltas("function_call_arguments", arguments, size, **where),
            _event("function_call_arguments.done", **where, name=item["name"], arguments=arguments),
        ]
    events.append(_event("output_item.done", output_index=index, item=item))
    return events


def response_events(request: RecordedRequest, reply: ScriptedReply) -> list[bytes]:
    """``event: <type>`` / ``data: <json>`` events, numbered by ``sequence_number``."""
    response = _Response(request, reply)
    started = response.body("in_progress", output=False)
    events = [_event("created", response=started), _event("in_progress", response=started)]
    for index, item in enumerate(response.items):
        events += _item_events(index, item, reply.chunk_size)
    if reply.outcome == "error":
        failure = {"code": "server_error", "message": "The scripted stream failed.", "param": None}
        events.append({"type": "error", **failure})
    else:
        events.append(_event(reply.outcome, response=response.body(reply.outcome)))
    return [
        f"event: {event['type']}\ndata: ".encode()
        + _json({**event, "sequence_number": number})
        + b"\n\n"
        for number, event in enumerate(events)
    ]


def _is_user_message(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _input_content(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return json_objects(content)


def compacted_body(request: RecordedRequest) -> bytes:
    """The ``CompactedResponse`` of ``responses.compact``."""
    items = request.input
    users = [
        {
            "type": "message",
            "id": str(item.get("id") or _id("msg")),
            "role": "user",
            "status": "completed",
            "content": _input_content(item.get("content")),
        }
        for item in items
        if _is_user_message(item)
    ]
    compaction = _compaction_item([item for item in items if not _is_user_message(item)])
    given = estimate_tokens(json.dumps([items, request.body.get("instructions")]))
    produced = estimate_tokens(compaction["encrypted_content"])
    body = {
        "id": _id("resp"),
        "object": "response.compaction",
        "created_at": int(time.time()),
        "model": request.model or DEFAULT_MODEL,
        "output": [*users, compaction],
        "usage": _responses_usage(given, produced),
    }
    return _json(body)


def _is_input(item: dict[str, Any]) -> bool:
    """A user, system or developer message, or a tool's output: not model output."""
    kind = str(item.get("type", ""))
    return item.get("role") in ("user", "system", "developer") or kind.endswith("_output")


def input_problem(request: RecordedRequest) -> str | None:
    """What the real API would reject in the input items, and a client gets wrong most
    easily: a ``function_call_output`` without its call, a reasoning item without the item it
    preceded, and, with ``store: false``, a reasoning item without ``encrypted_content``."""
    items = request.input
    store = request.body.get("store", True) is not False
    calls: set[str] = set()
    for index, item in enumerate(items):
        kind = item.get("type")
        if kind == "function_call":
            calls.add(str(item.get("call_id")))
        elif kind == "function_call_output" and str(item.get("call_id")) not in calls:
            return (
                f"No tool call found for function call output with call_id {item.get('call_id')}."
            )
        elif kind == "reasoning":
            if not store and not item.get("encrypted_content"):
                return f"Item with id '{item.get('id')}' not found (store is false)."
            following = items[index + 1] if index + 1 < len(items) else {}
            if not following or _is_input(following):
                return (
                    f"Item '{item.get('id')}' of type 'reasoning' was provided without its "
                    "required following item."
                )
    return None
