"""A FastAPI chat service: durable sessions, a tool, and a streaming (SSE) endpoint.

Run it against OpenAI (``OPENAI_API_KEY`` set)::

    pip install 'asyncsession[openai]' fastapi uvicorn
    python examples/fastapi_app.py            # then:
    curl -N -X POST localhost:8000/sessions/s1/stream \\
         -H 'content-type: application/json' -H 'x-user-id: alice' \\
         -d '{"message": "What time is it in Tokyo?"}'

Endpoints:

- ``POST /sessions/{session_id}/stream``: the reply as server-sent events: ``delta`` events with
  text, ``tool_call`` events when the model calls a tool, then ``done`` with the whole reply and
  the ids of the stored events (or ``error``).
- ``POST /sessions/{session_id}/messages``: the same, as one JSON response.
- ``GET /sessions/{session_id}/messages``: the conversation so far.

The caller's user id comes from the ``x-user-id`` header (stand-in for real authentication):
the session advisors create a new session for that user and refuse anyone else's (403).

Errors that happen before the first chunk (a foreign user, a model that refuses the request) are
real HTTP errors, because the endpoint reads the first chunk before it starts the response. A
client that disconnects mid-stream abandons the stream: the model's HTTP stream is closed, the
user's message stays stored and no partial reply is.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo

import openai
from fastapi import FastAPI, Header, HTTPException
from fastapi.responses import StreamingResponse
from pydantic import BaseModel

from asyncsession import (
    DefaultSessionService,
    InMemorySessionRepository,
    SessionService,
    SystemMessage,
)
from asyncsession.advisors import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.chat import ChatChunk, ChatResponse
from asyncsession.exceptions import AccessDenied, ChatError
from asyncsession.openai import ChatClient, ChatStream


@tool
def current_time(timezone: str) -> str:
    """The current time in a timezone.

    Args:
        timezone: An IANA timezone name, such as "Asia/Tokyo".
    """
    return datetime.now(UTC).astimezone(ZoneInfo(timezone)).isoformat(timespec="minutes")


class ChatIn(BaseModel):
    """The body of a chat request."""

    message: str


class ChatOut(BaseModel):
    """The reply to a chat request."""

    text: str
    request_event_ids: list[str]
    response_event_ids: list[str]


def _sse(event: str, data: dict[str, Any]) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def _done(response: ChatResponse) -> dict[str, Any]:
    return {
        "text": response.text,
        "request_event_ids": response.context.get(REQUEST_EVENT_IDS_CONTEXT_KEY, []),
        "response_event_ids": response.context.get(RESPONSE_EVENT_IDS_CONTEXT_KEY, []),
    }


def _chunk_events(chunk: ChatChunk) -> list[str]:
    events = [_sse("delta", {"text": chunk.text})] if chunk.text else []
    events += [
        _sse("tool_call", {"name": delta.name, "id": delta.id})
        for delta in chunk.tool_calls
        if delta.name
    ]
    return events


def _http_error(exc: AccessDenied | ChatError) -> HTTPException:
    if isinstance(exc, AccessDenied):
        return HTTPException(status_code=403, detail=str(exc))
    return HTTPException(status_code=502, detail={"error": str(exc), "status": exc.status_code})


def create_app(
    openai_client: openai.AsyncOpenAI,
    *,
    model: str = "gpt-4.1-mini",
    service: SessionService | None = None,
) -> FastAPI:
    """The app, over a borrowed OpenAI client and a session service (in memory by default)."""
    sessions = service or DefaultSessionService(InMemorySessionRepository())
    chat = ChatClient(
        openai_client,
        model=model,
        advisors=[
            SessionTurnAdvisor(sessions),
            ToolCallingAdvisor([current_time]),
            SessionMemoryAdvisor(sessions),
        ],
        default_messages=[SystemMessage(text="You are a concise, helpful assistant.")],
    )
    app = FastAPI(title="asyncsession chat")

    def context(session_id: str, user_id: str) -> dict[str, str]:
        return {SESSION_ID_CONTEXT_KEY: session_id, USER_ID_CONTEXT_KEY: user_id}

    @app.post("/sessions/{session_id}/stream")
    async def stream(
        session_id: str, body: ChatIn, x_user_id: Annotated[str, Header()]
    ) -> StreamingResponse:
        """Stream the reply as server-sent events."""
        resources = AsyncExitStack()
        reply: ChatStream = await resources.enter_async_context(
            chat.stream(body.message, context=context(session_id, x_user_id))
        )
        try:  # the first chunk decides the status code: errors before it are HTTP errors
            first: ChatChunk | None = await anext(reply)
        except StopAsyncIteration:
            first = None
        except (AccessDenied, ChatError) as exc:
            await resources.aclose()
            raise _http_error(exc) from exc
        except BaseException:
            await resources.aclose()
            raise

        async def events() -> AsyncIterator[str]:
            async with resources:  # closes the stream however the response ends
                try:
                    if first is not None:
                        for event in _chunk_events(first):
                            yield event
                        async for chunk in reply:
                            for event in _chunk_events(chunk):
                                yield event
                    yield _sse("done", _done(reply.response))
                except ChatError as exc:
                    yield _sse("error", {"error": str(exc), "status": exc.status_code})

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.post("/sessions/{session_id}/messages")
    async def send(session_id: str, body: ChatIn, x_user_id: Annotated[str, Header()]) -> ChatOut:
        """Send a message and wait for the whole reply."""
        try:
            response = await chat.call(body.message, context=context(session_id, x_user_id))
        except (AccessDenied, ChatError) as exc:
            raise _http_error(exc) from exc
        return ChatOut(**_done(response))

    @app.get("/sessions/{session_id}/messages")
    async def history(session_id: str, x_user_id: Annotated[str, Header()]) -> list[dict[str, Any]]:
        """The session's active conversation, as OpenAI message dicts."""
        session = await sessions.find_by_id(session_id)
        if session is None:
            raise HTTPException(status_code=404, detail="no such session")
        if session.user_id != x_user_id:
            raise HTTPException(status_code=403, detail="not your session")
        return [
            m
            for message in await sessions.get_active_messages(session_id)
            for m in message.to_openai()
        ]

    return app


if __name__ == "__main__":  # pragma: no cover - manual run
    import uvicorn

    uvicorn.run(create_app(openai.AsyncOpenAI()), host="127.0.0.1", port=8000)
