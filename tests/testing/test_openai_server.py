"""The scripted OpenAI server, exercised through the real ``openai.AsyncOpenAI`` client on its
``httpx2`` transport."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable

import httpx2
import openai
import pytest
from openai.types.chat import (
    ChatCompletionChunk,
    ChatCompletionMessageFunctionToolCall,
    ChatCompletionMessageParam,
    ChatCompletionToolParam,
)

from asyncsession.exceptions import UsageError
from asyncsession.testing.openai_server import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

MODEL = "gpt-test"
MESSAGES: list[ChatCompletionMessageParam] = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What's the weather in Paris?"},
]
WEATHER_TOOL: ChatCompletionToolParam = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as client:
        yield client


async def collect(
    client: openai.AsyncOpenAI, *, include_usage: bool = False
) -> list[ChatCompletionChunk]:
    stream = await client.chat.completions.create(
        model=MODEL,
        messages=MESSAGES,
        stream=True,
        stream_options={"include_usage": include_usage},
    )
    async with stream:
        return [chunk async for chunk in stream]


# Non-streaming replies.


async def test_text_reply(server: ScriptedOpenAIServer, client: openai.AsyncOpenAI) -> None:
    """A text reply comes back as a real chat.completion with the model echoed."""
    server.enqueue(ScriptedReply.text("Hello there"))

    completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert completion.object == "chat.completion"
    assert completion.id.startswith("chatcmpl-")
    assert completion.model == MODEL
    choice = completion.choices[0]
    assert choice.message.role == "assistant"
    assert choice.message.content == "Hello there"
    assert choice.message.tool_calls is None
    assert choice.finish_reason == "stop"
    server.assert_done()


async def test_usage_is_estimated_when_not_scripted(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Without scripted usage, positive token counts that add up are reported."""
    server.enqueue(ScriptedReply.text("Hello there"))

    completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    usage = completion.usage
    assert usage is not None
    assert usage.prompt_tokens > 0
    assert usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


