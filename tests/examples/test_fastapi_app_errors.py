"""The FastAPI example's errors, through a real HTTP client and uvicorn: one problem shape."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from chat_support import stored
from example_support import ALICE, assert_problem, read_sse, serving
from fastapi_app import BODY_LIMIT, create_app

from asyncsession import (
    DefaultSessionService,
    InMemorySessionRepository,
    Session,
    TurnInProgress,
    UserMessage,
)
from asyncsession.encryption import EncryptionOptions
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

TEN_MB = 10 * 1024 * 1024


@pytest.fixture
async def http(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        yield client


@pytest.mark.parametrize("path", ["/sessions/{}/stream", "/sessions/{}/messages"])
async def test_a_300_character_session_id_is_unprocessable_and_not_echoed(
    path: str, server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """A session id over 128 characters is a 422 problem naming the path parameter; the id is
    nowhere in the body and the model is never called."""
    session_id = "q" * 300

    response = await http.post(path.format(session_id), json={"message": "Hi"}, headers=ALICE)

    body = assert_problem(response, 422)
    assert [error["loc"] for error in body["errors"]] == [["path", "session_id"]]
    assert "q" * 129 not in response.text
    assert server.requests == []


@pytest.mark.parametrize(
    ("body", "headers", "locations"),
    [
        pytest.param({"message": ["secret-words"]}, ALICE, [["body", "message"]], id="wrong-type"),
        pytest.param(
            {"message": "Hi", "extra": "secret-words"}, ALICE, [["body", "extra"]], id="extra"
        ),
        pytest.param({}, ALICE, [["body", "message"]], id="missing-message"),
        pytest.param({"message": "Hi"}, {}, [["header", "x-user-id"]], id="missing-user"),
        pytest.param(
            {"message": "secret-words " * 3000}, ALICE, [["body", "message"]], id="too-long"
        ),
    ],
)
async def test_bad_input_is_a_422_with_field_locations_and_no_input(
    body: dict[str, Any],
    headers: dict[str, str],
    locations: list[list[str]],
    server: ScriptedOpenAIServer,
    http: httpx.AsyncClient,
) -> None:
    """Wrong types, unknown or missing fields and over-long text are 422 problems whose
    ``errors`` say where and why, never what was sent."""
    response = await http.post("/sessions/s1/messages", json=body, headers=headers)

    problem = assert_problem(response, 422)
    assert [error["loc"] for error in problem["errors"]] == locations
    assert all(set(error) == {"loc", "type", "msg"} for error in problem["errors"])
    assert "secret-words" not in response.text
    assert server.requests == []


async def test_a_body_that_is_not_json_is_a_422_problem(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """Malformed JSON is refused in the same shape, without quoting it."""
    response = await http.post(
        "/sessions/s1/messages",
        content=b'{"message": "secret-words',
        headers={**ALICE, "content-type": "application/json"},
    )

    assert_problem(response, 422)
    assert "secret-words" not in response.text


async def test_the_longest_valid_ids_are_served(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """A 128-character session id with a 200-character idempotency key is a normal turn."""
    server.enqueue(ScriptedReply.text("Fine."))
    session_id = "s" * 128
    headers = {**ALICE, "idempotency-key": "k" * 200}

    response = await http.post(
        f"/sessions/{session_id}/messages", json={"message": "Hi"}, headers=headers
    )

    assert response.status_code == 200, response.text
    assert await stored(service, session_id) == ["U:Hi", "A:Fine."]


async def test_a_10_mb_body_is_refused_with_413_and_not_echoed(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """A 10 MB body with its length declared is a small 413 problem, answered before the body
    is read; the model is never called."""
    payload = b'{"message": "' + b"x" * TEN_MB + b'"}'

    response = await http.post("/sessions/s1/messages", content=payload, headers=ALICE)

    body = assert_problem(response, 413)
    assert str(BODY_LIMIT) in body["detail"]
    assert len(response.content) < 1024
    assert server.requests == []


async def test_a_chunked_10_mb_body_is_refused_once_past_the_limit(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """Without a declared length, the app reads no further than the limit: the client is
    answered 413 while most of the body is still unsent."""
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        yield b'{"message": "'
        while sent < TEN_MB:
            sent += 16 * 1024
            yield b"x" * (16 * 1024)
        yield b'"}'

    try:
        response = await http.post("/sessions/s1/messages", content=chunks(), headers=ALICE)
    except (httpx.WriteError, httpx.ReadError):  # the server closed on the unsent rest
        response = None
    if response is not None:
        assert_problem(response, 413)
        assert len(response.content) < 1024
    assert sent < TEN_MB
    assert server.requests == []


async def test_a_raw_request_over_the_limit_is_answered_before_its_body(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Over a bare socket: headers declaring 10 MB, no body byte sent, and the 413 arrives."""
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        host, port = client.base_url.host, client.base_url.port
        assert port is not None
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(
            b"POST /sessions/s1/messages HTTP/1.1\r\nhost: app\r\nx-user-id: alice\r\n"
            b"content-type: application/json\r\ncontent-length: %d\r\n\r\n" % TEN_MB
        )
        await writer.drain()
        async with asyncio.timeout(10):
            status_line = await reader.readline()
            head = await reader.readuntil(b"\r\n\r\n")
        writer.close()
        await writer.wait_closed()

    assert status_line.startswith(b"HTTP/1.1 413 ")
    assert b"application/problem+json" in head
    assert server.requests == []


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        pytest.param("GET", "/nowhere", 404, id="unknown-route"),
        pytest.param("DELETE", "/sessions/s1/messages", 405, id="wrong-method"),
    ],
)
async def test_unknown_routes_and_methods_are_problems(
    method: str, path: str, status: int, http: httpx.AsyncClient
) -> None:
    """Routing errors come in the same shape as every other error."""
    response = await http.request(method, path, headers=ALICE)

    assert_problem(response, status)


