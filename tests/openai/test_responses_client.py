"""ResponsesClient: the Responses API through the advisors, on both stores, real SDK client."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, ask, assert_no_leaks, stored, turn
from pydantic import BaseModel

from asyncsession import DefaultSessionService
from asyncsession.chat import ChatChunk, ChatOptions, Usage
from asyncsession.compaction import CompactionRequest, SlidingWindowCompactionStrategy
from asyncsession.exceptions import ChatError, UsageError
from asyncsession.messages import AssistantMessage
from asyncsession.openai import ResponsesClient
from asyncsession.testing import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)
from asyncsession.tools import tool

WAIT = 5  # seconds: a bound on waits for events that must happen, never a synchronisation sleep


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def always(request: CompactionRequest) -> bool:
    return True


def session_client(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService, *, compact: bool = False
) -> ResponsesClient:
    return ResponsesClient(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[lookup],
        compaction=(always, SlidingWindowCompactionStrategy(2)) if compact else None,
    )


def kinds(items: list[dict[str, Any]]) -> list[str]:
    """Short labels of input items: ``user:text``, ``reasoning``, ``call:name``, ``out:id``."""
    labels: list[str] = []
    for item in items:
        kind = item.get("type", "message")
        if kind == "message":
            content = item["content"]
            text = content if isinstance(content, str) else content[0].get("text")
            labels.append(f"{item['role']}:{text}")
        elif kind == "function_call":
            labels.append(f"call:{item['name']}")
        elif kind == "function_call_output":
            labels.append(f"out:{item['call_id']}")
        else:
            labels.append(kind)
    return labels


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_turn_is_sent_as_items_and_stored(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """A call sends the history as input items with store=False and encrypted reasoning asked
    for, and stores the user message and the reply."""
    server.enqueue(
        ScriptedReply.text("Hello.", prompt_tokens=7, completion_tokens=2),
        ScriptedReply.text("Again."),
    )
    client = session_client(openai_client, store)

    reply = await ask(client, "hi", streaming=streaming, **turn("s"))
    await ask(client, "more", streaming=streaming, **turn("s"))

    assert reply.text == "Hello."
    assert reply.usage == Usage(prompt_tokens=7, completion_tokens=2, total_tokens=9)
    first, second = server.requests
    assert first.path == "/v1/responses"
    assert first.body["store"] is False
    assert first.body["include"] == ["reasoning.encrypted_content"]
    assert first.is_stream is streaming
    assert kinds(second.input) == ["user:hi", "assistant:Hello.", "user:more"]
    assert await stored(store, "s") == ["U:hi", "A:Hello.", "U:more", "A:Again."]
    server.assert_done()


IMAGE_CALL = {
    "type": "image_generation_call",
    "id": "ig_1",
    "status": "completed",
    "result": "iVBORw0KGgo=",
}


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_reply_of_hosted_tool_items_alone_is_stored_and_replayed(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """A reply that is only a hosted tool's item (a generated image, no text) passes the
    default message filter: it is stored with its item and sent back as it came."""
    server.enqueue(ScriptedReply(items=[IMAGE_CALL]), ScriptedReply.text("A cat."))
    client = session_client(openai_client, store)

    reply = await ask(client, "draw a cat", streaming=streaming, **turn("s"))
    await ask(client, "what is it?", streaming=streaming, **turn("s"))

    assert not reply.text
    assert [dict(item) for item in reply.message.items] == [IMAGE_CALL]
    second = server.requests[1]
    assert kinds(second.input) == ["user:draw a cat", "image_generation_call", "user:what is it?"]
    assert second.input[1] == IMAGE_CALL
    events = await store.get_events("s")
    assert [e.message.message_type.value for e in events if e.message is not None] == [
        "user",
        "assistant",
        "user",
        "assistant",
    ]
    image = events[1].message
    assert isinstance(image, AssistantMessage)
    assert [dict(item) for item in image.items] == [IMAGE_CALL]
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_tool_loop_replays_reasoning_with_its_parallel_calls(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """Two rounds: reasoning and two parallel calls, then the answer; the reasoning item goes
    back in round 2 and in the next turn, right before the calls it preceded."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("lookup", {"key": "a"}, id="c1"),
                ScriptedToolCall("lookup", {"key": "b"}, id="c2"),
            ],
            reasoning="I need both keys.",
        ),
        ScriptedReply.text("a and b.", reasoning="Done."),
        ScriptedReply.text("Yes."),
    )
    client = session_client(openai_client, store)

    reply = await ask(client, "go", streaming=streaming, **turn("s"))
    await ask(client, "sure?", streaming=streaming, **turn("s"))

    assert reply.text == "a and b."
    round_two = server.requests[1].input
    assert kinds(round_two) == [
        "user:go",
        "reasoning",
        "call:lookup",
        "call:lookup",
        "out:c1",
        "out:c2",
    ]
    assert round_two[1]["encrypted_content"]
    assert [o["output"] for o in round_two[4:]] == ["value of a", "value of b"]
    assert kinds(server.requests[2].input) == [
        *kinds(round_two),
        "reasoning",
        "assistant:a and b.",
        "user:sure?",
    ]
    assert server.requests[2].input[1] == round_two[1]  # the stored item, unchanged
    events = await store.get_events("s")
    calls = events[1].message
    assert isinstance(calls, AssistantMessage)
    assert [item["type"] for item in calls.items] == ["reasoning", "function_call", "function_call"]
    assert await stored(store, "s") == [
        "U:go",
        "A[lookup,lookup]",
        "T[lookup->value of a,lookup->value of b]",
        "A:a and b.",
        "U:sure?",
        "A:Yes.",
    ]
    server.assert_done()  # the server found nothing the real API would reject


