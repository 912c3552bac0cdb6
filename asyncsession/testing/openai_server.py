"""A scripted, OpenAI-compatible server for tests, reached through the ``openai`` client's own
``httpx`` transport: no socket, no port, no network.

[`ScriptedOpenAIServer`][asyncsession.testing.openai_server.ScriptedOpenAIServer] answers the
real ``openai.AsyncOpenAI`` client, which parses every reply and stream as it would parse
OpenAI's. It serves ``POST /v1/chat/completions`` with the real ``chat.completion`` and
``chat.completion.chunk`` JSON shapes, and ``POST /v1/responses`` with the Responses API's
``response`` JSON and its SSE events (``response.created`` ... ``response.completed``, or
``response.failed`` / ``response.incomplete`` / ``error`` as scripted by
``ScriptedReply.outcome``), answering each request with the next
[`ScriptedReply`][asyncsession.testing.openai_server.ScriptedReply] from its queue, or with
whatever a ``responder`` function returns. Everything else gets a 404 in OpenAI's error shape.

```python
async with ScriptedOpenAIServer() as server:
    client = server.client()  # an openai.AsyncOpenAI whose requests the server answers
    server.enqueue(ScriptedReply.text("Hello there"))
    reply = await client.chat.completions.create(model="gpt-test", messages=[...])
    assert server.requests[0].messages[-1]["content"] == "..."
    server.assert_done()
```

Replies also carry fault and timing controls so tests can synchronise on events instead of
sleeping: ``hold`` (wait for an event before answering), ``pause_after`` + ``gate`` (stream N
chunks, then wait), ``drop_after`` (stream N chunks, then break the connection) and ``delay``.
The client's read timeout bounds each wait, as it would on a network. A client that goes away
mid-response is noticed at once (`ScriptedOpenAIServer.wait_disconnected`).
"""

from __future__ import annotations

import asyncio
import inspect
import json
import secrets
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeVar, cast

import httpx2
import openai

from asyncsession.exceptions import UsageError

from ._openai_server.script import (
    RecordedRequest,
    Responder,
    ScriptedError,
    ScriptedReply,
    ScriptedToolCall,
)
from ._openai_server.wire import (
    chat_completion,
    chat_events,
    compacted_body,
    error_body,
    input_problem,
    response_body,
    response_events,
)

__all__ = [
    "RecordedRequest",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedToolCall",
]

_CHAT, _RESPONSES, _COMPACT = "/chat/completions", "/responses", "/responses/compact"
BASE_URL = "http://scripted-openai.test/v1"
"""The base URL of the clients the server makes; requests never leave the process."""

T = TypeVar("T")


async def _within(awaitable: Awaitable[T], request: httpx2.Request) -> T:
    """``awaitable`` within the request's read timeout, which the SDK reports as a timeout."""
    timeouts = cast(Mapping[str, float | None], request.extensions.get("timeout", {}))
    read = timeouts.get("read")
    try:
        async with asyncio.timeout(read):
            return await awaitable
    except TimeoutError:
        raise httpx2.ReadTimeout("the scripted server did not answer in time") from None


@dataclass
class _Body(httpx2.AsyncByteStream):
    """A response body sent part by part, with the reply's pause and drop controls; a client
    that closes it before its end is recorded as gone."""

    _parts: Sequence[bytes]
    _reply: ScriptedReply
    _recorded: RecordedRequest
    _request: httpx2.Request
    _sent: bool = False

    async def __aiter__(self) -> AsyncIterator[bytes]:
        reply = self._reply
        for position, part in enumerate(self._parts):
            if position == reply.drop_after:
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body"
                )
            if position == reply.pause_after and reply.gate is not None:
                await _within(reply.gate.wait(), self._request)
            yield part
        self._sent = True

    async def aclose(self) -> None:
        if not self._sent:
            # The server is the only writer of this flag; tests only read and await it.
            self._recorded._disconnected.set()  # pyright: ignore[reportPrivateUsage]


