"""``ScriptedOpenAIServer``: the server, its script queue and the request routing."""

from __future__ import annotations

import asyncio
import json
from collections import deque
from collections.abc import Iterable
from types import TracebackType
from typing import Any, Self, cast

from asyncsession.exceptions import UsageError

from .chat_wire import chat_completion, chat_stream_events, error_body
from .compaction_wire import COMPACT_PATHS, compacted_body
from .http import (
    BadRequest,
    Connection,
    HttpRequest,
    HttpResponse,
    Outcome,
    State,
    json_response,
    sse_response,
)
from .responses_wire import input_problem, response_body, response_events
from .script import (
    CHAT_COMPLETIONS_PATHS,
    RESPONSES_PATHS,
    RecordedRequest,
    Responder,
    ScriptedError,
    ScriptedReply,
    call_responder,
)

__all__ = ["ScriptedOpenAIServer"]

_PATHS = CHAT_COMPLETIONS_PATHS | RESPONSES_PATHS | COMPACT_PATHS
_CHECKED_INPUT = RESPONSES_PATHS | COMPACT_PATHS


class ScriptedOpenAIServer:
    """An OpenAI-compatible server on ``127.0.0.1`` that follows a script.

    It serves Chat Completions (``POST /v1/chat/completions``) and the Responses API
    (``POST /v1/responses``, JSON or SSE events, with ``context_management`` compaction) and its
    ``POST /v1/responses/compact`` (see ``asyncsession.testing._openai_server.compaction_wire``);
    one script serves them all. Each request takes the next reply from the queue
    ([`enqueue`][asyncsession.testing._openai_server.server.ScriptedOpenAIServer.enqueue]); when the
    queue is empty the ``responder``, if any, decides. With neither, the request fails with HTTP 500
    ("unexpected request: script exhausted") and the failure is recorded, so
    [`assert_done`][asyncsession.testing._openai_server.server.ScriptedOpenAIServer.assert_done]
    raises. Every request is recorded in
    [`requests`][asyncsession.testing._openai_server.server.ScriptedOpenAIServer.requests]. Use it
    as an async context manager: entering binds a free port, leaving closes the listening socket and
    every connection and cancels every task the server started.
    """

    def __init__(
        self,
        replies: Iterable[ScriptedReply] = (),
        *,
        responder: Responder | None = None,
        port: int = 0,
    ) -> None:
        """Create a server; it starts listening when entered.

        Args:
            replies: Replies to answer the first requests with, in order.
            responder: Decides the reply for requests once the queue is empty.
            port: The port to bind on ``127.0.0.1``; ``0`` picks a free one.
        """
        self._replies: deque[ScriptedReply] = deque(replies)
        self._responder = responder
        self._requested_port = port
        self._requests: list[RecordedRequest] = []
        self._failures: list[str] = []
        self._arrived = asyncio.Condition()
        self._connections: set[asyncio.Task[None]] = set()
        self._connection_count = 0
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._state = State.UNOPENED

    async def __aenter__(self) -> Self:
        if self._state is not State.UNOPENED:
            raise UsageError(
                f"This ScriptedOpenAIServer is {self._state.value}; it can be entered only once"
            )
        self._server = await asyncio.start_server(
            self._on_connect, "127.0.0.1", self._requested_port
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        self._state = State.OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening, close every connection and wait for the server's tasks to end."""
        if self._state is State.CLOSED:
            return
        self._state = State.CLOSED
        if self._server is None:
            return
        self._server.close()
        tasks = list(self._connections)
        for task in tasks:
            task.cancel()
        # Handlers end on cancellation; any other outcome has been recorded as a failure.
        await asyncio.gather(*tasks, return_exceptions=True)
        await self._server.wait_closed()

    @property
    def port(self) -> int:
        """The port the server listens on."""
        if self._port is None:
            raise UsageError("The server has no port until it is entered (async with ...)")
        return self._port

    @property
    def base_url(self) -> str:
        """The ``base_url`` for ``openai.AsyncOpenAI``, ending in ``/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request received so far, in arrival order."""
        return list(self._requests)

    @property
    def failures(self) -> list[str]:
        """Why requests could not be answered from the script (what
        [`assert_done`][asyncsession.testing._openai_server.server.ScriptedOpenAIServer.assert_done]
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

    def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        # A plain callback, not a coroutine, so the task is tracked before it can run; a
        # connection accepted after aclose() began is refused.
        if self._state is not State.OPEN:
            writer.transport.abort()
            return
        connection = Connection(self._connection_count, reader, writer)
        self._connection_count += 1
        task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: Connection) -> None:
        abort = True
        try:
            while await self._exchange(connection):
                pass
            abort = False
        except Exception as exc:  # A bug in this server: surface it through assert_done().
            self._failures.append(f"server error: {exc!r}")
        finally:
            await connection.close(abort=abort)

    async def _exchange(self, connection: Connection) -> bool:
        """Read one request and answer it; ``True`` to keep the connection open."""
        try:
            raw = await connection.read_request()
        except BadRequest as exc:
            self._failures.append(f"malformed HTTP request: {exc.message}")
            failure = ScriptedError(
                status_code=exc.status, message=exc.message, type="invalid_request_error"
            )
            response = json_response(exc.status, error_body(failure), keep_alive=False)
            await connection.send(response, None)
            return False
        if raw is None:
            return False
        recorded = await self._record(connection.number, raw)
        reply = await self._choose(raw, recorded)
        return await self._answer(connection, raw, recorded, reply)

    async def _record(self, connection: int, raw: HttpRequest) -> RecordedRequest:
        try:
            parsed: object = json.loads(raw.body) if raw.body else {}
        except ValueError:
            parsed = None
        recorded = RecordedRequest(
            index=len(self._requests),
            connection=connection,
            method=raw.method,
            path=raw.target.split("?", 1)[0],
            headers=raw.headers,
            raw_body=raw.body,
            body=cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {},
        )
        async with self._arrived:
            self._requests.append(recorded)
            self._arrived.notify_all()
        return recorded

    async def _choose(self, raw: HttpRequest, recorded: RecordedRequest) -> ScriptedReply:
        """The reply for a request: scripted, from the responder, or an error it has earned."""
        where = f"request {recorded.index} ({recorded.method} {recorded.path})"
        if recorded.method != "POST" or recorded.path not in _PATHS:
            self._failures.append(f"unexpected {where}: no such endpoint")
            return ScriptedReply.error(
                404, f"Invalid URL ({recorded.method} {recorded.path})", code="unknown_url"
            )
        if not recorded.body:
            self._failures.append(f"{where}: the body is empty or not a JSON object")
            return ScriptedReply.error(400, "The request body must be a JSON object.")
        problem = input_problem(recorded) if recorded.path in _CHECKED_INPUT else None
        if problem is not None:
            self._failures.append(f"{where}: the API would reject the input: {problem}")
            return ScriptedReply.error(400, problem)
        if self._replies:
            return self._replies.popleft()
        if self._responder is not None:
            try:
                produced = await call_responder(self._responder, recorded)
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
        self,
        connection: Connection,
        raw: HttpRequest,
        recorded: RecordedRequest,
        reply: ScriptedReply,
    ) -> bool:
        """Send the reply while watching for the client to go away; ``True`` to keep alive."""
        async with asyncio.TaskGroup() as tasks:
            sending = tasks.create_task(self._send_reply(connection, raw, recorded, reply))
            watching = tasks.create_task(connection.wait_peer_closed())
            sending.add_done_callback(lambda _: watching.cancel())
            watching.add_done_callback(lambda _: sending.cancel())
        outcome = Outcome.DISCONNECTED if sending.cancelled() else sending.result()
        if outcome is Outcome.DISCONNECTED:
            # The server is the only writer of this flag; tests only read and await it.
            recorded._disconnected.set()  # pyright: ignore[reportPrivateUsage]
        return outcome is Outcome.KEEP_ALIVE

    async def _send_reply(
        self,
        connection: Connection,
        raw: HttpRequest,
        recorded: RecordedRequest,
        reply: ScriptedReply,
    ) -> Outcome:
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        keep_alive = raw.keep_alive
        if reply.api_error is not None:
            response = json_response(
                reply.api_error.status_code,
                error_body(reply.api_error),
                keep_alive=keep_alive,
                head_only=raw.method == "HEAD",
                extra=reply.headers,
            )
        elif recorded.path in COMPACT_PATHS:
            body = compacted_body(recorded)
            response = json_response(200, body, keep_alive=keep_alive, extra=reply.headers)
        elif recorded.path in RESPONSES_PATHS:
            response = self._responses_reply(raw, recorded, reply)
        elif recorded.is_stream:
            response = sse_response(
                chat_stream_events(recorded, reply),
                keep_alive=keep_alive,
                chunked=raw.version == "HTTP/1.1",
                extra=reply.headers,
            )
        else:
            body = chat_completion(recorded, reply).model_dump_json().encode()
            response = json_response(200, body, keep_alive=keep_alive, extra=reply.headers)
        return await connection.send(response, reply)

    def _responses_reply(
        self, raw: HttpRequest, recorded: RecordedRequest, reply: ScriptedReply
    ) -> HttpResponse:
        keep_alive = raw.keep_alive
        if recorded.is_stream:
            return sse_response(
                response_events(recorded, reply),
                keep_alive=keep_alive,
                chunked=raw.version == "HTTP/1.1",
                extra=reply.headers,
            )
        if reply.outcome == "error":
            failure = ScriptedError(
                status_code=500, message="The scripted response failed.", type="server_error"
            )
            return json_response(500, error_body(failure), keep_alive=keep_alive)
        body = response_body(recorded, reply)
        return json_response(200, body, keep_alive=keep_alive, extra=reply.headers)