async def test_stream_chunks_are_typed_and_keep_the_raw_event(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Text, reasoning-summary and argument deltas arrive as typed chunks, one per event."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("lookup", {"key": "k"}, id="c")], reasoning="Think", chunk_size=3
        ),
        ScriptedReply.text("Done now", chunk_size=3),
    )
    chunks: list[ChatChunk] = []
    async with session_client(openai_client, store).stream("go", **turn("s")) as stream:
        chunks = [chunk async for chunk in stream]

    types = [getattr(c.raw, "type", None) for c in chunks]
    assert types[:2] == ["response.created", "response.in_progress"]
    assert types.count("response.completed") == 2
    assert all(isinstance(c.raw, BaseModel) for c in chunks)  # the SDK's typed events
    assert "".join(c.reasoning for c in chunks) == "Think"
    assert [c.text for c in chunks if c.text] == ["Don", "e n", "ow"]
    deltas = [d for c in chunks for d in c.tool_calls]
    assert deltas[0].id == "c"
    assert deltas[0].name == "lookup"
    assert "".join(d.arguments for d in deltas) == '{"key":"k"}'
    assert [c.finish_reason for c in chunks if c.finish_reason] == ["tool_calls", "stop"]
    assert stream.response.text == "Done now"


async def test_the_reply_is_stored_after_the_last_event_and_compaction_runs_after_the_stream(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Nothing of the reply is stored while events arrive; once the stream ends the reply is
    stored and the turn compacted."""
    server.enqueue(ScriptedReply.text("One."), ScriptedReply.text("Two."))
    client = session_client(openai_client, store, compact=True)
    await ask(client, "first", streaming=True, **turn("s"))
    seen: list[list[str]] = []

    async with client.stream("second", **turn("s")) as stream:
        async for _ in stream:
            seen.append(await stored(store, "s"))
        after = await store.get_events("s")

    assert all(labels[-1] == "U:second" for labels in seen)
    assert [e.archived for e in after if e.message] == [True, True, False, False]
    assert await stored(store, "s") == ["U:first", "A:One.", "U:second", "A:Two."]


async def test_an_abandoned_stream_stores_no_reply_and_closes_the_connection(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Breaking out closes the HTTP stream; only the user message stays stored."""
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("A long answer", chunk_size=2, pause_after=6, gate=gate))

    async with session_client(openai_client, store).stream("hi", **turn("s")) as stream:
        async for chunk in stream:
            if chunk.text:
                break

    async with asyncio.timeout(WAIT):
        await server.wait_disconnected(0)
    gate.set()
    assert await stored(store, "s") == ["U:hi"]
    with pytest.raises(UsageError, match="read to its end"):
        _ = stream.response
    assert_no_leaks()


