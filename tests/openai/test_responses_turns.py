"""A reasoning item is part of its turn: the read guard and compaction never strand one."""

from __future__ import annotations

from typing import Any

import pytest

from asyncsession._responses_items import items_to_messages, messages_to_items
from asyncsession._turn.log import guard_history
from asyncsession.compaction import (
    CompactionRequest,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from asyncsession.events import Session, SessionEvent
from asyncsession.messages import Message


def reasoning(n: int) -> dict[str, Any]:
    return {"type": "reasoning", "id": f"rs_{n}", "summary": [], "encrypted_content": f"E{n}"}


def tool_turn(n: int) -> list[dict[str, Any]]:
    return [
        {"role": "user", "content": f"question {n}"},
        reasoning(n),
        {"type": "function_call", "call_id": f"c{n}", "name": "f", "arguments": "{}"},
        {"type": "function_call_output", "call_id": f"c{n}", "output": "x"},
        reasoning(100 + n),
        {"type": "message", "role": "assistant", "content": f"answer {n}"},
    ]


def stranded_reasoning(items: list[dict[str, Any]]) -> list[str]:
    """Ids of reasoning items not followed by model output (what the API rejects)."""
    bad: list[str] = []
    for index, item in enumerate(items):
        if item.get("type") != "reasoning":
            continue
        following = items[index + 1] if index + 1 < len(items) else {}
        if not following or following.get("role") == "user" or "output" in following:
            bad.append(item["id"])
    return bad


def as_events(messages: list[Message]) -> list[SessionEvent]:
    return [SessionEvent(session_id="s", message=message) for message in messages]


def test_the_read_guard_drops_reasoning_with_the_call_it_preceded() -> None:
    """A tool call that lost its result goes, and its reasoning item with it."""
    items = tool_turn(1)
    del items[3]  # the function_call_output is missing from the log
    history = items_to_messages([*items, {"role": "user", "content": "next"}])

    kept, dropped = guard_history(history, [])

    assert dropped == 1
    sent = messages_to_items(kept)
    assert "rs_1" not in [item.get("id") for item in sent]
    assert stranded_reasoning(sent) == []


@pytest.mark.parametrize(
    "strategy",
    [
        pytest.param(TurnWindowCompactionStrategy(1), id="turn-window"),
        pytest.param(SlidingWindowCompactionStrategy(3), id="sliding-window"),
        pytest.param(TokenCountCompactionStrategy(30), id="token-count"),
    ],
)
async def test_compaction_keeps_reasoning_inside_its_turn(strategy: Any) -> None:
    """Whatever the window, the active items never hold a reasoning item without its output."""
    messages = items_to_messages([*tool_turn(1), *tool_turn(2), *tool_turn(3)])
    events = as_events(messages)
    request = CompactionRequest.of(Session(id="s", user_id="u"), events)

    result = await strategy.compact(request)

    archived = {e.id for e in result.archived_events}
    assert archived  # something was compacted
    active = [e.message for e in result.compacted_events if e.message is not None]
    items = messages_to_items(active)
    assert stranded_reasoning(items) == []
    assert items[0]["role"] == "user"
    kept_reasoning = [i["id"] for i in items if i.get("type") == "reasoning"]
    assert kept_reasoning[-2:] == ["rs_3", "rs_103"]
