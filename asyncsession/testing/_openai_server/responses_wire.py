"""Responses API wire shapes: the ``response`` JSON, its SSE events, and input checks.

The shapes follow the ``openai`` SDK's types (``Response``, ``ResponseStreamEvent``): a reply is
a ``compaction`` item (when ``context_management`` compacts the input, see
``compaction_wire``), a ``reasoning`` item (when scripted), the scripted output items as given
(hosted tools' items), a ``message`` item with one ``output_text`` part (when it has text) and one
``function_call`` item per call, in that order. Streamed, each item is
opened (``response.output_item.added``), filled with deltas and closed
(``response.output_item.done``) between ``response.created`` / ``response.in_progress`` and the
final ``response.completed`` (or ``response.failed`` / ``response.incomplete``, or an ``error``
event).

`input_problem` checks what the real API rejects and a client gets wrong most easily:
a ``function_call_output`` without its call, a reasoning item without the item it preceded,
and, with ``store: false``, a reasoning item without ``encrypted_content``.
"""

from __future__ import annotations

import base64
import json
import secrets
import time
from typing import Any

from .chat_wire import split_text
from .compaction_wire import compaction_item, compacts
from .script import DEFAULT_MODEL, RecordedRequest, ScriptedReply, estimate_tokens

__all__ = ["input_problem", "response_body", "response_events"]


def _id(prefix: str) -> str:
    return f"{prefix}_{secrets.token_hex(12)}"


def _usage(request: RecordedRequest, reply: ScriptedReply) -> dict[str, Any]:
    usage = reply.usage
    if usage is not None:
        prompt, completion = usage.prompt_tokens, usage.completion_tokens
    else:
        sent = [request.input, request.tools, request.body.get("instructions")]
        prompt = estimate_tokens(json.dumps(sent, ensure_ascii=False))
        produced = (reply.content or "") + (reply.reasoning or "")
        produced += "".join(call.name + call.arguments_json for call in reply.calls)
        completion = estimate_tokens(produced)
    return {
        "input_tokens": prompt,
        "input_tokens_details": {"cached_tokens": 0},
        "output_tokens": completion,
        "output_tokens_details": {"reasoning_tokens": 0},
        "total_tokens": prompt + completion,
    }


class _Reply:
    """The items of one scripted reply, with their ids fixed once."""

    def __init__(self, request: RecordedRequest, reply: ScriptedReply) -> None:
        self.request = request
        self.reply = reply
        self.response_id = _id("resp")
        self.created_at = int(time.time())
        self.model = request.model or DEFAULT_MODEL
        self.items: list[dict[str, Any]] = []
        if compacts(request):
            self.items.append(compaction_item(request.input))
        if reply.reasoning is not None:
            secret = base64.b64encode(f"scripted:{reply.reasoning}".encode()).decode()
            self.items.append(
                {
                    "type": "reasoning",
                    "id": _id("rs"),
                    "summary": [{"type": "summary_text", "text": reply.reasoning}],
                    "encrypted_content": secret,
                }
            )
        self.items += [dict(item) for item in reply.items]
        if reply.content is not None:
            self.items.append(
                {
                    "type": "message",
                    "id": _id("msg"),
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "text": reply.content,
                            "annotations": [],
                            "logprobs": [],
                        }
                    ],
                }
            )
        for call in reply.calls:
            self.items.append(
                {
                    "type": "function_call",
                    "id": _id("fc"),
                    "call_id": call.id,
                    "name": call.name,
                    "arguments": call.arguments_json,
                    "status": "completed",
                }
            )

    def response(self, status: str, *, output: bool) -> dict[str, Any]:
        body: dict[str, Any] = {
            "id": self.response_id,
            "object": "response",
            "created_at": self.created_at,
            "model": self.model,
            "status": status,
            "output": self.items if output else [],
            "parallel_tool_calls": self.request.body.get("parallel_tool_calls", True),
            "tool_choice": self.request.body.get("tool_choice", "auto"),
            "tools": self.request.tools,
            "store": self.request.body.get("store", True),
            "error": None,
            "incomplete_details": None,
            "usage": None,
        }
        if status == "failed":
            body["error"] = {"code": "server_error", "message": "The scripted response failed."}
        elif status == "incomplete":
            body["incomplete_details"] = {"reason": "max_output_tokens"}
        if status in ("completed", "incomplete"):
            body["usage"] = _usage(self.request, self.reply)
        return body