async def test_an_unknown_session_is_a_404_problem(http: httpx.AsyncClient) -> None:
    """Reading a session that does not exist is a 404 problem."""
    response = await http.get("/sessions/none/messages", headers=ALICE)

    assert_problem(response, 404)


class _BrokenRepository(InMemorySessionRepository):
    """A store with a bug: every lookup fails with an error that names internals."""

    async def find_by_id(self, session_id: str) -> Any:
        raise RuntimeError("internal detail: mongodb://db.internal:27017 secret-words")


async def test_an_unexpected_error_is_a_500_problem_without_its_text(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """A bug in the stack is a 500 problem with our own detail; its message stays in the log."""
    service = DefaultSessionService(_BrokenRepository())
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        response = await client.get("/sessions/s1/messages", headers=ALICE)

    body = assert_problem(response, 500)
    assert "secret-words" not in response.text
    assert "27017" not in response.text
    assert body["detail"] == "The server failed to handle the request."


async def test_an_erased_users_session_is_a_410_problem(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """A session whose content was encrypted with a data key that is gone (the user was
    erased) is 410 Gone, with our own detail (no user or key id)."""
    setting = EncryptionOptions.local(EncryptionOptions.generate_local_key())
    repository = InMemorySessionRepository(encryption=setting)
    service = DefaultSessionService(repository)
    await repository.save(Session(id="s1", user_id="alice"))
    await service.append_message("s1", UserMessage(text="my diagnosis"))
    assert repository.keys is not None
    await repository.keys.delete_key("alice")
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        response = await client.get("/sessions/s1/messages", headers=ALICE)

    body = assert_problem(response, 410, "ContentErased")
    assert "diagnosis" not in response.text
    assert body["detail"] == "This session's content was erased: it can never be read again."


async def test_the_stream_opens_before_the_models_first_token(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The model holds its answer: the client has the headers and a ``: ping`` within a second
    and keeps getting pings while the model thinks; the reply follows once it answers, and is
    stored once."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("Thought it through.", hold=hold))
    app = create_app(openai_client, model="gpt-test", service=service, ping_seconds=0.05)
    lines: list[str] = []
    async with serving(app) as client:
        started = time.monotonic()
        async with client.stream(
            "POST", "/sessions/s1/stream", json={"message": "Think hard"}, headers=ALICE
        ) as response:
            assert time.monotonic() - started < 1.0
            assert response.headers["content-type"].startswith("text/event-stream")
            async for line in response.aiter_lines():
                if not lines:
                    assert line == ": ping"
                    assert time.monotonic() - started < 1.0
                lines.append(line)
                if not hold.is_set() and lines.count(": ping") == 4:
                    assert len(server.requests) == 1  # the model has the request, no answer yet
                    assert not any(line.startswith("event:") for line in lines)
                    hold.set()

    assert lines.count(": ping") >= 4
    assert lines.index("event: delta") < lines.index("event: done")
    assert await stored(service, "s1") == ["U:Think hard", "A:Thought it through."]


async def test_an_error_after_the_stream_opened_is_an_error_event_problem(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    """The model fails while the client already has the ping: the stream ends with one
    ``error`` event whose data is the problem document the JSON endpoint answers with."""
    server.enqueue(ScriptedReply.error(500, "secret-words"), ScriptedReply.error(500, "again"))

    response, sent = await read_sse(http, "/sessions/s1/stream", "Hi")
    plain = await http.post("/sessions/s2/messages", json={"message": "Hi"}, headers=ALICE)

    assert response.status_code == 200
    assert [event.event for event in sent] == ["error"]
    streamed = sent[0].json()
    expected = assert_problem(plain, 502, "ChatError")
    assert {k: v for k, v in streamed.items() if k != "instance"} == {
        k: v for k, v in expected.items() if k != "instance"
    }
    assert streamed["instance"] == "/sessions/s1/stream"


class _BusyRepository(InMemorySessionRepository):
    """Every read finds another attempt of the same request holding its turn."""

    def __init__(self, retry_after: float) -> None:
        super().__init__()
        self.retry_after = retry_after

    async def find_by_id(self, session_id: str) -> Any:
        raise TurnInProgress(session_id, "req-1", self.retry_after)


@pytest.mark.parametrize(("retry_after", "header"), [(1.0, "1"), (2.2, "3"), (29.9, "30")])
async def test_a_turn_in_progress_is_a_409_problem_with_retry_after(
    retry_after: float,
    header: str,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Another attempt holding the turn answers 409 with ``Retry-After``: the holder's lease
    in whole seconds, rounded up, so a retry comes no earlier than the stored reply."""
    service = DefaultSessionService(_BusyRepository(retry_after))
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        response = await client.get("/sessions/s1/messages", headers=ALICE)

    body = assert_problem(response, 409, "TurnInProgress")
    assert response.headers["Retry-After"] == header
    assert body["retry_after"] == int(header)
