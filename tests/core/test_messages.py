"""Messages and their lossless round trip to OpenAI Chat Completions dicts."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from asyncsession import (
    AssistantMessage,
    SessionEvent,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UsageError,
    UserMessage,
)
from asyncsession.messages import _message_from_openai, messages_from_openai

ROUND_TRIPS: list[Any] = [
    pytest.param({"role": "user", "content": "hi"}, id="user-text"),
    pytest.param({"role": "user", "content": "hi", "name": "alice"}, id="user-name"),
    pytest.param(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "https://x/y.png", "detail": "low"}},
                {"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}},
                {"type": "file", "file": {"file_id": "file-1"}},
                {"type": "something_new", "payload": {"a": [1, 2]}},
            ],
        },
        id="user-multipart",
    ),
    pytest.param({"role": "system", "content": "be brief"}, id="system"),
    pytest.param({"role": "developer", "content": "be brief"}, id="developer"),
    pytest.param({"role": "system", "content": [{"type": "text", "text": "a"}]}, id="system-parts"),
    pytest.param({"role": "assistant", "content": "hello"}, id="assistant-text"),
    pytest.param({"role": "assistant", "content": None}, id="assistant-none"),
    pytest.param(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x":1}'}},
                {"id": "c2", "type": "custom", "custom": {"name": "g", "input": "free text"}},
            ],
        },
        id="assistant-tool-calls",
    ),
    pytest.param(
        {"role": "assistant", "content": "x", "refusal": None, "audio": {"id": "a1"}},
        id="assistant-extra",
    ),
    pytest.param(
        {"role": "assistant", "content": [{"type": "refusal", "refusal": "no"}]},
        id="assistant-parts",
    ),
    pytest.param(
        {"role": "assistant", "content": "x", "tool_calls": []}, id="assistant-empty-calls"
    ),
    pytest.param({"role": "tool", "tool_call_id": "c1", "content": "42"}, id="tool"),
    pytest.param(
        {"role": "tool", "tool_call_id": "c1", "content": [{"type": "text", "text": "42"}]},
        id="tool-parts",
    ),
]


@pytest.mark.parametrize("raw", ROUND_TRIPS)
def test_one_message_round_trips_losslessly(raw: dict[str, Any]) -> None:
    """Converting a message dict and back gives the same dict."""
    assert _message_from_openai(raw).to_openai() == [raw]


@pytest.mark.parametrize("raw", ROUND_TRIPS)
def test_a_stored_message_round_trips_through_json(raw: dict[str, Any]) -> None:
    """A message survives JSON serialisation inside an event, unknown parts included."""
    event = SessionEvent(session_id="s", message=_message_from_openai(raw))
    again = SessionEvent.model_validate_json(event.model_dump_json())
    assert again == event
    assert again.message is not None
    assert again.message.to_openai() == [raw]


def test_a_conversation_round_trips_and_groups_tool_results() -> None:
    """Consecutive tool dicts become one message with names from the calls, and convert back."""
    raw = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "weather and time?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": "{}"},
                },
                {"id": "c2", "type": "function", "function": {"name": "time", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "c2", "content": "noon"},
        {"role": "assistant", "content": "Sunny at noon."},
    ]
    messages = messages_from_openai(raw)
    assert len(messages) == 5
    tool = messages[3]
    assert isinstance(tool, ToolResponseMessage)
    assert [(r.id, r.name, r.data) for r in tool.responses] == [
        ("c1", "weather", "sunny"),
        ("c2", "time", "noon"),
    ]
    assert [d for m in messages for d in m.to_openai()] == raw


def test_multipart_text_is_searchable_and_parts_are_kept() -> None:
    """The text of multi-part content is the text parts joined; other parts are kept."""
    message = _message_from_openai(
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "one"},
                {"type": "image_url", "image_url": {"url": "u"}},
                {"type": "text", "text": "two"},
            ],
        }
    )
    assert isinstance(message, UserMessage)
    assert message.text == "one\ntwo"
    assert message.parts is not None
    assert len(message.parts) == 3


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param({"role": "robot", "content": "x"}, id="unknown-role"),
        pytest.param({"content": "x"}, id="no-role"),
        pytest.param({"role": "user", "content": 3}, id="bad-content"),
        pytest.param({"role": "user", "content": ["x"]}, id="bad-part"),
        pytest.param({"role": "assistant", "tool_calls": ["x"]}, id="bad-call"),
    ],
)
def test_bad_message_dicts_are_rejected_clearly(raw: dict[str, Any]) -> None:
    """Dicts that are not chat messages raise our UsageError."""
    with pytest.raises(UsageError):
        _message_from_openai(raw)


def test_messages_are_immutable_values() -> None:
    """Messages are frozen and compare by value."""
    message = AssistantMessage(text="x", tool_calls=[ToolCall(id="1", name="f")])
    with pytest.raises(ValidationError):
        message.text = "y"  # type: ignore[misc]
    assert message == AssistantMessage(text="x", tool_calls=(ToolCall(id="1", name="f"),))
    assert message.has_tool_calls


def test_a_tool_response_message_needs_a_response() -> None:
    """An empty tool response message is refused."""
    with pytest.raises(ValidationError):
        ToolResponseMessage(responses=())


def test_message_types_and_texts() -> None:
    """Every message knows its type; tool results have no text."""
    tool = ToolResponseMessage(responses=[ToolResponse(id="1", name="f", data="d")])
    assert [m.message_type for m in (UserMessage(text="u"), SystemMessage(text="s"), tool)] == [
        "user",
        "system",
        "tool",
    ]
    assert tool.text is None
