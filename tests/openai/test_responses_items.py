"""The Responses API item conversion: lossless both ways, reasoning kept with its calls."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from asyncsession._responses_items import items_to_messages, messages_to_items
from asyncsession.events import SessionEvent
from asyncsession.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    _message_from_openai,
    messages_to_openai,
)

REASONING: dict[str, Any] = {
    "type": "reasoning",
    "id": "rs_1",
    "summary": [{"type": "summary_text", "text": "think"}],
    "encrypted_content": "ENC==",
    "status": "completed",
}

TOOL_TURN: list[dict[str, Any]] = [
    {"role": "user", "content": "weather?"},
    REASONING,
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city":"Oslo"}',
        "status": "completed",
    },
    {"type": "function_call", "id": "fc_2", "call_id": "call_2", "name": "time", "arguments": "{}"},
    {"type": "function_call_output", "call_id": "call_1", "output": "cold", "id": "fco_1"},
    {
        "type": "function_call_output",
        "call_id": "call_2",
        "output": [{"type": "input_text", "text": "noon"}],
    },
    {"type": "reasoning", "id": "rs_2", "summary": []},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Cold at noon.", "annotations": [], "logprobs": []}
        ],
    },
]

OTHER_ITEMS: list[dict[str, Any]] = [
    {
        "type": "message",
        "role": "user",
        "id": "in_1",
        "content": [
            {"type": "input_text", "text": "look"},
            {"type": "input_image", "image_url": "https://example.org/a.png", "detail": "low"},
            {"type": "input_file", "file_id": "file_1"},
        ],
        "unknown_key": {"nested": [1, 2]},
    },
    {"type": "message", "role": "developer", "content": "be brief"},
    {"type": "message", "role": "system", "content": [{"type": "input_text", "text": "sys"}]},
    {
        "type": "message",
        "id": "msg_r",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "refusal", "refusal": "no"}],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"type": "item_reference", "id": "ref_1"},
    {"type": "custom_tool_call", "call_id": "c_1", "name": "sql", "input": "select 1"},
    {"type": "custom_tool_call_output", "call_id": "c_1", "output": "1"},
]


@pytest.mark.parametrize(
    "items",
    [
        pytest.param(TOOL_TURN, id="tool-turn"),
        pytest.param(OTHER_ITEMS, id="parts-roles-unknown-types"),
        pytest.param([{"role": "user", "content": "hi"}], id="easy-message"),
    ],
)
def test_items_round_trip(items: list[dict[str, Any]]) -> None:
    """Items converted to messages and back are equal to the items given."""
    original = copy.deepcopy(items)
    assert messages_to_items(items_to_messages(items)) == original
    assert items == original  # the input is not changed


def test_items_survive_storage() -> None:
    """Messages made of items keep every item through the stored JSON of an event."""
    messages = items_to_messages(TOOL_TURN + OTHER_ITEMS)
    stored = [
        SessionEvent.model_validate_json(SessionEvent(session_id="s", message=m).model_dump_json())
        for m in messages
    ]
    assert messages_to_items([e.message for e in stored if e.message]) == TOOL_TURN + OTHER_ITEMS


def test_tool_turn_is_grouped_with_reasoning() -> None:
    """Reasoning and parallel calls form one assistant message; outputs one tool message."""
    user, calls, results, reply = items_to_messages(TOOL_TURN)
    assert isinstance(user, UserMessage)
    assert user.text == "weather?"
    assert isinstance(calls, AssistantMessage)
    assert calls.text is None
    assert [(c.id, c.name) for c in calls.tool_calls] == [("call_1", "weather"), ("call_2", "time")]
    assert calls.reasoning == (REASONING,)
    assert calls.items[0] == REASONING
    assert isinstance(results, ToolResponseMessage)
    assert [(r.id, r.name, r.data) for r in results.responses] == [
        ("call_1", "weather", "cold"),
        ("call_2", "time", "noon"),
    ]
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Cold at noon."
    assert [i["id"] for i in reply.reasoning] == ["rs_2"]


def test_chat_completions_view_of_items() -> None:
    """Messages made of items convert to Chat Completions without Responses-only keys."""
    assert messages_to_openai(items_to_messages(TOOL_TURN)) == [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city":"Oslo"}'},
                },
                {
                    "id": "call_2",
                    "type": "function",
                    "function": {"name": "time", "arguments": "{}"},
                },
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "cold"},
        {"role": "tool", "tool_call_id": "call_2", "content": [{"type": "text", "text": "noon"}]},
        {"role": "assistant", "content": "Cold at noon."},
    ]


def test_input_parts_translate_to_chat_completions() -> None:
    """Responses content parts become Chat Completions parts; the refusal becomes its key."""
    user, _, _, refusal = items_to_messages(OTHER_ITEMS)[:4]
    assert user.to_openai() == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {
                    "type": "image_url",
                    "image_url": {"url": "https://example.org/a.png", "detail": "low"},
                },
                {"type": "file", "file": {"file_id": "file_1"}},
            ],
        }
    ]
    assert isinstance(refusal, AssistantMessage)
    assert refusal.extra == {"refusal": "no"}


def test_chat_completions_messages_to_items() -> None:
    """Messages of Chat Completions (or made by hand) become valid Responses input items."""
    messages = [
        SystemMessage(text="rules", role="developer"),
        _message_from_openai(
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "see"},
                    {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
                    {"type": "file", "file": {"file_id": "f", "filename": "a.pdf"}},
                ],
            }
        ),
        AssistantMessage(text="ok", tool_calls=[ToolCall(id="c1", name="f", arguments="{}")]),
        ToolResponseMessage(responses=[ToolResponse(id="c1", name="f", data="out")]),
    ]
    assert messages_to_items(messages) == [
        {"role": "developer", "content": "rules"},
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "see"},
                {"type": "input_image", "image_url": "data:image/png;base64,AA", "detail": "auto"},
                {"type": "input_file", "file_id": "f", "filename": "a.pdf"},
            ],
        },
        {"type": "message", "role": "assistant", "content": "ok"},
        {"type": "function_call", "call_id": "c1", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "out"},
    ]


def test_edited_reply_keeps_reasoning_first() -> None:
    """A reply whose fields no longer match its items is written from the fields, reasoning kept."""
    _, calls, _, _ = items_to_messages(TOOL_TURN)
    assert isinstance(calls, AssistantMessage)
    edited = calls.model_copy(update={"tool_calls": calls.tool_calls[:1]})
    assert messages_to_items([edited]) == [
        REASONING,
        {
            "type": "function_call",
            "call_id": "call_1",
            "name": "weather",
            "arguments": '{"city":"Oslo"}',
        },
    ]


def test_chat_completions_storage_is_unchanged() -> None:
    """Messages without Responses data store the same JSON as before (no empty new keys)."""
    body = SessionEvent(session_id="s", message=UserMessage(text="hi")).model_dump(mode="json")
    assert body["message"] == {"extra": {}, "kind": "user", "text": "hi", "parts": None}
    reply = AssistantMessage(text="x").model_dump(mode="json")
    assert "items" not in reply
    assert "item_extra" not in reply
