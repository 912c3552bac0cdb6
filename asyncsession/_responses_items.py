"""Our messages <-> OpenAI Responses API items, lossless both ways (``docs/responses.md`` says
how items become messages): ``messages_to_items(items_to_messages(items)) == items`` for every
item list, ids, statuses and unknown keys included. An assistant message whose text or tool
calls no longer agree with its items (edited, or made for Chat Completions) is written from its
fields, its reasoning and unknown items first.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast

from pydantic import BaseModel, JsonValue

from ._checks import require_many, require_message
from .exceptions import UsageError
from .messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)

__all__ = ["ItemLike", "assistant_from_output", "items_to_messages", "messages_to_items"]

ItemLike = Mapping[str, Any] | BaseModel
"""A Responses API item: a dict (``ResponseInputItemParam``) or an SDK model."""

_CALL_TYPES = frozenset({"function_call", "custom_tool_call"})
_OUTPUT_TYPES = frozenset({"function_call_output", "custom_tool_call_output"})
_INPUT_ROLES = frozenset({"user", "system", "developer"})
_TEXT_TYPES = frozenset({"input_text", "output_text", "text"})


def _plain(value: Any) -> JsonValue:
    """A JSON value of plain dicts and lists (SDK params may hold tuples or other iterables)."""
    if isinstance(value, str | int | float | bool) or value is None:
        return value
    untyped: Any = value  # the checks below narrow ``value`` to containers of unknowns
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in untyped.items()}
    if isinstance(value, Iterable):
        return [_plain(v) for v in untyped]
    raise TypeError(f"a Responses item holds a {type(value).__name__}, not a JSON value")


def _as_dict(item: ItemLike, name: str = "items[]") -> dict[str, JsonValue]:
    if isinstance(item, BaseModel):
        raw: Any = item.model_dump(mode="json", exclude_unset=True, by_alias=True)
    elif isinstance(cast(object, item), Mapping):
        raw = item
    else:
        shown = f"{type(item).__name__} {item!r}"[:80]
        raise UsageError(f"{name} must be a Responses item (a dict or an SDK model), not {shown}")
    plain = _plain(raw)
    if not isinstance(plain, dict):  # pragma: no cover - a mapping is always a dict here
        raise TypeError("a Responses item must be a mapping")
    return plain


def _kind(item: Mapping[str, JsonValue]) -> str | None:
    kind = item.get("type")
    if kind is None and "role" in item:
        return "message"  # EasyInputMessageParam: the type is optional
    return kind if isinstance(kind, str) else None


def _content_text(content: JsonValue) -> tuple[str, list[dict[str, JsonValue]] | None]:
    if isinstance(content, str):
        return content, None
    parts = [p for p in content if isinstance(p, dict)] if isinstance(content, list) else []
    text = "\n".join(str(p.get("text", "")) for p in parts if p.get("type") in _TEXT_TYPES)
    return text, parts


def _input_message(item: dict[str, JsonValue]) -> Message:
    text, parts = _content_text(item.get("content", ""))
    extra = {k: v for k, v in item.items() if k not in ("role", "content")}
    role = item.get("role")
    if role == "user":
        return UserMessage(text=text, parts=parts, item_extra=extra)
    if role == "developer":
        return SystemMessage(text=text, parts=parts, role="developer", item_extra=extra)
    return SystemMessage(text=text, parts=parts, item_extra=extra)


def _tool_call(item: Mapping[str, JsonValue]) -> ToolCall:
    custom = item.get("type") == "custom_tool_call"
    return ToolCall(
        id=str(item.get("call_id", "")),
        name=str(item.get("name", "")),
        arguments=str(item.get("input" if custom else "arguments", "")),
        type="custom" if custom else "function",
    )


def _reply_view(
    items: Sequence[Mapping[str, JsonValue]],
) -> tuple[str | None, tuple[ToolCall, ...], str | None]:
    """The text, tool calls and refusal that the model's items say."""
    texts: list[str] = []
    refusals: list[str] = []
    has_message = False
    calls: list[ToolCall] = []
    for item in items:
        kind = _kind(item)
        if kind == "message" and item.get("role") == "assistant":
            has_message = True
            text, parts = _content_text(item.get("content", ""))
            if parts is None or any(p.get("type") in _TEXT_TYPES for p in parts):
                texts.append(text)
            refusals.extend(str(p.get("refusal", "")) for p in parts or () if "refusal" in p)
        elif kind in _CALL_TYPES:
            calls.append(_tool_call(item))
    reply = "\n".join(texts) if has_message and texts else None
    return reply, tuple(calls), "\n".join(refusals) if refusals else None


