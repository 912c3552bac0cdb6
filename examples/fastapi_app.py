"""A FastAPI chat service: durable sessions, tools (one needs approval), server-sent events and
idempotent retries.

It starts offline, on a built-in scripted OpenAI-compatible model and an in-memory store, in any
of the usual ways (from a clone, after ``pip install '.[example]'``)::

    uvicorn examples.fastapi_app:app
    uvicorn --factory examples.fastapi_app:create_app
    fastapi run examples/fastapi_app.py
    python examples/fastapi_app.py [--api responses] [--port 8000]

    curl -N -X POST localhost:8000/sessions/s1/stream \\
         -H 'content-type: application/json' -H 'x-user-id: alice' \\
         -H 'idempotency-key: 7f3c' -d '{"message": "What time is it in Tokyo?"}'

Environment:

- ``ASYNCSESSION_EXAMPLE_MODEL``: a real model's name (for example ``gpt-4.1-mini``), called
  through ``openai.AsyncOpenAI()`` (so ``OPENAI_API_KEY`` and optionally ``OPENAI_BASE_URL``).
  Unset: the scripted model, in process, no network.
- ``ASYNCSESSION_EXAMPLE_API``: ``chat`` (Chat Completions, the default) or ``responses``.
- ``MONGODB_URI`` (and ``ASYNCSESSION_EXAMPLE_DB``, default ``asyncsession_example``): sessions
  in MongoDB. Unset: in memory.
- ``ASYNCSESSION_EXAMPLE_PING_SECONDS``: the keep-alive interval of the stream (default 15).

The app's lifespan opens what it owns (the model client, the scripted model, the MongoDB
client) and closes it at shutdown; a client or service passed to `create_app` is borrowed. With
``MONGODB_URI`` it checks MongoDB before serving: a server that does not answer or a malformed
URI stops the start with one logged line (`StartupFailure`), and a non-zero exit.

Endpoints:

- ``POST /sessions/{session_id}/stream``: the reply as server-sent events. The response starts
  at once with a ``: ping`` comment and pings while the model thinks, so proxies with short idle
  timeouts keep it open. Every event has an ``id`` and JSON ``data``: ``delta`` events with
  text, ``tool_call`` events when the model calls a tool, then ``done`` with the whole reply and
  the ids of the stored events, or ``error`` with a problem document (below).
- ``POST /sessions/{session_id}/messages``: the same, as one JSON response.
- ``POST /sessions/{session_id}/approvals``: continue a turn that stopped for approvals. The
  tool ``cancel_order`` needs a person's approval: a turn whose model calls it ends with
  ``pending_approvals`` in its reply (on the stream, an ``approval_required`` event before
  ``done``); this endpoint takes ``{"approve": [call ids], "reject": {call id: reason}}`` and
  answers as ``/messages`` does. Deciding a call that is not waiting is 422.
- ``GET /sessions/{session_id}/messages``: the conversation so far.

The caller's user id comes from the ``x-user-id`` header (a stand-in for real authentication):
a turn creates a new session for that user and refuses anyone else's. Turns of one session run
one after another, across processes; a request that finds another turn of its session running
waits for it, up to a bound (then 409 with ``Retry-After``). A client that may retry sends an
``Idempotency-Key`` header: a retry of a request that completed gets the stored reply (streamed
again on the stream endpoint) without a model call, one still running is waited for, and one
that failed runs again and stores the user message once. The same key with another message is
422.

Every error is an RFC 9457 problem document (``application/problem+json`` with ``type``,
``title``, ``status``, ``detail`` and ``instance``; ``errors`` with field locations for bad
input, never the input itself). Bad input is 422, a body over `BODY_LIMIT` bytes 413, a foreign
user's session 403, an erased user's content 410 (its data key was deleted: gone for good), a
model failure 502, a database that cannot be reached 503 with
``Retry-After`` and no driver details; our typed errors map to statuses in `ERROR_STATUSES`.
A foreign user's session and an unreachable database are found before a stream starts, so they
are HTTP statuses there too; a model failure on the stream is an ``error`` event. A client that
disconnects mid-stream abandons the stream: the model's HTTP stream is closed, the user's
message stays stored and no partial reply is.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at runtime,
# and a dependency defined inside `create_app` cannot be found from a string.
import asyncio
import contextlib
import logging
import math
import os
import re
import sys
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import openai
import pydantic
import pymongo.errors
from fastapi import Depends, FastAPI, Header, HTTPException, Path, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Receive, Scope, Send
from starlette.types import Message as ASGIMessage

from asyncsession import (
    AccessDenied,
    AsyncSessionError,
    ChatChunk,
    ChatError,
    ChatResponse,
    ChatTimeout,
    ContentErased,
    DefaultSessionService,
    EventIdConflict,
    EventTooLarge,
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionExists,
    SessionNotFound,
    SessionService,
    StorageUnavailable,
    SystemMessage,
    ToolCall,
    TurnInProgress,
    UsageError,
    tool,
)
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.testing import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

RETRY_AFTER_SECONDS = 5
"""What a 503 asks the client to wait before retrying."""
BODY_LIMIT = 64 * 1024
"""The largest request body read, in bytes; a larger one is refused with 413 unread."""
PING_SECONDS = 15.0
"""The default keep-alive interval of the stream."""
OFFLINE_MODEL = "scripted-example-model"
"""The model name of the built-in scripted model."""
PROBLEM_JSON = "application/problem+json"
_MAX_INSTANCE = 256
"""A longer request path is not echoed as a problem's ``instance``: a fresh URN is."""