class ScriptedOpenAIServer:
    """An OpenAI-compatible server that follows a script, reached through an ``httpx``
    transport (``httpx2.MockTransport``): no socket, no port, the real ``openai`` client.

    One script serves ``POST /v1/chat/completions``, ``POST /v1/responses`` and
    ``POST /v1/responses/compact``. Each request takes the next reply from the queue
    ([`enqueue`][asyncsession.testing.openai_server.ScriptedOpenAIServer.enqueue]); when the
    queue is empty the ``responder``, if any, decides. With neither, the request fails with HTTP
    500 ("unexpected request: script exhausted") and the failure is recorded, so
    [`assert_done`][asyncsession.testing.openai_server.ScriptedOpenAIServer.assert_done]
    raises. Every request is recorded in
    [`requests`][asyncsession.testing.openai_server.ScriptedOpenAIServer.requests].

    Get a client with
    [`client`][asyncsession.testing.openai_server.ScriptedOpenAIServer.client], or give
    [`transport`][asyncsession.testing.openai_server.ScriptedOpenAIServer.transport] to an
    ``httpx2.AsyncClient`` of your own. Use the server as an async context manager: leaving it
    closes the clients it made, and later requests fail to connect.

    Args:
        replies: Replies to answer the first requests with, in order.
        responder: Decides the reply for requests once the queue is empty.
    """

    def __init__(
        self, replies: Iterable[ScriptedReply] = (), *, responder: Responder | None = None
    ) -> None:
        self._replies: deque[ScriptedReply] = deque(replies)
        self._responder = responder
        self._requests: list[RecordedRequest] = []
        self._failures: list[str] = []
        self._arrived = asyncio.Condition()
        self._clients: list[openai.AsyncOpenAI] = []
        self._state: Literal["unopened", "open", "closed"] = "unopened"
        self.transport: httpx2.AsyncBaseTransport = httpx2.MockTransport(self._handle)
        """The transport that serves the script, for an ``httpx2.AsyncClient`` of your own."""

    async def __aenter__(self) -> Self:
        if self._state != "unopened":
            raise UsageError(
                f"This ScriptedOpenAIServer is {self._state}; it can be entered only once"
            )
        self._state = "open"
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the clients the server made; later requests fail to connect."""
        self._state = "closed"
        clients, self._clients = self._clients, []
        for client in clients:
            await client.close()

    @property
    def base_url(self) -> str:
        """The ``base_url`` of the clients the server makes, ending in ``/v1``."""
        return BASE_URL

    def client(self, **options: Any) -> openai.AsyncOpenAI:
        """A real ``openai.AsyncOpenAI`` whose requests this server answers.

        It makes no retries unless ``max_retries`` says so; ``options`` go to
        ``openai.AsyncOpenAI`` (``timeout``, ``max_retries``, ...). The server closes it when
        it is closed.
        """
        settings: dict[str, Any] = {"api_key": "test", "max_retries": 0, **options}
        client = openai.AsyncOpenAI(
            base_url=BASE_URL, http_client=httpx2.AsyncClient(transport=self.transport), **settings
        )
        self._clients.append(client)
        return client

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        return list(self._requests)

    @property
    def failures(self) -> list[str]:
        """Why requests could not be answered from the script (what
        [`assert_done`][asyncsession.testing.openai_server.ScriptedOpenAIServer.assert_done]
        reports)."""
        return list(self._failures)

    def enqueue(self, *replies: ScriptedReply) -> None:
        """Queue replies for the next requests, in order."""
        self._replies.extend(replies)

    def assert_done(self) -> None:
        """Check that every request was expected and every queued reply was used.

        Raises:
            AssertionError: A request was unexpected or failed, or queued replies were not used.
        """
        problems = list(self._failures)
        if self._replies:
            left = ", ".join(reply.describe() for reply in self._replies)
            problems.append(f"{len(self._replies)} scripted replies were not used: {left}")
        if problems:
            raise AssertionError("ScriptedOpenAIServer: " + "; ".join(problems))

    async def wait_for_request(self, index: int) -> RecordedRequest:
        """Wait until the request at ``index`` has arrived (wrap in ``asyncio.timeout``)."""
        if index < 0:
            raise UsageError(f"index must not be negative, not {index!r}")
        async with self._arrived:
            await self._arrived.wait_for(lambda: len(self._requests) > index)
        return self._requests[index]

    async def wait_disconnected(self, index: int) -> RecordedRequest:
        """Wait until the client of request ``index`` went away mid-response.

        Wrap the call in ``asyncio.timeout``: it waits for ever if the client never does.
        """
        request = await self.wait_for_request(index)
        await request.wait_disconnected()
        return request

    async def _handle(self, request: httpx2.Request) -> httpx2.Response:
        if self._state != "open":
            raise httpx2.ConnectError(f"the scripted server is {self._state}")
        recorded = await self._record(request)
        try:
            reply = await self._choose(recorded)
            return await self._answer(request, recorded, reply)
        except (asyncio.CancelledError, httpx2.TimeoutException):  # the client went away
            recorded._disconnected.set()  # pyright: ignore[reportPrivateUsage]
            raise

    async def _record(self, request: httpx2.Request) -> RecordedRequest:
        raw = await request.aread()
        try:
            parsed: object = json.loads(raw) if raw else {}
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            index=len(self._requests),
            method=request.method,
            path=request.url.path,
            headers={key.lower(): value for key, value in request.headers.items()},
            raw_body=raw,
            body=cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {},
        )
        async with self._arrived:
            self._requests.append(recorded)
            self._arrived.notify_all()
        return recorded

    async def _choose(self, recorded: RecordedRequest) -> ScriptedReply:
        """The reply for a request: scripted, from the responder, or an error it has earned."""
        where = f"request {recorded.index} ({recorded.method} {recorded.path})"
        endpoint = recorded.path.removeprefix("/v1")
        if recorded.method != "POST" or endpoint not in (_CHAT, _RESPONSES, _COMPACT):
            self._failures.append(f"unexpected {where}: no such endpoint")
            return ScriptedReply.error(
                404, f"Invalid URL ({recorded.method} {recorded.path})", code="unknown_url"
            )
        if not recorded.body:
            self._failures.append(f"{where}: the body is empty or not a JSON object")
            return ScriptedReply.error(400, "The request body must be a JSON object.")
        problem = input_problem(recorded) if endpoint != _CHAT else None
        if problem is not None:
            self._failures.append(f"{where}: the API would reject the input: {problem}")
            return ScriptedReply.error(400, problem)
        if self._replies:
            return self._replies.popleft()
        if self._responder is not None:
            try:
                produced: object = self._responder(recorded)
                if inspect.isawaitable(produced):
                    produced = await produced
            except Exception as exc:  # The test's responder failed: report it, keep serving.
                self._failures.append(f"{where}: responder raised {exc!r}")
                return ScriptedReply.error(500, f"scripted responder raised {exc!r}")
            if not isinstance(produced, ScriptedReply):
                self._failures.append(f"{where}: responder returned {produced!r}")
                return ScriptedReply.error(500, "scripted responder returned no ScriptedReply")
            return produced
        self._failures.append(f"unexpected {where}: script exhausted")
        return ScriptedReply.error(500, "unexpected request: script exhausted")

    async def _answer(
        self, request: httpx2.Request, recorded: RecordedRequest, reply: ScriptedReply
    ) -> httpx2.Response:
        if reply.hold is not None:
            await _within(reply.hold.wait(), request)
        if reply.delay:
            await _within(asyncio.sleep(reply.delay), request)
        endpoint, status = recorded.path.removeprefix("/v1"), 200
        body, parts = b"", None
        if reply.api_error is not None:
            status, body = reply.api_error.status_code, error_body(reply.api_error)
        elif endpoint == _COMPACT:
            body = compacted_body(recorded)
        elif endpoint == _RESPONSES and recorded.is_stream:
            parts = response_events(recorded, reply)
        elif endpoint == _RESPONSES and reply.outcome == "error":
            failure = ScriptedError(
                status_code=500, message="The scripted response failed.", type="server_error"
            )
            status, body = 500, error_body(failure)
        elif endpoint == _RESPONSES:
            body = response_body(recorded, reply)
        elif recorded.is_stream:
            parts = chat_events(recorded, reply)
        else:
            body = chat_completion(recorded, reply)
        headers = {"x-request-id": f"req_{secrets.token_hex(12)}", **reply.headers}
        if parts is not None:
            headers = {
                "content-type": "text/event-stream; charset=utf-8",
                "cache-control": "no-cache",
                **headers,
            }
        elif reply.drop_after == 0:
            raise httpx2.RemoteProtocolError("server disconnected without sending a response")
        else:
            headers = {"content-type": "application/json", **headers}
            parts = [body]  # sent whole: one part for the pause and drop controls
        stream = _Body(parts, reply, recorded, request)
        return httpx2.Response(status, headers=headers, stream=stream, request=request)
