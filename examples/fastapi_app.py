"""A FastAPI chat service: durable sessions, a tool, server-sent events and idempotent retries.

Run it against OpenAI (``OPENAI_API_KEY`` set), on the Chat Completions API or, with
``--api responses``, on the Responses API (the same advisors, the same session log)::

    pip install asyncsession 'fastapi>=0.135' uvicorn
    python examples/fastapi_app.py [--api responses]   # then:
    curl -N -X POST localhost:8000/sessions/s1/stream \\
         -H 'content-type: application/json' -H 'x-user-id: alice' \\
         -H 'idempotency-key: 7f3c' -d '{"message": "What time is it in Tokyo?"}'

Endpoints:

- ``POST /sessions/{session_id}/stream``: the reply as server-sent events, with FastAPI's own
  SSE support (``EventSourceResponse``: ``Cache-Control: no-cache``, ``X-Accel-Buffering: no``
  for nginx, and a ``: ping`` comment every 15 s while the model is silent, so proxies keep the
  connection open). Every event has an ``id`` and JSON ``data`` (so a newline in the text never
  breaks the framing): ``delta`` events with text, ``tool_call`` events when the model calls a
  tool, then ``done`` with the whole reply and the ids of the stored events, or ``error``.
- ``POST /sessions/{session_id}/messages``: the same, as one JSON response.
- ``GET /sessions/{session_id}/messages``: the conversation so far.

The caller's user id comes from the ``x-user-id`` header (a stand-in for real authentication):
the session advisors create a new session for that user and refuse anyone else's. A client that
may retry sends an ``Idempotency-Key`` header: a retry of a request that completed gets the
stored reply (streamed again on the stream endpoint) without a model call; a retry of one that
failed runs the turn again and stores the user message once.

Errors map to HTTP statuses (see `error_status`): a foreign user's session is 403, a malformed
request 422, a model failure 502, and a database that cannot be reached 503 with
``Retry-After`` (the store fails within its client timeouts, see
``MongoSessionRepository.from_uri``). Errors before the first chunk of a stream are real HTTP
errors, because the endpoint reads the first chunk before the response starts; later ones are an
``error`` event. A client that disconnects mid-stream abandons the stream: the model's HTTP
stream is closed, the user's message stays stored and no partial reply is.
"""

# No `from __future__ import annotations`: FastAPI reads the endpoints' annotations at runtime,
# and a dependency defined inside `create_app` cannot be found from a string.
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import openai
from fastapi import Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field

from asyncsession import (
    AccessDenied,
    AsyncSessionError,
    ChatError,
    DefaultSessionService,
    EventTooLarge,
    InMemorySessionRepository,
    SessionService,
    StorageUnavailable,
    SystemMessage,
    UsageError,
)
from asyncsession.advisors import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    REQUEST_ID_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    Advisor,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.chat import ChatChunk, ChatResponse
from asyncsession.messages import Message
from asyncsession.openai import BaseChatClient, ChatClient, ChatStream, ResponsesClient

RETRY_AFTER_SECONDS = 5
"""What a 503 asks the client to wait before retrying."""


@tool
def current_time(timezone: str) -> str:
    """The current time in a timezone.

    Args:
        timezone: An IANA timezone name, such as "Asia/Tokyo".
    """
    return datetime.now(UTC).astimezone(ZoneInfo(timezone)).isoformat(timespec="minutes")


class ChatIn(BaseModel):
    """The body of a chat request."""

    message: str = Field(min_length=1, max_length=100_000)


class ChatOut(BaseModel):
    """The reply to a chat request."""

    text: str
    request_event_ids: list[str]
    response_event_ids: list[str]


UserId = Annotated[str, Header(alias="x-user-id", pattern=r"\S")]
"""The caller's user id: a stand-in for real authentication; blank is refused (422)."""
IdempotencyKey = Annotated[str | None, Header(alias="idempotency-key", max_length=200)]
"""The client's id of a request it may retry."""

ChatFactory = Callable[..., BaseChatClient]
"""Builds the chat client over the OpenAI client: ``(openai_client, *, model, advisors,
default_messages)``. The switch point between OpenAI APIs."""


def chat_completions(
    openai_client: openai.AsyncOpenAI,
    *,
    model: str,
    advisors: Sequence[Advisor],
    default_messages: Sequence[Message],
) -> ChatClient:
    """The Chat Completions API client (the default)."""
    return ChatClient(
        openai_client, model=model, advisors=advisors, default_messages=default_messages
    )


def responses_api(
    openai_client: openai.AsyncOpenAI,
    *,
    model: str,
    advisors: Sequence[Advisor],
    default_messages: Sequence[Message],
) -> ResponsesClient:
    """The Responses API client (``store=False``: the session log is the history)."""
    return ResponsesClient(
        openai_client, model=model, advisors=advisors, default_messages=default_messages
    )


CHAT_APIS: dict[str, ChatFactory] = {"chat": chat_completions, "responses": responses_api}
"""The ``--api`` choices."""


def error_status(exc: AsyncSessionError) -> int:
    """The HTTP status of one of our errors."""
    if isinstance(exc, AccessDenied):
        return 403
    if isinstance(exc, StorageUnavailable):
        return 503
    if isinstance(exc, ChatError):
        return 502
    if isinstance(exc, UsageError | EventTooLarge):
        return 422
    return 500