def response_body(request: RecordedRequest, reply: ScriptedReply) -> bytes:
    """The JSON ``response`` object of a non-streamed reply."""
    scripted = _Reply(request, reply)
    return json.dumps(scripted.response(reply.outcome, output=True), ensure_ascii=False).encode()


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An item as ``response.output_item.added`` announces it: no content yet."""
    if item["type"] == "reasoning":
        return {"type": "reasoning", "id": item["id"], "summary": []}
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    if item["type"] == "compaction":
        return {**item, "encrypted_content": ""}
    return {**item, "status": "in_progress"}


def _item_events(index: int, item: dict[str, Any], size: int) -> list[dict[str, Any]]:
    item_id = item["id"]
    where = {"item_id": item_id, "output_index": index}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": index, "item": _opened(item)}
    ]
    if item["type"] == "reasoning":
        text = item["summary"][0]["text"]
        part = {**where, "summary_index": 0}
        events.append(
            {
                "type": "response.reasoning_summary_part.added",
                **part,
                "part": {"type": "summary_text", "text": ""},
            }
        )
        events += [
            {"type": "response.reasoning_summary_text.delta", **part, "delta": piece}
            for piece in split_text(text, size)
        ]
        events.append({"type": "response.reasoning_summary_text.done", **part, "text": text})
        events.append(
            {
                "type": "response.reasoning_summary_part.done",
                **part,
                "part": {"type": "summary_text", "text": text},
            }
        )
    elif item["type"] == "message":
        full = item["content"][0]
        part = {**where, "content_index": 0}
        empty: dict[str, Any] = {"type": "output_text", "text": "", "annotations": []}
        events.append({"type": "response.content_part.added", **part, "part": empty})
        events += [
            {"type": "response.output_text.delta", **part, "delta": piece, "logprobs": []}
            for piece in split_text(full["text"], size)
        ]
        events.append(
            {"type": "response.output_text.done", **part, "text": full["text"], "logprobs": []}
        )
        events.append({"type": "response.content_part.done", **part, "part": full})
    elif item["type"] == "compaction":
        events.append({"type": "response.compaction.compacting", **where})
    elif item["type"] == "function_call":
        events += [
            {"type": "response.function_call_arguments.delta", **where, "delta": piece}
            for piece in split_text(item["arguments"], size)
        ]
        events.append(
            {
                "type": "response.function_call_arguments.done",
                **where,
                "name": item["name"],
                "arguments": item["arguments"],
            }
        )
    events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    return events


def response_events(request: RecordedRequest, reply: ScriptedReply) -> list[bytes]:
    """The SSE events of a streamed reply, each ``event: <type>`` and ``data: <json>``."""
    scripted = _Reply(request, reply)
    started = scripted.response("in_progress", output=False)
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": started},
        {"type": "response.in_progress", "response": started},
    ]
    for index, item in enumerate(scripted.items):
        events += _item_events(index, item, reply.chunk_size)
    if reply.outcome == "error":
        events.append(
            {
                "type": "error",
                "code": "server_error",
                "message": "The scripted stream failed.",
                "param": None,
            }
        )
    else:
        final = scripted.response(reply.outcome, output=True)
        events.append({"type": f"response.{reply.outcome}", "response": final})
    return [
        f"event: {event['type']}\ndata: ".encode()
        + json.dumps({**event, "sequence_number": number}, ensure_ascii=False).encode()
        + b"\n\n"
        for number, event in enumerate(events)
    ]


def _is_input(item: dict[str, Any]) -> bool:
    """Whether an item is input (a user or system message, a tool output), not model output."""
    return item.get("role") in ("user", "system", "developer") or str(
        item.get("type", "")
    ).endswith("_output")


def input_problem(request: RecordedRequest) -> str | None:
    """What the real API would reject in the request's input items; ``None`` when fine."""
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