def assistant_from_output(items: Iterable[ItemLike]) -> AssistantMessage:
    """One assistant message made of a response's output items (all of them, in order)."""
    kept = tuple(_as_dict(item, f"items[{i}]") for i, item in enumerate(items))
    text, calls, refusal = _reply_view(kept)
    extra: dict[str, JsonValue] = {"refusal": refusal} if refusal is not None else {}
    return AssistantMessage(text=text, tool_calls=calls, items=kept, extra=extra)


def _tool_response(item: dict[str, JsonValue], names: Mapping[str, str]) -> ToolResponse:
    call_id = str(item.get("call_id", ""))
    data, parts = _content_text(item.get("output", ""))
    extra = {k: v for k, v in item.items() if k not in ("call_id", "output")}
    name = item.get("name")
    return ToolResponse(
        id=call_id,
        name=name if isinstance(name, str) else names.get(call_id, ""),
        data=data,
        parts=parts,
        item_extra=extra,
    )


def items_to_messages(items: Iterable[ItemLike]) -> list[Message]:
    """Convert Responses API items (input or output) into messages; see the module docs.

    Raises:
        UsageError: ``items`` is not a list of Responses items.
    """
    require_many(items, "items", "a list of Responses items")
    result: list[Message] = []
    produced: list[dict[str, JsonValue]] = []
    names: dict[str, str] = {}

    def flush() -> None:
        if produced:
            result.append(assistant_from_output(produced))
            produced.clear()

    for index, raw in enumerate(items):
        item = _as_dict(raw, f"items[{index}]")
        kind = _kind(item)
        if kind == "message" and item.get("role") in _INPUT_ROLES:
            flush()
            result.append(_input_message(item))
        elif kind in _OUTPUT_TYPES:
            flush()
            response = _tool_response(item, names)
            previous = result[-1] if result else None
            if isinstance(previous, ToolResponseMessage):
                result[-1] = previous.model_copy(
                    update={"responses": (*previous.responses, response)}
                )
            else:
                result.append(ToolResponseMessage(responses=(response,)))
        else:
            if kind in _CALL_TYPES:
                names[str(item.get("call_id", ""))] = str(item.get("name", ""))
            produced.append(item)
    flush()
    return result


def _part_to_responses(part: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    """A content part as the Responses API takes it: Chat Completions parts translated."""
    kind = part.get("type")
    if kind == "text":
        return {"type": "input_text", "text": part.get("text", "")}
    image = part.get("image_url")
    if kind == "image_url" and isinstance(image, dict):
        return {
            "type": "input_image",
            "image_url": image.get("url"),
            "detail": image.get("detail", "auto"),
        }
    file = part.get("file")
    if kind == "file" and isinstance(file, dict):
        return {"type": "input_file", **file}
    return dict(part)


def _content_to_responses(text: str, parts: Sequence[Mapping[str, JsonValue]] | None) -> JsonValue:
    if parts is None:
        return text
    return [_part_to_responses(part) for part in parts]


def _agrees(message: AssistantMessage) -> bool:
    text, calls, _ = _reply_view(message.items)
    same_calls = [(c.id, c.name, c.arguments, c.type) for c in calls] == [
        (c.id, c.name, c.arguments, c.type) for c in message.tool_calls
    ]
    return same_calls and (text or None) == (message.text or None)


def _call_item(call: ToolCall) -> dict[str, JsonValue]:
    if call.type == "custom":
        return {
            "type": "custom_tool_call",
            "call_id": call.id,
            "name": call.name,
            "input": call.arguments,
        }
    return {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }


def _assistant_items(message: AssistantMessage) -> list[dict[str, JsonValue]]:
    if message.items and _agrees(message):
        return [dict(item) for item in message.items]
    kept = [
        dict(item)
        for item in message.items
        if not (_kind(item) == "message" or _kind(item) in _CALL_TYPES)
    ]
    if message.text:
        kept.append({"type": "message", "role": "assistant", "content": message.text})
    kept.extend(_call_item(call) for call in message.tool_calls)
    return kept


def _message_items(message: Message) -> list[dict[str, JsonValue]]:
    if isinstance(message, UserMessage):
        content = _content_to_responses(message.text, message.parts)
        return [{**message.item_extra, "role": "user", "content": content}]
    if isinstance(message, SystemMessage):
        content = _content_to_responses(message.text, message.parts)
        return [{**message.item_extra, "role": message.role, "content": content}]
    if isinstance(message, AssistantMessage):
        return _assistant_items(message)
    return [
        {
            "type": "function_call_output",
            **response.item_extra,
            "call_id": response.id,
            "output": _content_to_responses(response.data, response.parts),
        }
        for response in message.responses
    ]


def messages_to_items(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Convert messages into the input items of a ``responses.create`` call.

    Raises:
        UsageError: ``messages`` is not a list of messages; the error names the index of the
            first item that is not one.
    """
    require_many(messages, "messages", "a list of messages")
    checked = [require_message(m, f"messages[{i}]") for i, m in enumerate(messages)]
    return [item for message in checked for item in _message_items(message)]
