"""The FastAPI example: SSE streaming of chat turns, against the scripted model."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from chat_support import assert_no_leaks, stored
from example_support import ALICE, assert_problem, read_sse, serving
from fastapi_app import CHAT_APIS, create_app

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from asyncsession.testing._mongo_server import LocalMongoServer


@pytest.fixture
async def http(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> AsyncIterator[httpx.AsyncClient]:
    """The example under uvicorn on a loopback port, on the scripted server, and a client."""
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        yield client


async def test_the_stream_endpoint_sends_deltas_then_the_stored_reply(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """SSE deltas add up to the reply; ``done`` carries it and the stored event ids; every
    event has an increasing id; the headers tell proxies not to cache or buffer."""
    server.enqueue(ScriptedReply.text("Hello Alice!", chunk_size=3))

    response, sent = await read_sse(http, "/sessions/s1/stream", "Hi")

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert [event.id for event in sent] == [str(n) for n in range(1, len(sent) + 1)]
    assert "".join(e.json()["text"] for e in sent if e.event == "delta") == "Hello Alice!"
    done = sent[-1]
    assert done.event == "done"
    assert done.json()["text"] == "Hello Alice!"
    ids = [e.id for e in await service.get_events("s1")]
    assert done.json()["request_event_ids"] + done.json()["response_event_ids"] == ids
    assert await stored(service, "s1") == ["U:Hi", "A:Hello Alice!"]


async def test_multi_line_text_survives_the_sse_framing(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """Newlines, blank lines and carriage returns in the reply reach the client unchanged."""
    text = "line one\nline two\n\n data: not an event\r\nend"
    server.enqueue(ScriptedReply.text(text, chunk_size=4))

    _, sent = await read_sse(http, "/sessions/s1/stream", "Hi")

    assert "".join(e.json()["text"] for e in sent if e.event == "delta") == text
    assert sent[-1].json()["text"] == text


async def test_a_follow_up_sees_the_streamed_turn(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """The second request's prompt holds the system prompt, the first turn and the new message."""
    server.enqueue(ScriptedReply.text("Noted."), ScriptedReply.text("Blue."))

    await read_sse(http, "/sessions/s1/stream", "I like blue.")
    await read_sse(http, "/sessions/s1/stream", "Favourite colour?")

    assert [m["content"] for m in server.requests[1].messages] == [
        "You are a concise, helpful assistant.",
        "I like blue.",
        "Noted.",
        "Favourite colour?",
    ]
    history = await http.get("/sessions/s1/messages", headers=ALICE)
    assert [m["content"] for m in history.json()] == [
        "I like blue.",
        "Noted.",
        "Favourite colour?",
        "Blue.",
    ]


async def test_tool_calls_stream_as_events_and_the_loop_completes(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """A tool call shows up as an event, the tool runs, and the final round streams on."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("current_time", {"timezone": "Asia/Tokyo"})]),
        ScriptedReply.text("It is evening in Tokyo."),
    )

    _, sent = await read_sse(http, "/sessions/s1/stream", "Time?")

    calls = [e.json() for e in sent if e.event == "tool_call"]
    assert [call["name"] for call in calls] == ["current_time"]
    assert sent[-1].json()["text"] == "It is evening in Tokyo."
    assert server.requests[1].messages[-1]["role"] == "tool"


async def test_another_users_session_is_forbidden_before_streaming(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """A foreign user gets a 403 status, not a stream; the model is never called."""
    server.enqueue(ScriptedReply.text("mine"))
    await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=ALICE)

    response = await http.post(
        "/sessions/s1/stream", json={"message": "Hi"}, headers={"x-user-id": "mallory"}
    )

    assert response.status_code == 403
    assert_problem(response, 403, "AccessDenied")
    assert len(server.requests) == 1
    peek = await http.get("/sessions/s1/messages", headers={"x-user-id": "mallory"})
    assert peek.status_code == 403
    send = await http.post(
        "/sessions/s1/messages", json={"message": "Hi"}, headers={"x-user-id": "mallory"}
    )
    assert send.status_code == 403


async def test_a_model_error_is_a_bad_gateway(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The model's HTTP error becomes a 502 problem with its status; the user message stays
    stored."""
    server.enqueue(ScriptedReply.error(429, "slow down"))

    response = await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=ALICE)

    body = assert_problem(response, 502, "ChatError")
    assert body["upstream_status"] == 429
    assert await stored(service, "s1") == ["U:Hi"]


