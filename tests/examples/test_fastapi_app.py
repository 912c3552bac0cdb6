"""The FastAPI example: SSE streaming through the session advisors, against the scripted server."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from chat_support import assert_no_leaks, stored
from fastapi_app import create_app

from asyncsession import DefaultSessionService
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

ALICE = {"x-user-id": "alice"}


@pytest.fixture
async def http(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(openai_client, model="gpt-test", service=service)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
        yield client


def events(body: str) -> list[tuple[str, dict[str, Any]]]:
    """The (event, data) pairs of an SSE body."""
    parsed: list[tuple[str, dict[str, Any]]] = []
    for block in body.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        parsed.append((lines["event"], json.loads(lines["data"])))
    return parsed


async def test_the_stream_endpoint_sends_deltas_then_the_stored_reply(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """SSE deltas add up to the reply; ``done`` carries it and the stored event ids."""
    server.enqueue(ScriptedReply.text("Hello Alice!", chunk_size=3))

    response = await http.post("/sessions/s1/stream", json={"message": "Hi"}, headers=ALICE)

    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    sent = events(response.text)
    assert "".join(data["text"] for name, data in sent if name == "delta") == "Hello Alice!"
    name, done = sent[-1]
    assert name == "done"
    assert done["text"] == "Hello Alice!"
    ids = [e.id for e in await service.get_events("s1")]
    assert done["request_event_ids"] + done["response_event_ids"] == ids
    assert await stored(service, "s1") == ["U:Hi", "A:Hello Alice!"]


async def test_a_follow_up_sees_the_streamed_turn(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """The second request's prompt holds the system prompt, the first turn and the new message."""
    server.enqueue(ScriptedReply.text("Noted."), ScriptedReply.text("Blue."))

    await http.post("/sessions/s1/stream", json={"message": "I like blue."}, headers=ALICE)
    await http.post("/sessions/s1/stream", json={"message": "Favourite colour?"}, headers=ALICE)

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

    response = await http.post("/sessions/s1/stream", json={"message": "Time?"}, headers=ALICE)

    sent = events(response.text)
    assert ("tool_call", {"name": "current_time", "id": sent[0][1]["id"]}) in sent
    assert sent[-1][1]["text"] == "It is evening in Tokyo."
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
    assert len(server.requests) == 1
    peek = await http.get("/sessions/s1/messages", headers={"x-user-id": "mallory"})
    assert peek.status_code == 403


async def test_a_model_error_before_the_first_chunk_is_a_bad_gateway(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """The model's HTTP error becomes a 502 with its status; the user message stays stored."""
    server.enqueue(ScriptedReply.error(429, "slow down"))

    response = await http.post("/sessions/s1/stream", json={"message": "Hi"}, headers=ALICE)

    assert response.status_code == 502
    assert response.json()["detail"]["status"] == 429
    assert await stored(service, "s1") == ["U:Hi"]


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
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    app = create_app(openai_client, model="gpt-test", service=service)
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
    serving = asyncio.create_task(web.serve(sockets=[listener]))
    try:
        async with (
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
            client.stream(
                "POST", "/sessions/s1/stream", json={"message": "Tell me"}, headers=ALICE
            ) as response,
        ):
            async for line in response.aiter_lines():
                if line.startswith("event: delta"):
                    break
        async with asyncio.timeout(5):
            await server.wait_disconnected(0)
    finally:
        gate.set()
        web.should_exit = True
        await serving
        listener.close()

    assert await stored(service, "s1") == ["U:Tell me"]
    assert_no_leaks()