def _error_body(exc: AsyncSessionError) -> dict[str, Any]:
    body: dict[str, Any] = {"error": type(exc).__name__, "detail": str(exc)}
    if isinstance(exc, ChatError):
        body["status"] = exc.status_code
    return body


def _done(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "request_event_ids": response.context.get(REQUEST_EVENT_IDS_CONTEXT_KEY, []),
        "response_event_ids": response.context.get(RESPONSE_EVENT_IDS_CONTEXT_KEY, []),
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
    return events


@dataclass(slots=True)
class _OpenedStream:
    """A chat stream whose first chunk was read before the response started."""

    reply: ChatStream
    first: ChatChunk | None


def create_app(
    openai_client: openai.AsyncOpenAI,
    *,
    model: str = "gpt-4.1-mini",
    service: SessionService | None = None,
    chat_factory: ChatFactory = chat_completions,
) -> FastAPI:
    """The app, over a borrowed OpenAI client and a session service (in memory by default)."""
    sessions = service or DefaultSessionService(InMemorySessionRepository())
    chat = chat_factory(
        openai_client,
        model=model,
        advisors=[
            IdempotentTurnAdvisor(sessions),
            SessionTurnAdvisor(sessions),
            ToolCallingAdvisor([current_time]),
            SessionMemoryAdvisor(sessions, request_event_id_generator=RequestIdEventIdGenerator()),
        ],
        default_messages=[SystemMessage(text="You are a concise, helpful assistant.")],
    )
    app = FastAPI(title="asyncsession chat")

    @app.exception_handler(AsyncSessionError)
    async def our_error(request: Request, exc: AsyncSessionError) -> JSONResponse:  # pyright: ignore[reportUnusedFunction]
        status = error_status(exc)
        headers = {"Retry-After": str(RETRY_AFTER_SECONDS)} if status == 503 else None
        return JSONResponse(_error_body(exc), status_code=status, headers=headers)

    def context(session_id: str, user_id: str, idempotency_key: str | None) -> dict[str, str]:
        values = {SESSION_ID_CONTEXT_KEY: session_id, USER_ID_CONTEXT_KEY: user_id}
        if idempotency_key:
            values[REQUEST_ID_CONTEXT_KEY] = idempotency_key
        return values

    async def opened_stream(
        session_id: str,
        body: ChatIn,
        user_id: UserId,
        idempotency_key: IdempotencyKey = None,
    ) -> AsyncIterator[_OpenedStream]:
        """Open the stream and read its first chunk: errors up to here are HTTP errors. The
        stream closes when the response has ended, however it ended."""
        async with chat.stream(
            body.message, context=context(session_id, user_id, idempotency_key)
        ) as reply:
            first = await anext(reply, None)
            yield _OpenedStream(reply, first)

    @app.post("/sessions/{session_id}/stream", response_class=EventSourceResponse)
    async def stream(  # pyright: ignore[reportUnusedFunction]
        opened: Annotated[_OpenedStream, Depends(opened_stream)],
    ) -> AsyncIterator[ServerSentEvent]:
        """Stream the reply as server-sent events."""
        ids = _EventIds()
        try:
            if opened.first is not None:
                for event in _chunk_events(ids, opened.first):
                    yield event
                async for chunk in opened.reply:
                    for event in _chunk_events(ids, chunk):
                        yield event
            yield ids.event("done", _done(opened.reply.response))
        except AsyncSessionError as exc:  # after the first chunk: the status is already sent
            yield ids.event("error", {**_error_body(exc), "http_status": error_status(exc)})

    @app.post("/sessions/{session_id}/messages")
    async def send(  # pyright: ignore[reportUnusedFunction]
        session_id: str,
        body: ChatIn,
        user_id: UserId,
        idempotency_key: IdempotencyKey = None,
    ) -> ChatOut:
        """Send a message and wait for the whole reply."""
        response = await chat.call(
            body.message, context=context(session_id, user_id, idempotency_key)
        )
        return ChatOut(**_done(response))

    @app.get("/sessions/{session_id}/messages")
    async def history(  # pyright: ignore[reportUnusedFunction]
        session_id: str, user_id: UserId
    ) -> list[dict[str, Any]]:
        """The session's active conversation, as OpenAI message dicts."""
        session = await sessions.find_by_id(session_id)
        if session is None:
            raise HTTPException(status_code=404, detail="no such session")
        if session.user_id != user_id:
            raise AccessDenied(session_id, user_id)
        return [
            m
            for message in await sessions.get_active_messages(session_id)
            for m in message.to_openai()
        ]

    return app


if __name__ == "__main__":  # pragma: no cover - manual run
    import argparse

    import uvicorn

    parser = argparse.ArgumentParser(description="The asyncsession FastAPI example.")
    parser.add_argument("--api", choices=sorted(CHAT_APIS), default="chat")
    parser.add_argument("--model", default="gpt-4.1-mini")
    arguments = parser.parse_args()
    app = create_app(
        openai.AsyncOpenAI(), model=arguments.model, chat_factory=CHAT_APIS[arguments.api]
    )
    uvicorn.run(app, host="127.0.0.1", port=8000)
