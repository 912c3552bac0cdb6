"""Pydantic AI's own sync tests of runs continued from a message history
(``tests/test_agent.py``: ``test_run_with_history_new`` and
``test_run_with_history_new_structured``), with ``agent.run_sync`` as they have it and the
history stored in and loaded from the history under test before each run.

Each test runs on the in-process list (the reference) and on ``PydanticAIHistory`` over both
stores, with no event loop in the test's thread; the MongoDB store is built as a plain script
builds it (``MongoSessionRepository.from_uri``), so ``load_sync`` and ``store_sync`` run on the
adapters' own loop while ``run_sync`` runs the agent on the thread's. The assertions are the
originals', with their ``snapshot(...)`` values spelled as shapes (message kind, part kinds
and contents or arguments, usage) since ``IsNow`` and ``IsStr`` only waive timestamps and ids.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel
from pydantic_ai import Agent, ModelMessage, ModelResponse
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage, RunUsage
from pydantic_ai_support import SyncHistoryFactory


@pytest.fixture(autouse=True)
def close_the_loop_run_sync_left() -> Iterator[None]:
    """``run_sync`` leaves the loop it made set for the thread, open, for its next call: close
    it after the test, or it is collected later, in another test, as unclosed sockets."""
    yield
    policy = asyncio.get_event_loop_policy()
    policy.get_event_loop().close()
    policy.set_event_loop(None)


def shape(messages: list[ModelMessage]) -> list[tuple[Any, ...]]:
    """Kinds, part kinds with their contents (tool calls: arguments), responses' usage."""
    return [
        (
            message.kind,
            [
                (part.part_kind, getattr(part, "content", None) or getattr(part, "args", None))
                for part in message.parts
            ],
            message.usage if isinstance(message, ModelResponse) else None,
        )
        for message in messages
    ]


FIRST_RUN = [
    ("request", [("system-prompt", "Foobar"), ("user-prompt", "Hello")], None),
    ("response", [("tool-call", {"x": "a"})], RequestUsage(input_tokens=52, output_tokens=5)),
    ("request", [("tool-return", "a-apple")], None),
    ("response", [("text", '{"ret_a":"a-apple"}')], RequestUsage(input_tokens=53, output_tokens=9)),
]


def loaded(history: SyncHistoryFactory, session_id: str, messages: list[ModelMessage]) -> Any:
    """``messages`` stored in a new history and loaded back: what the next run gets."""
    store = history(session_id)
    store.store_sync(messages)
    back = store.load_sync()
    assert back == messages
    return back


def test_run_with_history_new(any_sync_history: SyncHistoryFactory) -> None:
    agent = Agent(TestModel(), system_prompt="Foobar")

    @agent.tool_plain
    async def ret_a(x: str) -> str:
        return f"{x}-apple"

    result1 = agent.run_sync("Hello")
    assert shape(result1.new_messages()) == FIRST_RUN

    # if we pass new_messages, system prompt is inserted before the message_history messages
    history = loaded(any_sync_history, "new", result1.new_messages())
    result2 = agent.run_sync("Hello again", message_history=history)
    second = [
        ("request", [("user-prompt", "Hello again")], None),
        (
            "response",
            [("text", '{"ret_a":"a-apple"}')],
            RequestUsage(input_tokens=55, output_tokens=13),
        ),
    ]
    assert shape(result2.all_messages()) == [*FIRST_RUN, *second]
    assert result2.new_messages() == result2.all_messages()[-2:]
    assert result2.output == '{"ret_a":"a-apple"}'
    assert result2.usage == RunUsage(requests=1, input_tokens=55, output_tokens=13)
    assert [(m.kind, [p.part_kind for p in m.parts]) for m in result2.all_messages()] == [
        ("request", ["system-prompt", "user-prompt"]),
        ("response", ["tool-call"]),
        ("request", ["tool-return"]),
        ("response", ["text"]),
        ("request", ["user-prompt"]),
        ("response", ["text"]),
    ]
    assert result2.new_messages_json().startswith(b'[{"parts":[{"content":"Hello again",')

    # if we pass all_messages, system prompt is NOT inserted before the message_history messages,
    # so only one system prompt
    history = loaded(any_sync_history, "all", result1.all_messages())
    result3 = agent.run_sync("Hello again", message_history=history)
    assert shape(result3.all_messages()) == [*FIRST_RUN, *second]
    assert result3.new_messages() == result3.all_messages()[-2:]
    assert result3.output == '{"ret_a":"a-apple"}'
    assert result3.usage == RunUsage(requests=1, input_tokens=55, output_tokens=13)


def test_run_with_history_new_structured(any_sync_history: SyncHistoryFactory) -> None:
    class Response(BaseModel):
        a: int

    agent = Agent(TestModel(), system_prompt="Foobar", output_type=Response)

    @agent.tool_plain
    async def ret_a(x: str) -> str:
        return f"{x}-apple"

    result1 = agent.run_sync("Hello")
    first = [
        *FIRST_RUN[:3],
        ("response", [("tool-call", {"a": 0})], RequestUsage(input_tokens=53, output_tokens=9)),
        ("request", [("tool-return", "Final result processed.")], None),
    ]
    assert shape(result1.new_messages()) == first

    history = loaded(any_sync_history, "structured", result1.new_messages())
    result2 = agent.run_sync("Hello again", message_history=history)
    assert shape(result2.all_messages()) == [
        *first,
        # second call, notice no repeated system prompt
        ("request", [("user-prompt", "Hello again")], None),
        ("response", [("tool-call", {"a": 0})], RequestUsage(input_tokens=59, output_tokens=13)),
        ("request", [("tool-return", "Final result processed.")], None),
    ]
    assert result2.output == Response(a=0)
    assert result2.new_messages() == result2.all_messages()[-3:]
    assert result2.usage == RunUsage(requests=1, input_tokens=59, output_tokens=13)
    assert [(m.kind, [p.part_kind for p in m.parts]) for m in result2.all_messages()] == [
        ("request", ["system-prompt", "user-prompt"]),
        ("response", ["tool-call"]),
        ("request", ["tool-return"]),
        ("response", ["tool-call"]),
        ("request", ["tool-return"]),
        ("request", ["user-prompt"]),
        ("response", ["tool-call"]),
        ("request", ["tool-return"]),
    ]
    assert result2.new_messages_json().startswith(b'[{"parts":[{"content":"Hello again",')
