"""Pydantic AI's own history processor tests (``tests/test_history_processor.py``), with the
message history stored in and loaded from the history under test before each run.

(Pydantic AI 2 takes processors as ``capabilities=[ProcessHistory(p)]``, its replacement of
``history_processors=``.) Each test runs on the in-process list (the reference) and on
``PydanticAIHistory`` over both stores. The assertions are the originals', with their
``snapshot(...)`` values spelled as
shapes (message kind, part kinds and contents, ``run_id`` presence) since ``IsDatetime`` and
``IsStr`` only waive timestamps and ids; the stored history must also load back equal."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from pydantic_ai import (
    Agent,
    ModelMessage,
    ModelRequest,
    ModelRequestPart,
    ModelResponse,
    SystemPromptPart,
    TextPart,
    UserPromptPart,
    capture_run_messages,
)
from pydantic_ai.capabilities import ProcessHistory
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_support import HistoryFactory

MODEL_NAME = "function:capture_model_function:capture_model_stream_function"


def shape(messages: list[ModelMessage]) -> list[tuple[Any, ...]]:
    """What the original snapshots pin down: kinds, part kinds and contents, run ids present."""
    return [
        (
            m.kind,
            [(p.part_kind, getattr(p, "content", None)) for p in m.parts],
            m.run_id is not None,
            m.model_name if isinstance(m, ModelResponse) else None,
        )
        for m in messages
    ]


def req(*parts: tuple[str, str], run: bool = False) -> tuple[Any, ...]:
    return ("request", list(parts), run, None)


def resp(text: str, model: str | None = MODEL_NAME, run: bool = True) -> tuple[Any, ...]:
    return ("response", [("text", text)], run, model)


def user(text: str) -> tuple[str, str]:
    return ("user-prompt", text)


def system(text: str) -> tuple[str, str]:
    return ("system-prompt", text)


@pytest.fixture
def received_messages() -> list[ModelMessage]:
    return []


@pytest.fixture
def function_model(received_messages: list[ModelMessage]) -> FunctionModel:
    def capture_model_function(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        received_messages.clear()
        received_messages.extend(messages)
        return ModelResponse(parts=[TextPart(content="Provider response")])

    async def capture_model_stream_function(
        messages: list[ModelMessage], _info: AgentInfo
    ) -> AsyncIterator[str]:
        received_messages.clear()
        received_messages.extend(messages)
        yield "hello"

    return FunctionModel(capture_model_function, stream_function=capture_model_stream_function)


async def stored(any_history: HistoryFactory, messages: list[ModelMessage]) -> list[ModelMessage]:
    """``messages`` stored in a new history and loaded back: what the run gets."""
    history = any_history("processor-test")
    await history.store(messages)
    loaded = await history.load()
    assert loaded == messages
    return loaded


async def test_history_processor_no_op(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    def no_op_history_processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return messages

    agent = Agent(function_model, capabilities=[ProcessHistory(no_op_history_processor)])
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Previous question")]),
            ModelResponse(parts=[TextPart(content="Previous answer")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        result = await agent.run("New question", message_history=message_history)

    assert shape(received_messages) == [
        req(user("Previous question")),
        resp("Previous answer", model=None, run=False),
        req(user("New question"), run=True),
    ]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("Previous question")),
        resp("Previous answer", model=None, run=False),
        req(user("New question"), run=True),
        resp("Provider response"),
    ]
    assert result.new_messages() == result.all_messages()[-2:]


async def test_history_processor_run_replaces_message_history(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    def process_previous_answers(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [*messages[-1:], ModelRequest(parts=[SystemPromptPart(content="Processed answer")])]

    agent = Agent(function_model, capabilities=[ProcessHistory(process_previous_answers)])
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Question 1")]),
            ModelResponse(parts=[TextPart(content="Answer 1")]),
            ModelRequest(parts=[UserPromptPart(content="Question 2")]),
            ModelResponse(parts=[TextPart(content="Answer 2")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        result = await agent.run("Question 3", message_history=message_history)

    # Pydantic AI 2 sends a system prompt after the first request as a tagged user prompt.
    assert shape(received_messages) == [
        req(user("Question 3"), user("<system>Processed answer</system>"))
    ]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("Question 3"), run=True),
        req(system("Processed answer"), run=True),  # Pydantic AI 2 stamps the run's id on it
        resp("Provider response"),
    ]
    # Pydantic AI 2: every message of a replaced history is new to the run.
    assert result.new_messages() == result.all_messages()


async def test_history_processor_streaming_replaces_message_history(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    def process_previous_answers(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [*messages[-1:], ModelRequest(parts=[SystemPromptPart(content="Processed answer")])]

    agent = Agent(function_model, capabilities=[ProcessHistory(process_previous_answers)])
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Question 1")]),
            ModelResponse(parts=[TextPart(content="Answer 1")]),
            ModelRequest(parts=[UserPromptPart(content="Question 2")]),
            ModelResponse(parts=[TextPart(content="Answer 2")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        async with agent.run_stream("Question 3", message_history=message_history) as result:
            async for _ in result.stream_text():
                pass

    # Pydantic AI 2 sends a system prompt after the first request as a tagged user prompt.
    assert shape(received_messages) == [
        req(user("Question 3"), user("<system>Processed answer</system>"))
    ]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("Question 3"), run=True),
        req(system("Processed answer"), run=True),  # Pydantic AI 2 stamps the run's id on it
        resp("hello"),
    ]
    # Pydantic AI 2: every message of a replaced history is new to the run.
    assert result.new_messages() == result.all_messages()


async def test_history_processor_messages_sent_to_provider(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    def capture_messages_processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [msg for msg in messages if isinstance(msg, ModelRequest)]

    agent = Agent(function_model, capabilities=[ProcessHistory(capture_messages_processor)])
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Previous question")]),
            ModelResponse(parts=[TextPart(content="Previous answer")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        result = await agent.run("New question", message_history=message_history)

    assert shape(received_messages) == [req(user("Previous question"), user("New question"))]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("Previous question")),
        req(user("New question"), run=True),
        resp("Provider response"),
    ]
    assert result.new_messages() == result.all_messages()[-2:]


async def test_multiple_history_processors(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    def prefixing(prefix: str) -> Any:
        def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
            processed: list[ModelMessage] = []
            for msg in messages:
                if isinstance(msg, ModelRequest):
                    new_parts: list[ModelRequestPart] = []
                    for part in msg.parts:
                        if isinstance(part, UserPromptPart):
                            new_parts.append(UserPromptPart(content=f"{prefix} {part.content}"))
                    processed.append(ModelRequest(parts=new_parts))
                else:
                    processed.append(msg)
            return processed

        return processor

    agent = Agent(
        function_model,
        capabilities=[ProcessHistory(prefixing("[FIRST]")), ProcessHistory(prefixing("[SECOND]"))],
    )
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Question")]),
            ModelResponse(parts=[TextPart(content="Answer")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        result = await agent.run("New question", message_history=message_history)

    assert shape(received_messages) == [
        req(user("[SECOND] [FIRST] Question")),
        resp("Answer", model=None, run=False),
        req(user("[SECOND] [FIRST] New question"), run=True),  # stamped by Pydantic AI 2
    ]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("[SECOND] [FIRST] Question")),
        resp("Answer", model=None, run=False),
        req(user("[SECOND] [FIRST] New question"), run=True),  # stamped by Pydantic AI 2
        resp("Provider response"),
    ]
    assert result.new_messages() == result.all_messages()[-2:]


async def test_async_history_processor(
    function_model: FunctionModel,
    received_messages: list[ModelMessage],
    any_history: HistoryFactory,
) -> None:
    async def async_processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        return [msg for msg in messages if isinstance(msg, ModelRequest)]

    agent = Agent(function_model, capabilities=[ProcessHistory(async_processor)])
    message_history = await stored(
        any_history,
        [
            ModelRequest(parts=[UserPromptPart(content="Question 1")]),
            ModelResponse(parts=[TextPart(content="Answer 1")]),
        ],
    )
    with capture_run_messages() as captured_messages:
        result = await agent.run("Question 2", message_history=message_history)

    assert shape(received_messages) == [req(user("Question 1"), user("Question 2"))]
    assert captured_messages == result.all_messages()
    assert shape(result.all_messages()) == [
        req(user("Question 1")),
        req(user("Question 2"), run=True),
        resp("Provider response"),
    ]
    assert result.new_messages() == result.all_messages()[-2:]