async def test_a_model_error_on_the_stream_is_an_error_event_with_the_problem(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The stream has started (a ping at once), so the model's 429 is an ``error`` event
    carrying the same problem document as the JSON endpoint's 502."""
    server.enqueue(ScriptedReply.error(429, "slow down"))

    response, sent = await read_sse(http, "/sessions/s1/stream", "Hi")

    assert response.status_code == 200
    assert [event.event for event in sent] == ["error"]
    error = sent[0].json()
    assert error["status"] == 502
    assert error["type"] == "urn:asyncsession:error:ChatError"
    assert error["upstream_status"] == 429
    assert error["instance"] == "/sessions/s1/stream"
    assert set(error) >= {"type", "title", "status", "detail", "instance"}
    assert await stored(service, "s1") == ["U:Hi"]


@pytest.mark.parametrize(
    ("body", "headers"),
    [
        pytest.param({"message": ""}, ALICE, id="empty-message"),
        pytest.param({"text": "Hi"}, ALICE, id="wrong-field"),
        pytest.param({"message": "Hi"}, {}, id="no-user"),
        pytest.param({"message": "Hi"}, {"x-user-id": ""}, id="blank-user"),
    ],
)
@pytest.mark.parametrize("path", ["/sessions/s1/stream", "/sessions/s1/messages"])
async def test_bad_input_is_unprocessable(
    path: str,
    body: dict[str, Any],
    headers: dict[str, str],
    server: ScriptedOpenAIServer,
    http: httpx.AsyncClient,
) -> None:
    """A malformed body or a missing user is a 422; the model is never called."""
    response = await http.post(path, json=body, headers=headers)

    assert response.status_code == 422, response.text
    assert server.requests == []


async def test_a_failure_mid_stream_is_an_error_event(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The model's stream breaks after some deltas: the stream ends with an ``error`` event
    (a bad gateway), after the deltas sent so far; no partial reply is stored."""
    server.enqueue(ScriptedReply.text("A long answer that breaks", chunk_size=3, drop_after=3))

    response, sent = await read_sse(http, "/sessions/s1/stream", "Hi")

    assert response.status_code == 200
    assert [e.event for e in sent][-1] == "error"
    assert "delta" in [e.event for e in sent]
    error = sent[-1].json()
    assert error["type"] == "urn:asyncsession:error:ChatError"
    assert error["status"] == 502
    assert await stored(service, "s1") == ["U:Hi"]


async def test_a_silent_model_gets_keep_alive_pings(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """While the model pauses mid-stream, the response carries ``: ping`` comments (ignored by
    SSE clients) at the app's interval, then the rest of the reply."""
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("Slow but sure", chunk_size=4, pause_after=2, gate=gate))
    app = create_app(openai_client, model="gpt-test", service=service, ping_seconds=0.05)
    lines: list[str] = []
    async with (
        serving(app) as client,
        client.stream(
            "POST", "/sessions/s1/stream", json={"message": "Hi"}, headers=ALICE
        ) as response,
    ):
        async for line in response.aiter_lines():
            lines.append(line)
            pings_after_delta = (
                lines[lines.index("event: delta") :] if "event: delta" in lines else []
            )
            if pings_after_delta.count(": ping") == 3:
                gate.set()

    first_delta = lines.index("event: delta")
    assert lines[first_delta:].count(": ping") >= 3
    assert lines.index("event: done") > max(i for i, line in enumerate(lines) if line == ": ping")
    assert await stored(service, "s1") == ["U:Hi", "A:Slow but sure"]


async def test_the_messages_endpoint_answers_with_json(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """The non-streaming endpoint returns the reply and the ids of the stored events."""
    server.enqueue(ScriptedReply.text("Hello."))

    response = await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=ALICE)

    body = response.json()
    assert body["text"] == "Hello."
    assert len(body["request_event_ids"]) == len(body["response_event_ids"]) == 1
    assert (await http.get("/sessions/none/messages", headers=ALICE)).status_code == 404


async def test_a_retried_post_with_an_idempotency_key_is_answered_from_the_log(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The same ``Idempotency-Key`` twice, on either endpoint: one model call, one stored
    turn, the same reply and event ids."""
    server.enqueue(ScriptedReply.text("Only once."))
    key = {**ALICE, "idempotency-key": "k-1"}

    first = await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=key)
    again = await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=key)
    _, streamed = await read_sse(http, "/sessions/s1/stream", "Hi", headers=key)

    assert again.json() == first.json()
    assert streamed[-1].event == "done"
    assert streamed[-1].json() == first.json()
    assert "".join(e.json()["text"] for e in streamed if e.event == "delta") == "Only once."
    assert len(server.requests) == 1
    assert await stored(service, "s1") == ["U:Hi", "A:Only once."]


async def test_an_idempotency_key_sent_again_with_another_message_is_a_422(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The same key with another message is a 422 problem (``RequestIdReused``), an ``error``
    event on the stream: no model call, nothing stored."""
    server.enqueue(ScriptedReply.text("Paris."))
    key = {**ALICE, "idempotency-key": "k-1"}
    await http.post("/sessions/s1/messages", json={"message": "France?"}, headers=key)

    response = await http.post("/sessions/s1/messages", json={"message": "Spain?"}, headers=key)
    _, streamed = await read_sse(http, "/sessions/s1/stream", "Spain?", headers=key)

    assert_problem(response, 422, "RequestIdReused")
    assert streamed[-1].event == "error"
    problem = streamed[-1].json()
    assert (problem["status"], problem["type"]) == (422, "urn:asyncsession:error:RequestIdReused")
    assert len(server.requests) == 1
    assert await stored(service, "s1") == ["U:France?", "A:Paris."]


async def test_a_retry_after_a_failed_attempt_runs_the_turn_once_more(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """A 502 first, then the retry with the same key: the model is called again and the user
    message is stored once."""
    server.enqueue(ScriptedReply.error(500, "boom"), ScriptedReply.text("Recovered."))
    key = {**ALICE, "idempotency-key": "k-1"}

    failed = await http.post("/sessions/s1/messages", json={"message": "Hi"}, headers=key)
    _, streamed = await read_sse(http, "/sessions/s1/stream", "Hi", headers=key)

    assert failed.status_code == 502
    assert streamed[-1].json()["text"] == "Recovered."
    assert len(server.requests) == 2
    assert await stored(service, "s1") == ["U:Hi", "A:Recovered."]


async def test_a_client_that_disconnects_abandons_the_stream(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Over a real socket: a client leaving mid-stream closes the model's stream, keeps the user
    message and stores no partial reply."""
    gate = asyncio.Event()
    server.enqueue(
        ScriptedReply.text("A long, slow answer", chunk_size=2, pause_after=3, gate=gate)
    )
    try:
        async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
            async with client.stream(
                "POST", "/sessions/s1/stream", json={"message": "Tell me"}, headers=ALICE
            ) as response:
                async for line in response.aiter_lines():
                    if line.startswith("event: delta"):
                        break
            async with asyncio.timeout(5):
                await server.wait_disconnected(0)
    finally:
        gate.set()

    assert await stored(service, "s1") == ["U:Tell me"]
    assert_no_leaks()


async def test_a_killed_database_is_a_fast_503_with_retry_after_then_recovers(
    private_mongo_server: LocalMongoServer,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Kill the MongoDB server under the running app: every endpoint answers 503 with
    ``Retry-After`` within the store's bound, the model is never called; after a restart the
    same app serves the session again with its history."""
    server.enqueue(ScriptedReply.text("First."), ScriptedReply.text("Second."))
    database = private_mongo_server
    async with MongoSessionRepository.from_uri(
        database.uri(), "app", serverSelectionTimeoutMS=1000
    ) as repository:
        await repository.ensure_indexes()
        app = create_app(openai_client, model="gpt-test", service=DefaultSessionService(repository))
        async with serving(app) as client:
            ok = await client.post("/sessions/s1/messages", json={"message": "Hi"}, headers=ALICE)
            assert ok.status_code == 200

            database.kill()
            for method, path in [
                ("POST", "/sessions/s1/messages"),
                ("POST", "/sessions/s1/stream"),
                ("GET", "/sessions/s1/messages"),
            ]:
                started = time.monotonic()
                body = {"message": "Again"} if method == "POST" else None
                response = await client.request(method, path, json=body, headers=ALICE)
                assert time.monotonic() - started < 1.0 + 2.0
                assert response.status_code == 503, response.text
                assert response.headers["retry-after"] == "5"
                body = assert_problem(response, 503, "StorageUnavailable")
                assert "127.0.0.1" not in response.text
                assert str(database.port) not in response.text
                assert "Topology" not in response.text
            assert len(server.requests) == 1

            database.start()
            again = await client.post(
                "/sessions/s1/messages", json={"message": "Again"}, headers=ALICE
            )
    assert again.status_code == 200
    assert again.json()["text"] == "Second."
    assert [m["content"] for m in server.requests[1].messages][-3:] == ["Hi", "First.", "Again"]


@pytest.fixture
async def responses_http(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> AsyncIterator[httpx.AsyncClient]:
    """The example switched to the Responses API (what ``--api responses`` selects)."""
    app = create_app(
        openai_client, model="gpt-test", service=service, chat_api=CHAT_APIS["responses"]
    )
    async with serving(app) as client:
        yield client


async def test_the_example_runs_on_the_responses_api(
    server: ScriptedOpenAIServer, responses_http: httpx.AsyncClient
) -> None:
    """With the Responses client, the stream, the tool loop and the history work the same: the
    requests go to ``/v1/responses`` and the second turn's input replays the first turn."""
    server.enqueue(
        ScriptedReply.text("Noted.", chunk_size=2),
        ScriptedReply.tool_calls([ScriptedToolCall("current_time", {"timezone": "Asia/Tokyo"})]),
        ScriptedReply.text("Evening in Tokyo."),
    )

    _, first = await read_sse(responses_http, "/sessions/s1/stream", "I like blue.")
    _, second = await read_sse(responses_http, "/sessions/s1/stream", "Time in Tokyo?")

    assert first[-1].event == "done"
    assert first[-1].json()["text"] == "Noted."
    assert "".join(e.json()["text"] for e in first if e.event == "delta") == "Noted."
    assert [e.json()["name"] for e in second if e.event == "tool_call"] == ["current_time"]
    assert second[-1].json()["text"] == "Evening in Tokyo."
    assert {request.path for request in server.requests} == {"/v1/responses"}
    replayed = [item.get("content") for item in server.requests[1].input if "role" in item]
    assert "I like blue." in str(replayed)
    assert "Noted." in str(replayed)
    history = await responses_http.get("/sessions/s1/messages", headers=ALICE)
    assert [m["content"] for m in history.json() if m["role"] in ("user", "assistant")][:2] == [
        "I like blue.",
        "Noted.",
    ]