async def test_scripted_usage_and_finish_reason(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Scripted usage and an overridden finish reason are reported as given."""
    server.enqueue(
        ScriptedReply.text("Trunc", finish_reason="length", prompt_tokens=120, completion_tokens=7)
    )

    completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert completion.choices[0].finish_reason == "length"
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (120, 7)
    assert completion.usage.total_tokens == 127


async def test_single_tool_call(server: ScriptedOpenAIServer, client: openai.AsyncOpenAI) -> None:
    """A scripted tool call arrives with a generated call id and JSON arguments."""
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("get_weather", {"city": "Paris"})]))

    completion = await client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL]
    )

    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert len(calls) == 1
    call = calls[0]
    assert call.type == "function"
    assert call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris"}


async def test_parallel_tool_calls(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Several scripted calls arrive in order, with given ids kept and raw arguments verbatim."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("get_weather", {"city": "Paris"}, id="call_paris"),
                ScriptedToolCall("get_weather", '{"city": "Rome"', id="call_rome"),
            ]
        )
    )

    completion = await client.chat.completions.create(
        model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL]
    )

    calls = completion.choices[0].message.tool_calls or []
    function_calls = [c for c in calls if isinstance(c, ChatCompletionMessageFunctionToolCall)]
    assert len(function_calls) == len(calls)
    assert [(c.id, c.function.name, c.function.arguments) for c in function_calls] == [
        ("call_paris", "get_weather", '{"city":"Paris"}'),
        ("call_rome", "get_weather", '{"city": "Rome"'),
    ]


# Streaming replies.


async def test_streaming_text_arrives_in_several_chunks(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A streamed text reply is split over several content deltas that join to the script."""
    text = "The weather in Paris is sunny today."
    server.enqueue(ScriptedReply.text(text))

    chunks = await collect(client)

    assert all(chunk.object == "chat.completion.chunk" for chunk in chunks)
    assert len({chunk.id for chunk in chunks}) == 1
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert len(contents) >= 5
    assert "".join(contents) == text
    assert chunks[-1].choices[0].finish_reason == "stop"
    assert all(chunk.choices[0].finish_reason is None for chunk in chunks[:-1])


async def test_chunk_size_controls_delta_length(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """``chunk_size`` sets how many characters each content delta carries."""
    server.enqueue(ScriptedReply.text("abcdefghij", chunk_size=3))

    chunks = await collect(client)

    contents = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
    assert contents == ["abc", "def", "ghi", "j"]


async def test_streaming_tool_calls_reassemble(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The SDK's stream helper reassembles streamed parallel tool calls to the scripted ones."""
    paris = ScriptedToolCall("get_weather", {"city": "Paris", "unit": "celsius"})
    rome = ScriptedToolCall("get_weather", {"city": "Rome"})
    server.enqueue(ScriptedReply.tool_calls([paris, rome]))

    async with client.chat.completions.stream(
        model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL]
    ) as stream:
        final = await stream.get_final_completion()

    choice = final.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content is None
    calls = choice.message.tool_calls
    assert calls is not None
    assert [(c.id, c.function.name, json.loads(c.function.arguments)) for c in calls] == [
        (paris.id, "get_weather", {"city": "Paris", "unit": "celsius"}),
        (rome.id, "get_weather", {"city": "Rome"}),
    ]


async def test_streaming_tool_call_deltas_have_the_api_shape(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A call opens with index, id, type, name and empty arguments; fragments carry only text."""
    call = ScriptedToolCall("get_weather", {"city": "Paris"})
    server.enqueue(ScriptedReply.tool_calls([call]))

    chunks = await collect(client)

    deltas = [tc for c in chunks for tc in (c.choices[0].delta.tool_calls or [])]
    opening, *fragments = deltas
    assert (opening.index, opening.id, opening.type) == (0, call.id, "function")
    assert opening.function is not None
    assert (opening.function.name, opening.function.arguments) == ("get_weather", "")
    assert len(fragments) > 1
    for fragment in fragments:
        assert fragment.index == 0
        assert fragment.id is None
        assert fragment.type is None
        assert fragment.function is not None
        assert fragment.function.name is None
    assert "".join(f.function.arguments or "" for f in fragments if f.function) == (
        call.arguments_json
    )
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


async def test_usage_chunk_when_requested(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """With ``include_usage`` the stream ends with a usage chunk that has no choices."""
    server.enqueue(ScriptedReply.text("Hi!", prompt_tokens=10, completion_tokens=3))

    chunks = await collect(client, include_usage=True)

    last = chunks[-1]
    assert last.choices == []
    assert last.usage is not None
    assert (last.usage.prompt_tokens, last.usage.completion_tokens) == (10, 3)
    assert last.usage.total_tokens == 13
    assert all(chunk.usage is None for chunk in chunks[:-1])


async def test_no_usage_chunk_unless_requested(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Without ``include_usage`` every chunk has a choice and no usage."""
    server.enqueue(ScriptedReply.text("Hi!"))

    chunks = await collect(client)

    assert all(chunk.choices and chunk.usage is None for chunk in chunks)


# Errors and faults.


@pytest.mark.parametrize(
    ("status", "error"),
    [
        pytest.param(400, openai.BadRequestError, id="400"),
        pytest.param(401, openai.AuthenticationError, id="401"),
        pytest.param(404, openai.NotFoundError, id="404"),
        pytest.param(429, openai.RateLimitError, id="429"),
        pytest.param(500, openai.InternalServerError, id="500"),
        pytest.param(503, openai.InternalServerError, id="503"),
    ],
)
async def test_error_status_maps_to_sdk_error(
    server: ScriptedOpenAIServer,
    client: openai.AsyncOpenAI,
    status: int,
    error: type[openai.APIStatusError],
) -> None:
    """An error reply raises the SDK's exception for its status, with OpenAI's error body."""
    server.enqueue(ScriptedReply.error(status, "boom", code="scripted"))

    with pytest.raises(error) as caught:
        await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert caught.value.status_code == status
    assert caught.value.message == f"Error code: {status} - boom"
    assert caught.value.code == "scripted"
    expected_type = "server_error" if status >= 500 else "invalid_request_error"
    assert caught.value.type == expected_type
    assert caught.value.request_id is not None
    server.assert_done()


async def test_error_reply_to_a_stream_request(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """An error reply fails a streaming request before any chunk, like the real API."""
    server.enqueue(ScriptedReply.error(400, "bad stream"))

    with pytest.raises(openai.BadRequestError):
        await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)


async def test_error_reply_headers(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Extra headers on a reply reach the client's response."""
    server.enqueue(ScriptedReply.error(429, "slow down", headers={"retry-after-ms": "5"}))

    with pytest.raises(openai.RateLimitError) as caught:
        await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert caught.value.response.headers["retry-after-ms"] == "5"


async def test_dropped_stream_raises_in_client(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A stream cut off after a few chunks raises a connection error in the client."""
    server.enqueue(ScriptedReply.text("This stream will not finish.", drop_after=3))
    received: list[ChatCompletionChunk] = []

    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async with stream:
            async for chunk in stream:
                received.append(chunk)

    assert len(received) == 3


async def test_dropped_response_before_headers(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """``drop_after=0`` closes the connection without a response."""
    server.enqueue(ScriptedReply.text("never sent", drop_after=0))

    with pytest.raises(openai.APIConnectionError):
        await client.chat.completions.create(model=MODEL, messages=MESSAGES)


async def test_client_recovers_after_a_drop(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """After a dropped stream the next request is served."""
    server.enqueue(ScriptedReply.text("cut", drop_after=1), ScriptedReply.text("fine"))
    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    with pytest.raises(openai.APIConnectionError):
        async with stream:
            async for _ in stream:
                pass

    completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert completion.choices[0].message.content == "fine"
    assert len(server.requests) == 2


async def test_pause_gate_holds_the_rest_of_the_stream(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The first chunks reach the client while the gate is closed; the rest follow once open."""
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("Hello there", chunk_size=4, pause_after=2, gate=gate))

    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    async with stream:
        iterator = aiter(stream)
        first = await anext(iterator)
        second = await anext(iterator)
        assert first.choices[0].delta.role == "assistant"
        assert second.choices[0].delta.content == "Hell"
        assert not gate.is_set()
        gate.set()
        rest = [chunk async for chunk in iterator]

    assert "".join(c.choices[0].delta.content or "" for c in rest) == "o there"
    assert rest[-1].choices[0].finish_reason == "stop"
    assert not server.requests[0].disconnected


async def test_abandoned_stream_is_detected(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Closing a stream early is noticed by the server."""
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("A long answer", pause_after=2, gate=gate))

    stream = await client.chat.completions.create(model=MODEL, messages=MESSAGES, stream=True)
    async with stream:
        await anext(aiter(stream))

    async with asyncio.timeout(5):
        request = await server.wait_disconnected(0)
    assert request.disconnected
    assert not gate.is_set()


async def test_hold_delays_the_answer_until_released(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A held reply is not answered before the test sets its event."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("finally", hold=hold))

    async with asyncio.TaskGroup() as tasks:
        call = tasks.create_task(client.chat.completions.create(model=MODEL, messages=MESSAGES))
        async with asyncio.timeout(5):
            await server.wait_for_request(0)
        assert not call.done()
        hold.set()

    assert call.result().choices[0].message.content == "finally"


async def test_client_timeout_on_a_hung_server(server: ScriptedOpenAIServer) -> None:
    """A reply held for ever makes the client time out, and the server sees it go away."""
    server.enqueue(ScriptedReply.text("never", hold=asyncio.Event()))

    client = server.client(timeout=0.2)
    with pytest.raises(openai.APITimeoutError):
        await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    async with asyncio.timeout(5):
        await server.wait_disconnected(0)


# Script bookkeeping.


async def test_sync_responder(client: openai.AsyncOpenAI) -> None:
    """A plain responder function decides the reply from the recorded request."""

    def echo(request: RecordedRequest) -> ScriptedReply:
        return ScriptedReply.text(f"echo: {request.messages[-1]['content']}")

    async with (
        ScriptedOpenAIServer(responder=echo) as server,
        server.client() as client,
    ):
        completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)
        chunks = await collect(client)

    assert completion.choices[0].message.content == "echo: What's the weather in Paris?"
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == (
        "echo: What's the weather in Paris?"
    )
    server.assert_done()


async def test_async_responder_after_the_queue() -> None:
    """Queued replies come first; an async responder answers once the queue is empty."""

    async def summarise(request: RecordedRequest) -> ScriptedReply:
        await asyncio.sleep(0)
        return ScriptedReply.text(f"summary of {len(request.messages)} messages")

    async with (
        ScriptedOpenAIServer([ScriptedReply.text("scripted")], responder=summarise) as server,
        server.client() as client,
    ):
        first = await client.chat.completions.create(model=MODEL, messages=MESSAGES)
        second = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert first.choices[0].message.content == "scripted"
    assert second.choices[0].message.content == "summary of 2 messages"
    server.assert_done()


async def test_failing_responder_is_reported() -> None:
    """A responder that raises answers HTTP 500 and makes ``assert_done`` fail."""

    def broken(request: RecordedRequest) -> ScriptedReply:
        raise RuntimeError("no idea")

    async with (
        ScriptedOpenAIServer(responder=broken) as server,
        server.client() as client,
    ):
        with pytest.raises(openai.InternalServerError):
            await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    with pytest.raises(AssertionError, match="responder raised RuntimeError"):
        server.assert_done()


async def test_exhausted_script(server: ScriptedOpenAIServer, client: openai.AsyncOpenAI) -> None:
    """A request beyond the script gets HTTP 500 and makes ``assert_done`` fail."""
    with pytest.raises(openai.InternalServerError, match="unexpected request: script exhausted"):
        await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    with pytest.raises(AssertionError, match="script exhausted"):
        server.assert_done()


async def test_leftover_replies(server: ScriptedOpenAIServer) -> None:
    """Replies still queued make ``assert_done`` fail and are named in the message."""
    server.enqueue(ScriptedReply.text("never asked for"), ScriptedReply.error(500, "boom"))

    with pytest.raises(AssertionError, match=r"2 scripted replies were not used.*never asked"):
        server.assert_done()


async def test_recorded_requests(server: ScriptedOpenAIServer, client: openai.AsyncOpenAI) -> None:
    """Each request is recorded with its path, headers, messages and tools."""
    server.enqueue(ScriptedReply.text("ok"), ScriptedReply.text("ok"))

    await client.chat.completions.create(model=MODEL, messages=MESSAGES, tools=[WEATHER_TOOL])
    await collect(client, include_usage=True)

    first, second = server.requests
    assert (first.index, first.method, first.path) == (0, "POST", "/v1/chat/completions")
    assert first.headers["authorization"] == "Bearer test"
    assert first.headers["content-type"] == "application/json"
    assert first.model == MODEL
    assert first.messages == MESSAGES
    assert first.tools == [WEATHER_TOOL]
    assert not first.is_stream
    assert json.loads(first.raw_body) == first.body
    assert second.is_stream
    assert second.include_usage
    assert second.tools == []
    assert not first.disconnected
    assert not second.disconnected


async def test_a_client_of_your_own_on_the_transport(server: ScriptedOpenAIServer) -> None:
    """``transport`` serves any ``httpx2`` client, and a base URL without ``/v1`` too."""
    server.enqueue(ScriptedReply.text("root"))
    http = httpx2.AsyncClient(transport=server.transport)

    async with openai.AsyncOpenAI(
        base_url="http://models.example/", api_key="test", max_retries=0, http_client=http
    ) as client:
        completion = await client.chat.completions.create(model=MODEL, messages=MESSAGES)

    assert completion.choices[0].message.content == "root"
    assert server.requests[0].path == "/chat/completions"


async def test_unknown_endpoint(server: ScriptedOpenAIServer, client: openai.AsyncOpenAI) -> None:
    """Any other endpoint gets a 404 in OpenAI's error shape and is reported as unexpected."""
    server.enqueue(ScriptedReply.text("kept for chat"))

    with pytest.raises(openai.NotFoundError) as caught:
        await client.models.list()

    assert caught.value.code == "unknown_url"
    assert server.requests[0].path == "/v1/models"
    with pytest.raises(AssertionError, match=r"GET /v1/models\): no such endpoint"):
        server.assert_done()


# Lifecycle.


async def test_closing_closes_the_clients_it_made() -> None:
    """Leaving the server closes the clients it made and leaves no task running."""
    async with ScriptedOpenAIServer() as server:
        client = server.client()

    assert client.is_closed()
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_closed_server_refuses_requests() -> None:
    """After leaving the context a request of a client on its transport fails to connect."""
    async with ScriptedOpenAIServer() as server:
        http = httpx2.AsyncClient(transport=server.transport)

    async with openai.AsyncOpenAI(api_key="t", max_retries=0, http_client=http) as client:
        with pytest.raises(openai.APIConnectionError):
            await client.chat.completions.create(model=MODEL, messages=MESSAGES)


async def test_server_cannot_be_reentered() -> None:
    """A closed server cannot be opened again."""
    server = ScriptedOpenAIServer()
    async with server:
        pass

    with pytest.raises(UsageError, match="entered only once"):
        await server.__aenter__()


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: ScriptedReply.text("x", pause_after=1), id="pause-without-gate"),
        pytest.param(lambda: ScriptedReply.text("x", chunk_size=0), id="zero-chunk-size"),
        pytest.param(lambda: ScriptedReply.text("x", drop_after=-1), id="negative-drop"),
        pytest.param(lambda: ScriptedReply.tool_calls([]), id="no-tool-calls"),
        pytest.param(lambda: ScriptedReply.error(200, "fine"), id="error-below-400"),
        pytest.param(lambda: ScriptedToolCall("f", {"when": object()}), id="bad-arguments"),
        pytest.param(lambda: ScriptedReply.text("x", prompt_tokens=3), id="half-the-usage"),
    ],
)
def test_invalid_scripts_are_rejected(build: Callable[[], object]) -> None:
    """Inconsistent reply options fail when the script is written, not when it is served."""
    with pytest.raises(UsageError):
        build()


def test_tool_call_arguments_are_a_snapshot() -> None:
    """Mutating the dict after creating a call does not change what is sent."""
    arguments = {"city": "Paris"}
    call = ScriptedToolCall("get_weather", arguments)
    arguments["city"] = "Rome"

    assert call.arguments_json == '{"city":"Paris"}'