_log = logging.getLogger("uvicorn.error")
"""Where the app says what it serves with and logs unexpected errors: uvicorn's log."""


@tool(needs_approval=True)
def cancel_order(order_id: str) -> str:
    """Cancel one of the customer's orders. A person approves each cancellation first.

    Args:
        order_id: The order's number, such as "A-1001".
    """
    return f"Order {order_id} is cancelled."


@tool
def current_time(timezone: str) -> str:
    """The current time in a timezone.

    Args:
        timezone: An IANA timezone name, such as "Asia/Tokyo".
    """
    return datetime.now(UTC).astimezone(ZoneInfo(timezone)).isoformat(timespec="minutes")


class ChatIn(BaseModel):
    """The body of a chat request."""

    model_config = pydantic.ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=32_000)


class PendingCall(BaseModel):
    """A tool call waiting for a person's approval."""

    id: str
    name: str
    arguments: str


class EditIn(BaseModel):
    """The body of an edit: the message that replaces an earlier one, and, to keep both
    conversations, the id of the fork the new reply goes to."""

    model_config = pydantic.ConfigDict(extra="forbid")

    message: str = Field(min_length=1, max_length=32_000)
    fork_to: str | None = Field(
        default=None, min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$"
    )


class ChatOut(BaseModel):
    """The reply to a chat request."""

    text: str
    request_event_ids: list[str]
    response_event_ids: list[str]
    pending_approvals: list[PendingCall] = []
    """The calls waiting for approval when the turn stopped for them (then ``text`` is
    empty): send decisions to ``/approvals``."""


class DecisionsIn(BaseModel):
    """Decisions on the calls a turn waits for: the ids approved, and those rejected with
    the reason the model is told."""

    model_config = pydantic.ConfigDict(extra="forbid")

    approve: list[Annotated[str, Field(max_length=200)]] = Field(default=[], max_length=64)
    reject: dict[str, Annotated[str, Field(max_length=2_000)]] = Field(default={}, max_length=64)