async def test_a_dropped_stream_is_interrupted_and_stores_no_reply(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A connection that breaks before response.completed raises ChatError."""
    server.enqueue(ScriptedReply.text("Half of it", drop_after=5))

    with pytest.raises(ChatError, match=r"ended before it finished|broke off"):
        await ask(session_client(openai_client, store), "hi", streaming=True, **turn("s"))

    assert await stored(store, "s") == ["U:hi"]


@pytest.mark.parametrize("outcome", ["failed", "incomplete", "error"])
@pytest.mark.parametrize("streaming", PATHS)
async def test_a_response_that_does_not_complete_is_a_chat_error(
    outcome: Any,
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """response.failed, response.incomplete and error events (or statuses) raise ChatError and
    store no reply."""
    server.enqueue(ScriptedReply(content="partial", outcome=outcome))
    client = session_client(openai_client, store)

    with pytest.raises(ChatError) as raised:
        await ask(client, "hi", streaming=streaming, **turn("s"))

    assert "before it finished" not in str(raised.value)  # a failed reply, not a broken stream
    assert await stored(store, "s") == ["U:hi"]
    assert_no_leaks()


@pytest.mark.parametrize("streaming", PATHS)
async def test_http_errors_are_mapped(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """An HTTP error of the API is a ChatError with its status and the API's message."""
    server.enqueue(ScriptedReply.error(429, "Slow down"))

    with pytest.raises(ChatError, match="Slow down") as raised:
        await ask(session_client(openai_client, store), "hi", streaming=streaming, **turn("s"))

    assert raised.value.status_code == 429
    assert isinstance(raised.value.__cause__, openai.RateLimitError)


async def test_options_map_to_the_responses_parameters(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Options take their Responses API names; tools are flat function tools."""
    server.enqueue(ScriptedReply.text("ok"))
    client = ResponsesClient(openai_client, model=MODEL, include=())
    options = ChatOptions(
        max_completion_tokens=50,
        reasoning_effort="low",
        tool_choice={"type": "function", "function": {"name": "lookup"}},
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}},
        temperature=0.5,
    )

    await client.call("hi", options=options, tools=[lookup])

    body = server.requests[0].body
    assert body["max_output_tokens"] == 50
    assert body["reasoning"] == {"effort": "low"}
    assert body["tool_choice"] == {"type": "function", "name": "lookup"}
    assert body["text"] == {"format": {"type": "json_schema", "name": "x", "schema": {}}}
    assert body["temperature"] == 0.5
    assert "include" not in body
    assert body["tools"] == [
        {
            "type": "function",
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": dict(lookup.parameters),
            "strict": bool(lookup.strict),
        }
    ]
    with pytest.raises(UsageError, match="stop"):
        await client.call("hi", options=ChatOptions(stop=("x",)))


async def test_messages_may_be_given_as_items(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Dict messages of a ResponsesClient are Responses input items, sent back as given."""
    server.enqueue(ScriptedReply.text("ok"))
    items: list[dict[str, Any]] = [
        {"type": "message", "role": "developer", "content": "be brief", "id": "m0"},
        {"role": "user", "content": [{"type": "input_text", "text": "hi"}]},
    ]
    await ResponsesClient(openai_client, model=MODEL).call(messages=items)
    assert server.requests[0].input == items


async def test_many_concurrent_streams_each_store_their_turn_once(
    store: DefaultSessionService,
) -> None:
    """Twenty concurrent streamed tool turns with reasoning, over ten sessions, store every
    message exactly once, and every later request is one the real API accepts."""

    def answer(request: Any) -> ScriptedReply:
        if request.input[-1].get("type") == "function_call_output":
            return ScriptedReply.text("done", reasoning="Finish.")
        key = request.input[-1]["content"]
        return ScriptedReply.tool_calls(
            [ScriptedToolCall("lookup", {"key": key})], reasoning="Look it up."
        )

    async with ScriptedOpenAIServer(responder=answer) as own:
        sdk = own.client()
        client = session_client(sdk, store)
        async with asyncio.TaskGroup() as tasks:
            for number in range(20):
                tasks.create_task(
                    ask(client, f"k{number}", streaming=True, **turn(f"s{number % 10}"))
                )
        own.assert_done()

    for session in range(10):
        labels = await stored(store, f"s{session}")
        assert sorted(labels) == sorted(
            label
            for number in (session, session + 10)
            for label in (f"U:k{number}", "A[lookup]", f"T[lookup->value of k{number}]", "A:done")
        )
