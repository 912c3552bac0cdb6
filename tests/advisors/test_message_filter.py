"""MessageFilter: the factories and the combinators."""

from __future__ import annotations

import pytest

from asyncsession import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.advisors import MessageFilter

USER = UserMessage(text="Hello World")
EMPTY = AssistantMessage(text="  ")
NONE_TEXT = AssistantMessage(text=None)
CALL = AssistantMessage(tool_calls=(ToolCall(id="c", name="t"),))
AUDIO = AssistantMessage(text="", extra={"audio": {"id": "a1"}})
IMAGE = AssistantMessage(text="", parts=({"type": "image_url", "image_url": {"url": "x"}},))
REPLY = AssistantMessage(text="hello")
RESULT = ToolResponseMessage(responses=(ToolResponse(id="c", data="hello"),))
SYSTEM = SystemMessage(text="rules")
HOSTED = AssistantMessage(
    items=(
        {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBO"},
    )
)
SEARCH = AssistantMessage(
    text="",
    items=(
        {"type": "web_search_call", "id": "ws_1", "status": "completed"},
        {"type": "message", "id": "m_1", "role": "assistant", "content": []},
    ),
)
FRAME = AssistantMessage(
    text="",
    items=(
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {"type": "message", "id": "m_1", "role": "assistant", "content": []},
    ),
)


def test_all_stores_everything() -> None:
    """``all()`` accepts every message."""
    keep = MessageFilter.all()
    assert all(keep(m) for m in (USER, EMPTY, CALL, RESULT, SYSTEM))


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        pytest.param(EMPTY, False, id="blank-text"),
        pytest.param(NONE_TEXT, False, id="no-text"),
        pytest.param(CALL, True, id="tool-call"),
        pytest.param(AUDIO, True, id="audio"),
        pytest.param(IMAGE, True, id="image-part"),
        pytest.param(REPLY, True, id="reply"),
        pytest.param(UserMessage(text=""), True, id="empty-user"),
        pytest.param(RESULT, True, id="tool-result"),
        pytest.param(HOSTED, True, id="hosted-tool-item-only"),
        pytest.param(SEARCH, True, id="hosted-tool-item-and-empty-message-item"),
        pytest.param(FRAME, False, id="reasoning-and-empty-message-items"),
    ],
)
def test_skip_empty_messages_skips_only_empty_assistant_frames(
    message: AssistantMessage, expected: bool
) -> None:
    """An assistant message with no text, no tool calls, no media and no items of its own (hosted
    tools) is skipped; nothing else."""
    assert MessageFilter.skip_empty_messages().should_persist(message) is expected


def test_by_message_type_keeps_the_listed_types() -> None:
    """Only the listed types pass; strings name types too."""
    chat = MessageFilter.by_message_type("user", "assistant")
    assert [chat(m) for m in (USER, REPLY, RESULT, SYSTEM)] == [True, True, False, False]
    with pytest.raises(ValueError, match="at least one"):
        MessageFilter.by_message_type()


def test_contains_text_is_case_insensitive_and_rejects_messages_without_text() -> None:
    """The keyword matches any case; tool results (no text) are rejected."""
    hello = MessageFilter.contains_text("HELLO")
    assert [hello(m) for m in (USER, REPLY, RESULT, CALL)] == [True, True, False, False]
    with pytest.raises(ValueError, match="non-blank"):
        MessageFilter.contains_text("  ")


def test_filters_compose_with_and_or_and_negate() -> None:
    """``&``/``and_``, ``|``/``or_`` and ``~``/``negate`` combine filters."""
    users = MessageFilter.by_message_type("user")
    hello = MessageFilter.contains_text("hello")
    assert [(users & hello)(m) for m in (USER, REPLY)] == [True, False]
    assert [users.and_(hello)(m) for m in (USER, REPLY)] == [True, False]
    assert [(users | hello)(m) for m in (USER, REPLY, SYSTEM)] == [True, True, False]
    assert [users.or_(hello)(m) for m in (USER, REPLY, SYSTEM)] == [True, True, False]
    assert [(~users)(m) for m in (USER, REPLY)] == [False, True]
    assert [users.negate()(m) for m in (USER, REPLY)] == [False, True]


def test_a_plain_function_is_a_filter() -> None:
    """Any predicate over messages makes a filter."""
    short = MessageFilter(lambda m: len(m.text or "") < 6)
    assert [short(m) for m in (USER, REPLY)] == [False, True]