SessionId = Annotated[str, Path(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9._:@-]+$")]
"""A session id in the path: 1 to 128 letters, digits and ``._:@-``; anything else is 422."""
EventId = Annotated[str, Path(min_length=1, max_length=200)]
"""An event id in the path (as ``request_event_ids`` gave it)."""
UserId = Annotated[str, Header(alias="x-user-id", pattern=r"\S", max_length=128)]
"""The caller's user id: a stand-in for real authentication; blank is refused (422)."""
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key", max_length=200)]
"""The client's id of a request it may retry."""

CHAT_APIS: dict[str, type[ChatClient]] = {"chat": ChatClient, "responses": ResponsesClient}
"""The ``--api`` choices: Chat Completions (the default), or the Responses API (``store=False``:
the session log is the history). Both take the same arguments."""


ERROR_STATUSES: tuple[tuple[type[AsyncSessionError], int], ...] = (
    (AccessDenied, 403),
    (SessionNotFound, 404),
    (ContentErased, 410),
    (SessionExists, 409),
    (TurnInProgress, 409),
    (EventIdConflict, 409),
    (EventTooLarge, 422),
    (UsageError, 422),
    (StorageUnavailable, 503),
    (ChatTimeout, 504),
    (ChatError, 502),
)
"""Our typed errors and their HTTP statuses, the first match wins; anything else is 500 (a
request id sent again with another message, ``RequestIdReused``, is a ``UsageError``: 422)."""

_HIDDEN_DETAIL: Mapping[int, str] = {
    410: "This session's content was erased: it can never be read again.",
    500: "The server failed to handle the request.",
    502: "The model failed to answer; see upstream_status when it answered with one.",
    503: "The session store cannot be reached right now; retry later.",
    504: "The model did not answer in time.",
}
"""Statuses whose detail is ours, never the error's text (which may quote the model's error
body or name hosts and ports)."""


def error_status(exc: AsyncSessionError) -> int:
    """The HTTP status of one of our errors."""
    for error_type, status in ERROR_STATUSES:
        if isinstance(exc, error_type):
            return status
    return 500


def problem(
    status: int,
    detail: str,
    instance: str,
    *,
    problem_type: str = "about:blank",
    **extra: Any,
) -> dict[str, Any]:
    """An RFC 9457 problem document."""
    return {
        "type": problem_type,
        "title": HTTPStatus(status).phrase,
        "status": status,
        "detail": detail,
        "instance": instance if len(instance) <= _MAX_INSTANCE else f"urn:uuid:{uuid.uuid4()}",
        **extra,
    }


def error_problem(exc: AsyncSessionError, instance: str) -> dict[str, Any]:
    """The problem document of one of our errors: no driver details in it."""
    status = error_status(exc)
    extra: dict[str, Any] = {}
    if isinstance(exc, ChatError) and exc.status_code is not None:
        extra["upstream_status"] = exc.status_code
    if isinstance(exc, TurnInProgress):
        extra["retry_after"] = math.ceil(exc.retry_after)  # the holder's lease, at most
    return problem(
        status,
        _HIDDEN_DETAIL.get(status, str(exc)),
        instance,
        problem_type=f"urn:asyncsession:error:{type(exc).__name__}",
        **extra,
    )


def problem_response(
    body: Mapping[str, Any], headers: Mapping[str, str] | None = None
) -> JSONResponse:
    status = int(body["status"])
    all_headers = dict(headers or {})
    if status == 503:
        all_headers["Retry-After"] = str(RETRY_AFTER_SECONDS)
    if "retry_after" in body:
        all_headers["Retry-After"] = str(body["retry_after"])
    return JSONResponse(
        dict(body), status_code=status, headers=all_headers, media_type=PROBLEM_JSON
    )


def _field_errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Where and why the input was refused, without the input; each once (a path parameter
    two dependencies read is checked twice)."""
    unique: dict[str, dict[str, Any]] = {}
    for error in errors:
        entry = {
            "loc": list(error.get("loc", ())),
            "type": error.get("type"),
            "msg": error.get("msg"),
        }
        unique.setdefault(repr(entry), entry)
    return list(unique.values())


class BodyLimit:
    """ASGI middleware: a request body over ``limit`` bytes is answered 413 without reading it
    whole (a declared ``Content-Length`` is refused before any byte is read; a chunked body
    when it passes the limit)."""

    def __init__(self, app: ASGIApp, limit: int = BODY_LIMIT) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = dict(scope["headers"]).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            # Answered before any byte is read; the server discards the body as it arrives,
            # so a client that sends it whole still reads the answer.
            await self._refuse(scope, receive, send, close=False)
            return
        received: list[ASGIMessage] = []
        size = 0
        while True:
            message = await receive()
            received.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            if size > self.limit:  # of unknown length: close rather than read the rest
                await self._refuse(scope, receive, send, close=True)
                return
            if not message.get("more_body", False):
                break

        async def replay() -> ASGIMessage:
            return received.pop(0) if received else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send, *, close: bool) -> None:
        body = problem(413, f"The request body is over {self.limit} bytes.", scope.get("path", ""))
        headers = {"Connection": "close"} if close else {}
        await problem_response(body, headers)(scope, receive, send)


def _pending(calls: Sequence[ToolCall]) -> list[dict[str, str]]:
    return [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in calls]


def _done(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "request_event_ids": list(response.request_event_ids),
        "response_event_ids": list(response.response_event_ids),
        "pending_approvals": _pending(response.pending_approvals),
    }


@dataclass(slots=True)
class _EventIds:
    """Numbers the events of one response: ``1``, ``2``, ... (sent as each event's ``id``)."""

    last: int = 0

    def event(self, name: str, data: dict[str, Any]) -> ServerSentEvent:
        self.last += 1
        return ServerSentEvent(event=name, data=data, id=str(self.last))


def _chunk_events(ids: _EventIds, chunk: ChatChunk) -> list[ServerSentEvent]:
    events = [ids.event("delta", {"text": chunk.text})] if chunk.text else []
    events += [
        ids.event("tool_call", {"name": delta.name, "id": delta.id})
        for delta in chunk.tool_calls
        if delta.name
    ]
    if chunk.pending_approvals:
        events.append(ids.event("approval_required", {"calls": _pending(chunk.pending_approvals)}))
    return events


_CANCEL = re.compile(r"\bcancel order ([A-Za-z0-9-]+)", re.IGNORECASE)


def _scripted(request: RecordedRequest) -> ScriptedReply:
    """The offline model: says it is one and repeats the question; asked to "cancel order
    <id>", it calls ``cancel_order`` and then reports the tool's result."""
    last = (request.messages or request.input or [{}])[-1]
    if last.get("role") == "tool" or last.get("type") == "function_call_output":
        return ScriptedReply.text(f"The tool said: {last.get('content') or last.get('output')}")
    wanted = _CANCEL.search(request.user_text or "")
    if wanted:
        return ScriptedReply.tool_calls([ScriptedToolCall("cancel_order", {"order_id": wanted[1]})])
    return ScriptedReply.text(
        f"You said: {request.user_text!r}. I am the example's offline scripted model; set "
        "ASYNCSESSION_EXAMPLE_MODEL and OPENAI_API_KEY for a real one.",
        chunk_size=8,
    )


@contextlib.asynccontextmanager
async def offline_model() -> AsyncGenerator[openai.AsyncOpenAI]:
    """The built-in scripted model, in process, and a client for it (closed with it)."""
    async with ScriptedOpenAIServer(responder=_scripted) as server:
        yield server.client()


@dataclass(slots=True)
class _TurnEvents:
    """The events of one streamed turn, from the task that runs it to the response.

    The queue is small, so a slow client slows the model's stream instead of filling memory;
    ``None`` ends it, after a ``done`` or an ``error`` event."""

    queue: asyncio.Queue[ServerSentEvent | None] = field(
        default_factory=lambda: asyncio.Queue[ServerSentEvent | None](maxsize=16)
    )

    async def produce(
        self, chat: ChatClient, message: str, turn: Mapping[str, str | None], instance: str
    ) -> None:
        ids = _EventIds()
        try:
            async with chat.stream(message, **turn) as reply:
                async for chunk in reply:
                    for event in _chunk_events(ids, chunk):
                        await self.queue.put(event)
                last = ids.event("done", _done(reply.response))
        except AsyncSessionError as exc:  # the status is already sent: an error event
            last = ids.event("error", error_problem(exc, instance))
        except Exception:  # a bug: the same shape as a 500, its text only in the log
            _log.exception("the turn failed")
            last = ids.event("error", problem(500, _HIDDEN_DETAIL[500], instance))
        await self.queue.put(last)
        await self.queue.put(None)


class StartupFailure(Exception):
    """The app cannot start. Its message is one line saying what failed, where and what to
    set; `StartupFailureAsOneLine` has the server log that line instead of a traceback."""


def _without_password(uri: str) -> str:
    return re.sub(r"^([^:/]+://[^:@/]*):[^/]*@", r"\1:***@", uri.strip())


async def open_mongodb(
    stack: contextlib.AsyncExitStack, uri: str, db_name: str
) -> MongoSessionRepository:
    """The MongoDB store, checked at start-up: its indexes are created before the app serves,
    so a server that does not answer (within the store's five-second timeouts) or a malformed
    URI stops the start with a `StartupFailure` instead of failing the first request."""
    where = _without_password(uri)
    try:
        repository = await stack.enter_async_context(MongoSessionRepository.from_uri(uri, db_name))
        await repository.ensure_indexes()
    except StorageUnavailable:
        problem = f"MongoDB at {where} did not answer"
    except AsyncSessionError as exc:
        problem = f"MongoDB at {where} failed: {str(exc).splitlines()[0]}"
    except (pymongo.errors.PyMongoError, ValueError) as exc:  # from the URI's parser
        problem = f"MONGODB_URI is not a valid MongoDB URI ({where}): {str(exc).splitlines()[0]}"
    else:
        return repository
    raise StartupFailure(
        f"asyncsession example cannot start: {problem}. Set MONGODB_URI to the URI of a MongoDB "
        "server that answers, or unset it to keep sessions in memory."
    )


class StartupFailureAsOneLine:
    """ASGI middleware: a `StartupFailure` in the lifespan reaches the server as its message
    alone, so uvicorn logs one line (then "Application startup failed") and exits non-zero."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "lifespan":
            await self.app(scope, receive, send)
            return

        async def one_line(message: ASGIMessage) -> None:
            failure = sys.exc_info()[1]  # sent while the lifespan's error is being handled
            if message["type"] == "lifespan.startup.failed" and isinstance(failure, StartupFailure):
                message = {**message, "message": str(failure)}
            await send(message)

        await self.app(scope, receive, one_line)


@dataclass(slots=True)
class _Runtime:
    """What the endpoints use, set when the app is created or when its lifespan starts."""

    sessions: SessionService | None = None
    chat: ChatClient | None = None
    description: list[str] = field(default_factory=list[str])

    def ready(self) -> tuple[SessionService, ChatClient]:
        if self.sessions is None or self.chat is None:
            raise RuntimeError("the app's lifespan has not started")
        return self.sessions, self.chat


def create_app(
    openai_client: openai.AsyncOpenAI | None = None,
    *,
    model: str | None = None,
    service: SessionService | None = None,
    chat_api: type[ChatClient] | None = None,
    ping_seconds: float | None = None,
    body_limit: int = BODY_LIMIT,
) -> FastAPI:
    """The app.

    With an ``openai_client`` the app borrows it (and ``service``, in memory by default) and is
    ready at once. Without one, its lifespan opens the model and the store the environment
    names (see the module's docstring) and closes them at shutdown.
    """
    env = os.environ
    api = chat_api or CHAT_APIS[env.get("ASYNCSESSION_EXAMPLE_API", "chat")]
    ping = (
        ping_seconds
        if ping_seconds is not None
        else float(env.get("ASYNCSESSION_EXAMPLE_PING_SECONDS", PING_SECONDS))
    )
    runtime = _Runtime()

    def build_chat(client: openai.AsyncOpenAI, sessions: SessionService, name: str) -> ChatClient:
        return api(
            client,
            model=name,
            sessions=sessions,
            tools=[current_time, cancel_order],
            default_messages=[SystemMessage(text="You are a concise, helpful assistant.")],
        )

    if openai_client is not None:
        runtime.sessions = service or DefaultSessionService(InMemorySessionRepository())
        runtime.chat = build_chat(openai_client, runtime.sessions, model or "gpt-4.1-mini")

    @contextlib.asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncGenerator[None]:
        if openai_client is not None:
            yield
            return
        async with contextlib.AsyncExitStack() as stack:
            real_model = model or env.get("ASYNCSESSION_EXAMPLE_MODEL")
            if real_model:
                client = await stack.enter_async_context(openai.AsyncOpenAI())
                runtime.description.append(f"model {real_model} via {client.base_url}")
            else:
                client = await stack.enter_async_context(offline_model())
                real_model = OFFLINE_MODEL
                runtime.description.append("the offline scripted model")
            sessions = service
            uri = env.get("MONGODB_URI")
            if sessions is None and uri:
                database = env.get("ASYNCSESSION_EXAMPLE_DB", "asyncsession_example")
                sessions = DefaultSessionService(await open_mongodb(stack, uri, database))
                runtime.description.append("sessions in MongoDB")
            elif sessions is None:
                sessions = DefaultSessionService(InMemorySessionRepository())
                runtime.description.append("sessions in memory")
            runtime.sessions, runtime.chat = sessions, build_chat(client, sessions, real_model)
            _log.info("asyncsession example: %s", "; ".join(runtime.description))
            try:
                yield
            finally:
                runtime.sessions = runtime.chat = None

    app = FastAPI(title="asyncsession chat", lifespan=lifespan)
    app.add_middleware(BodyLimit, limit=body_limit)
    app.add_middleware(StartupFailureAsOneLine)
    app.state.runtime = runtime

    @app.exception_handler(AsyncSessionError)
    async def our_error(request: Request, exc: AsyncSessionError) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        return problem_response(error_problem(exc, request.url.path))

    @app.exception_handler(RequestValidationError)
    async def bad_request(request: Request, exc: RequestValidationError) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        body = problem(
            422,
            "The request is not valid; see errors.",
            request.url.path,
            errors=_field_errors(exc.errors()),
        )
        return problem_response(body)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        body = problem(exc.status_code, str(exc.detail), request.url.path)
        return problem_response(body, exc.headers)

    @app.exception_handler(Exception)
    async def server_error(request: Request, exc: Exception) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        return problem_response(problem(500, _HIDDEN_DETAIL[500], request.url.path))

    def turn(session_id: str, user_id: str, idempotency_key: str | None) -> dict[str, str | None]:
        return {"session_id": session_id, "user_id": user_id, "request_id": idempotency_key}

    async def owned_by_caller(session_id: SessionId, user_id: UserId) -> None:
        """Refuse a foreign user's session (403) and an unreachable store (503) before a
        stream starts; the turn checks again."""
        sessions, _ = runtime.ready()
        session = await sessions.find_by_id(session_id)
        if session is not None and session.user_id != user_id:
            raise AccessDenied(session_id, user_id)

    async def turn_events(
        request: Request,
        session_id: SessionId,
        body: ChatIn,
        user_id: UserId,
        idempotency_key: IdempotencyKey = None,
    ) -> AsyncIterator[_TurnEvents]:
        """Run the turn in a task of its own, which owns the model's stream from start to end,
        and hand its events over a queue; the task is cancelled and awaited when the response
        has ended, however it ended."""
        _, chat = runtime.ready()
        events = _TurnEvents()
        values = turn(session_id, user_id, idempotency_key)
        task = asyncio.create_task(events.produce(chat, body.message, values, request.url.path))
        try:
            yield events
        finally:
            task.cancel()
            await asyncio.wait({task})
            if not task.cancelled() and task.exception() is not None:
                raise RuntimeError("the turn's task failed") from task.exception()

    @app.post(
        "/sessions/{session_id}/stream",
        response_class=EventSourceResponse,
        dependencies=[Depends(owned_by_caller)],
    )
    async def stream(  # pyright: ignore[reportUnusedFunction]
        events: Annotated[_TurnEvents, Depends(turn_events)],
    ) -> AsyncIterator[ServerSentEvent]:
        """Stream the reply as server-sent events: a ping at once, pings while the model is
        silent, then the reply's events."""
        yield ServerSentEvent(comment="ping")
        while True:
            try:
                async with asyncio.timeout(ping):
                    event = await events.queue.get()
            except TimeoutError:
                yield ServerSentEvent(comment="ping")
                continue
            if event is None:
                return
            yield event

    @app.post("/sessions/{session_id}/messages")
    async def send(  # pyright: ignore[reportUnusedFunction]
        session_id: SessionId,
        body: ChatIn,
        user_id: UserId,
        idempotency_key: IdempotencyKey = None,
    ) -> ChatOut:
        """Send a message and wait for the whole reply."""
        _, chat = runtime.ready()
        response = await chat.call(body.message, **turn(session_id, user_id, idempotency_key))
        return ChatOut(**_done(response))

    @app.post("/sessions/{session_id}/approvals")
    async def decide(  # pyright: ignore[reportUnusedFunction]
        session_id: SessionId, body: DecisionsIn, user_id: UserId
    ) -> ChatOut:
        """Approve or reject the calls a turn stopped for, and wait for the rest of the turn."""
        _, chat = runtime.ready()
        decisions: dict[str, bool | str] = dict.fromkeys(body.approve, True)
        decisions.update({call_id: reason or False for call_id, reason in body.reject.items()})
        response = await chat.resume(session_id, decisions, user_id=user_id)
        return ChatOut(**_done(response))

    @app.post("/sessions/{session_id}/messages/{event_id}/edit")
    async def edit(  # pyright: ignore[reportUnusedFunction]
        session_id: SessionId,
        event_id: EventId,
        body: EditIn,
        user_id: UserId,
        idempotency_key: IdempotencyKey = None,
    ) -> ChatOut:
        """Edit and regenerate: replace the user message ``event_id`` (a ``request_event_ids``
        entry of an earlier reply) and wait for the new reply. The session is rewound to just
        before it (the old turn stays in its log, archived), or, with ``fork_to``, forked
        there into a new session that gets the new reply, keeping both."""
        _, chat = runtime.ready()
        response = await chat.call(
            body.message,
            replace=event_id,
            fork_to=body.fork_to,
            **turn(session_id, user_id, idempotency_key),
        )
        return ChatOut(**_done(response))

    @app.get("/sessions/{session_id}/messages")
    async def history(  # pyright: ignore[reportUnusedFunction]
        session_id: SessionId, user_id: UserId
    ) -> list[dict[str, Any]]:
        """The session's active conversation, as OpenAI message dicts."""
        sessions, _ = runtime.ready()
        session = await sessions.find_by_id(session_id)
        if session is None:
            raise HTTPException(status_code=404, detail="No such session.")
        if session.user_id != user_id:
            raise AccessDenied(session_id, user_id)
        return [
            m
            for message in await sessions.get_active_messages(session_id)
            for m in message.to_openai()
        ]

    return app


app = create_app()
"""The app for ``uvicorn examples.fastapi_app:app`` and ``fastapi run``: offline by default."""


def main(argv: Sequence[str] | None = None) -> None:
    """``python examples/fastapi_app.py``: serve the app with uvicorn."""
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(
        description="The asyncsession FastAPI example.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--api", choices=sorted(CHAT_APIS), default="chat", help="the OpenAI API")
    parser.add_argument("--host", default="127.0.0.1", help="the address to listen on")
    parser.add_argument("--port", type=int, default=8000, help="the port (0: any free one)")
    arguments = parser.parse_args(argv)
    uvicorn.run(
        create_app(chat_api=CHAT_APIS[arguments.api]),
        host=arguments.host,
        port=arguments.port,
    )


if __name__ == "__main__":
    main()
