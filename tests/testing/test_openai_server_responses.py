"""The scripted server's Responses API, as the real ``openai`` SDK parses it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import openai
import pytest
from openai.types.responses import (
    ResponseCompletedEvent,
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseReasoningItem,
)
from openai.types.responses.response_output_item import ImageGenerationCall

from asyncsession.exceptions import UsageError
from asyncsession.testing import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

MODEL = "gpt-test"


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as client:
        yield client


REPLY = ScriptedReply.tool_calls(
    [ScriptedToolCall("f", {"a": 1}, id="call_1")],
    content="Let me check.",
    reasoning="Because.",
    prompt_tokens=11,
    completion_tokens=4,
    chunk_size=3,
)


async def test_a_json_response_parses_into_the_sdk_types(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A non-streamed reply is a Response: reasoning, message and function call, with usage."""
    server.enqueue(REPLY)

    response = await client.responses.create(model=MODEL, input="hi", store=False)

    reasoning, message, call = response.output
    assert isinstance(reasoning, ResponseReasoningItem)
    assert reasoning.summary[0].text == "Because."
    assert reasoning.encrypted_content
    assert isinstance(message, ResponseOutputMessage)
    assert response.output_text == "Let me check."
    assert isinstance(call, ResponseFunctionToolCall)
    assert (call.call_id, call.name, call.arguments) == ("call_1", "f", '{"a":1}')
    assert response.status == "completed"
    assert response.usage is not None
    assert (response.usage.input_tokens, response.usage.output_tokens) == (11, 4)
    assert server.requests[0].input == [{"role": "user", "content": "hi"}]
    server.assert_done()


async def test_streamed_events_parse_and_add_up_to_the_response(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The SSE events carry the SDK's event names, in order, and their deltas add up."""
    server.enqueue(REPLY)

    stream = await client.responses.create(model=MODEL, input="hi", stream=True)
    events = [event async for event in stream]

    types = [event.type for event in events]
    assert types[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert types[-1] == "response.completed"
    assert [e.sequence_number for e in events] == list(range(len(events)))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    summary = "".join(e.delta for e in events if e.type == "response.reasoning_summary_text.delta")
    arguments = "".join(
        e.delta for e in events if e.type == "response.function_call_arguments.delta"
    )
    assert (text, summary, arguments) == ("Let me check.", "Because.", '{"a":1}')
    done = [e.item.type for e in events if e.type == "response.output_item.done"]
    assert done == ["reasoning", "message", "function_call"]
    final = events[-1]
    assert isinstance(final, ResponseCompletedEvent)
    assert [item.type for item in final.response.output] == done


@pytest.mark.parametrize(
    ("outcome", "last"),
    [
        pytest.param("failed", "response.failed", id="failed"),
        pytest.param("incomplete", "response.incomplete", id="incomplete"),
        pytest.param("error", "error", id="error"),
    ],
)
async def test_a_stream_can_end_without_completing(
    outcome: Any, last: str, server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A scripted outcome ends the stream with that event instead of response.completed."""
    server.enqueue(ScriptedReply(content="x", outcome=outcome))

    stream = await client.responses.create(model=MODEL, input="hi", stream=True)
    events = [event async for event in stream]

    assert events[-1].type == last
    assert "response.completed" not in [e.type for e in events]


@pytest.mark.parametrize(
    ("items", "problem"),
    [
        pytest.param(
            [{"type": "function_call_output", "call_id": "c9", "output": "x"}],
            "No tool call found",
            id="output-without-call",
        ),
        pytest.param(
            [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "e"},
                {"role": "user", "content": "x"},
            ],
            "without its required following item",
            id="reasoning-alone",
        ),
        pytest.param(
            [
                {"type": "reasoning", "id": "rs_1", "summary": []},
                {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"},
            ],
            "not found",
            id="reasoning-without-encrypted-content",
        ),
    ],
)
async def test_input_the_real_api_rejects_is_rejected(
    items: list[dict[str, Any]],
    problem: str,
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
) -> None:
    """Inputs the real API refuses get a 400, recorded as a failure; no reply is used."""
    server.enqueue(ScriptedReply.text("unused"))

    with pytest.raises(openai.BadRequestError, match=problem):
        await client.responses.create(model=MODEL, input=items, store=False)  # type: ignore[arg-type]

    assert len(server.failures) == 1
    with pytest.raises(AssertionError, match="unused"):
        server.assert_done()


def test_an_error_reply_carries_no_reasoning() -> None:
    """An HTTP error reply cannot also script a reasoning summary."""
    with pytest.raises(UsageError):
        ScriptedReply(api_error=ScriptedReply.error(500, "x").api_error, reasoning="r")


IMAGE = {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": "iVBO"}


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
async def test_scripted_output_items_come_as_given_before_the_message(
    stream: bool, server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Hosted-tool items are sent as given, between the reasoning item and the message; the
    SDK parses them into its own types."""
    server.enqueue(ScriptedReply(content="Here.", reasoning="r", items=[IMAGE]))

    if stream:
        events = [
            e async for e in await client.responses.create(model=MODEL, input="hi", stream=True)
        ]
        added = [e.item for e in events if e.type == "response.output_item.added"]
        assert [(item.type, item.status) for item in added if item.type != "reasoning"] == [
            ("image_generation_call", "in_progress"),
            ("message", "in_progress"),
        ]
        final = events[-1]
        assert isinstance(final, ResponseCompletedEvent)
        response = final.response
    else:
        response = await client.responses.create(model=MODEL, input="hi")

    assert [item.type for item in response.output] == [
        "reasoning",
        "image_generation_call",
        "message",
    ]
    image = response.output[1]
    assert isinstance(image, ImageGenerationCall)
    assert (image.id, image.status, image.result) == ("ig_1", "completed", "iVBO")


@pytest.mark.parametrize(
    "item", [{"type": "web_search_call"}, {"id": "x"}, {"type": 1, "id": "x"}], ids=str
)
def test_a_scripted_output_item_needs_a_type_and_an_id(item: dict[str, Any]) -> None:
    """An item without a string type and id is refused when the reply is made."""
    with pytest.raises(UsageError, match="type and id"):
        ScriptedReply(items=[item])


def test_an_error_reply_carries_no_output_items() -> None:
    """An HTTP error reply cannot also script output items."""
    with pytest.raises(UsageError):
        ScriptedReply(api_error=ScriptedReply.error(500, "x").api_error, items=[IMAGE])
