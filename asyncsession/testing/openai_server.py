"""A scripted, OpenAI-compatible HTTP server on loopback, for tests.

:class:`ScriptedOpenAIServer` speaks enough HTTP/1.1 (keep-alive, ``Content-Length`` and chunked
request bodies, JSON and chunked ``text/event-stream`` responses) for the real
``openai.AsyncOpenAI`` client to talk to it. It serves ``POST /v1/chat/completions`` (and
``/chat/completions``) with the real ``chat.completion`` and ``chat.completion.chunk`` JSON shapes,
answering each request with the next :class:`ScriptedReply` from its queue, or with whatever a
``responder`` function returns. Everything else gets a 404 in OpenAI's error shape.

```python
async with ScriptedOpenAIServer() as server:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    server.enqueue(ScriptedReply.text("Hello there"))
    reply = await client.chat.completions.create(model="gpt-test", messages=[...])
    assert server.requests[0].messages[-1]["content"] == "..."
    server.assert_done()
```

Replies also carry fault and timing controls so tests can synchronise on events instead of
sleeping: ``hold`` (wait for an event before answering), ``pause_after`` + ``gate`` (stream N
chunks, then wait), ``drop_after`` (stream N chunks, then close the connection) and ``delay``.
While a reply is being sent the server watches the connection, so a client that goes away is
noticed at once (:meth:`ScriptedOpenAIServer.wait_disconnected`).

Only the standard library and pydantic are used, so the module is importable wherever the
library is; it never imports the OpenAI SDK.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import http
import inspect
import json
import secrets
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from types import TracebackType
from typing import Any, Literal, Self, TypedDict, Unpack, cast

from pydantic import BaseModel, ConfigDict, SerializerFunctionWrapHandler, model_serializer

from asyncsession.exceptions import UsageError

__all__ = [
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedReplyOptions",
    "ScriptedToolCall",
    "ScriptedUsage",
    "ScriptedError",
    "RecordedRequest",
    "Responder",
    "FinishReason",
]

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
"""Why the model stopped, as the Chat Completions API reports it."""

_CHAT_COMPLETIONS_PATHS = frozenset({"/v1/chat/completions", "/chat/completions"})
_DEFAULT_CHUNK_SIZE = 4
_DEFAULT_MODEL = "scripted-model"
_MAX_HEAD_BYTES = 64 * 1024
_MAX_BODY_BYTES = 64 * 1024 * 1024
_READ_SIZE = 64 * 1024


def _new_call_id() -> str:
    return f"call_{secrets.token_hex(12)}"


def _estimate_tokens(text: str) -> int:
    """Roughly one token per four characters, and never zero: good enough for a fake."""
    return max(1, (len(text) + 3) // 4)


# Design note: the scripted values are frozen dataclasses, not pydantic models, because they live
# in-process only and some hold asyncio.Events; the JSON the server sends is built from the
# private pydantic models below, which mirror the API's wire shapes.


@dataclass(frozen=True, slots=True)
class ScriptedToolCall:
    """One function tool call in a scripted reply.

    ``arguments`` may be a mapping (serialised to compact JSON when the call is created) or a raw
    string sent verbatim, which lets a test script malformed JSON arguments on purpose.
    """

    name: str
    """The function name the model "calls"."""
    arguments: str | Mapping[str, Any] = "{}"
    """The arguments: a JSON-serialisable mapping, or a raw string sent as is."""
    _: KW_ONLY
    id: str = field(default_factory=_new_call_id)
    """The tool call id; ``call_<hex>`` when not given."""
    _arguments_json: str = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if isinstance(self.arguments, str):
            encoded = self.arguments
        else:
            try:
                encoded = json.dumps(
                    dict(self.arguments), separators=(",", ":"), ensure_ascii=False
                )
            except (TypeError, ValueError) as exc:
                raise UsageError(
                    f"Arguments of tool call {self.name!r} are not JSON-serialisable: {exc}"
                ) from exc
        # A snapshot, so mutating the caller's dict later cannot change the script.
        object.__setattr__(self, "_arguments_json", encoded)

    @property
    def arguments_json(self) -> str:
        """The arguments exactly as they are sent on the wire."""
        return self._arguments_json


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedUsage:
    """Token usage reported with a reply."""

    prompt_tokens: int
    """Tokens in the request."""
    completion_tokens: int
    """Tokens in the reply."""

    @property
    def total_tokens(self) -> int:
        """Prompt and completion tokens together."""
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedError:
    """An HTTP error answered with OpenAI's error JSON body."""

    status_code: int
    """The HTTP status, for example 400, 429 or 500."""
    message: str
    """``error.message`` in the body."""
    type: str
    """``error.type`` in the body, such as ``"invalid_request_error"`` or ``"server_error"``."""
    code: str | None = None
    """``error.code`` in the body."""
    param: str | None = None
    """``error.param`` in the body."""


class ScriptedReplyOptions(TypedDict, total=False):
    """Keyword options shared by :meth:`ScriptedReply.text` and :meth:`ScriptedReply.tool_calls`.

    Each key is the :class:`ScriptedReply` field of the same name.
    """

    finish_reason: FinishReason
    usage: ScriptedUsage
    chunk_size: int
    pause_after: int
    gate: asyncio.Event
    drop_after: int
    hold: asyncio.Event
    delay: float
    headers: Mapping[str, str]


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedReply:
    """What the server answers to one chat completion request.

    Build one with :meth:`text`, :meth:`tool_calls` or :meth:`error`, or directly. The same reply
    serves streaming and non-streaming requests: the request's ``stream`` flag decides the shape.

    "Chunks" in the fault controls are the SSE events of a streamed reply, ``data: [DONE]``
    included; a non-streaming reply is a single chunk (status line, headers and body).
    """

    content: str | None = None
    """The assistant's text; ``None`` for a reply with tool calls only."""
    calls: tuple[ScriptedToolCall, ...] = ()
    """Tool calls, in order; several make a parallel tool call."""
    finish_reason: FinishReason | None = None
    """Overrides the derived finish reason (``"tool_calls"`` with calls, else ``"stop"``)."""
    usage: ScriptedUsage | None = None
    """Reported usage; estimated from the request and reply sizes when not given."""
    api_error: ScriptedError | None = None
    """When set, the request fails with this HTTP error instead of completing."""
    chunk_size: int = _DEFAULT_CHUNK_SIZE
    """Characters per streamed content or arguments delta."""
    pause_after: int | None = None
    """Send this many chunks, then wait for ``gate`` before sending the rest."""
    gate: asyncio.Event | None = None
    """The event that releases a reply paused by ``pause_after``."""
    drop_after: int | None = None
    """Send this many chunks, then close the connection without finishing the response."""
    hold: asyncio.Event | None = None
    """Wait for this event before answering at all; never set it to simulate a hung server."""
    delay: float = 0.0
    """Seconds to wait before answering; prefer ``hold`` when a test can set an event."""
    headers: Mapping[str, str] = field(default_factory=dict[str, str])
    """Extra response headers, for example ``retry-after-ms`` on an error."""

    def __post_init__(self) -> None:
        if self.chunk_size < 1:
            raise UsageError(f"chunk_size must be at least 1, not {self.chunk_size!r}")
        if (self.pause_after is None) != (self.gate is None):
            raise UsageError("pause_after and gate must be given together")
        for name, value in (("pause_after", self.pause_after), ("drop_after", self.drop_after)):
            if value is not None and value < 0:
                raise UsageError(f"{name} must not be negative, not {value!r}")
        if self.delay < 0:
            raise UsageError(f"delay must not be negative, not {self.delay!r}")
        if self.api_error is not None and (
            self.content is not None or self.calls or self.finish_reason or self.usage
        ):
            raise UsageError(
                "an error reply carries no content, tool calls, finish reason or usage"
            )
        object.__setattr__(self, "calls", tuple(self.calls))
        object.__setattr__(self, "headers", dict(self.headers))

    @classmethod
    def text(cls, content: str, **options: Unpack[ScriptedReplyOptions]) -> Self:
        """A plain assistant message.

        Args:
            content: The assistant's text.
            **options: Further :class:`ScriptedReply` fields (finish reason, usage, faults).
        """
        return cls(content=content, **options)

    @classmethod
    def tool_calls(
        cls,
        calls: Iterable[ScriptedToolCall],
        *,
        content: str | None = None,
        **options: Unpack[ScriptedReplyOptions],
    ) -> Self:
        """An assistant message that calls one tool, or several in parallel.

        Args:
            calls: The tool calls, in order.
            content: Optional text sent alongside the calls.
            **options: Further :class:`ScriptedReply` fields (finish reason, usage, faults).
        """
        scripted = tuple(calls)
        if not scripted:
            raise UsageError("tool_calls() needs at least one ScriptedToolCall")
        return cls(content=content, calls=scripted, **options)

    @classmethod
    def error(
        cls,
        status_code: int,
        message: str,
        *,
        error_type: str | None = None,
        code: str | None = None,
        hold: asyncio.Event | None = None,
        delay: float = 0.0,
        headers: Mapping[str, str] | None = None,
    ) -> Self:
        """An HTTP error with OpenAI's error JSON body.

        Args:
            status_code: The HTTP status (400 and up).
            message: The error message.
            error_type: ``error.type``; by default ``"server_error"`` for a 5xx status, else
                ``"invalid_request_error"``.
            code: ``error.code``.
            hold: Wait for this event before answering.
            delay: Seconds to wait before answering.
            headers: Extra response headers.
        """
        if status_code < 400:
            raise UsageError(f"an error reply needs a status of 400 or more, not {status_code!r}")
        if error_type is None:
            error_type = "server_error" if status_code >= 500 else "invalid_request_error"
        failure = ScriptedError(
            status_code=status_code, message=message, type=error_type, code=code
        )
        return cls(api_error=failure, hold=hold, delay=delay, headers=headers or {})

    @property
    def effective_finish_reason(self) -> FinishReason:
        """The finish reason sent: the override, else derived from the tool calls."""
        if self.finish_reason is not None:
            return self.finish_reason
        return "tool_calls" if self.calls else "stop"

    def describe(self) -> str:
        """A short human-readable summary, used in assertion messages."""
        if self.api_error is not None:
            return f"error {self.api_error.status_code} {self.api_error.message!r}"
        parts: list[str] = []
        if self.content is not None:
            preview = self.content if len(self.content) <= 40 else self.content[:37] + "..."
            parts.append(f"text {preview!r}")
        if self.calls:
            parts.append(f"tool calls {[call.name for call in self.calls]!r}")
        return " + ".join(parts) or "empty reply"


@dataclass(frozen=True, slots=True, kw_only=True)
class RecordedRequest:
    """One HTTP request the server received, in arrival order."""

    index: int
    """Position in :attr:`ScriptedOpenAIServer.requests`."""
    connection: int
    """Which TCP connection carried the request, numbered from 0 in order of arrival."""
    method: str
    """The HTTP method, for example ``"POST"``."""
    path: str
    """The request path without the query string."""
    headers: Mapping[str, str]
    """Request headers, with lower-case names."""
    raw_body: bytes
    """The request body as received."""
    body: Mapping[str, Any]
    """The body parsed as a JSON object; empty when it is not one."""
    _disconnected: asyncio.Event = field(
        init=False, default_factory=asyncio.Event, repr=False, compare=False
    )

    @property
    def model(self) -> str | None:
        """The ``model`` the client asked for."""
        value = self.body.get("model")
        return value if isinstance(value, str) else None

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The ``messages`` the client sent (an empty list when absent)."""
        return _json_objects(self.body.get("messages"))

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` the client offered (an empty list when absent)."""
        return _json_objects(self.body.get("tools"))

    @property
    def is_stream(self) -> bool:
        """Whether the client asked for a streamed (SSE) response."""
        return self.body.get("stream") is True

    @property
    def include_usage(self) -> bool:
        """Whether the client asked for a usage chunk at the end of the stream."""
        options = _json_objects([self.body.get("stream_options")])
        return bool(options) and options[0].get("include_usage") is True

    @property
    def disconnected(self) -> bool:
        """Whether the client went away before the response was completely sent."""
        return self._disconnected.is_set()

    async def wait_disconnected(self) -> None:
        """Wait until the client has gone away mid-response (wrap in ``asyncio.timeout``)."""
        await self._disconnected.wait()


def _json_objects(value: object) -> list[dict[str, Any]]:
    """The JSON objects in a parsed JSON list; anything else is ignored."""
    if not isinstance(value, list):
        return []
    items = cast(list[object], value)
    return [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]


Responder = Callable[[RecordedRequest], ScriptedReply | Awaitable[ScriptedReply]]
"""Decides the reply to a request; may be a plain or an ``async`` function."""


async def _call_responder(responder: Responder, request: RecordedRequest) -> object:
    """Run a plain or async responder; ``object``, as an untyped one may return anything."""
    produced = responder(request)
    return await produced if inspect.isawaitable(produced) else produced


class _Wire(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class _Sparse(_Wire):
    """A shape whose unset (``None``) fields are left out, as in the API's stream deltas."""

    @model_serializer(mode="wrap")
    def _omit_none(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        return {key: value for key, value in data.items() if value is not None}


class _Usage(_Wire):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class _Function(_Wire):
    name: str
    arguments: str


class _ToolCall(_Wire):
    id: str
    type: Literal["function"] = "function"
    function: _Function


class _Message(_Wire):
    role: Literal["assistant"] = "assistant"
    content: str | None
    refusal: None = None
    annotations: list[Any] = []
    tool_calls: list[_ToolCall] | None = None

    @model_serializer(mode="wrap")
    def _omit_empty_tool_calls(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if data.get("tool_calls") is None:
            data.pop("tool_calls", None)
        return data


class _Choice(_Wire):
    index: int = 0
    message: _Message
    logprobs: None = None
    finish_reason: FinishReason


class _Completion(_Wire):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[_Choice]
    usage: _Usage
    service_tier: str = "default"
    system_fingerprint: str = "fp_scripted"


class _DeltaFunction(_Sparse):
    name: str | None = None
    arguments: str | None = None


class _DeltaToolCall(_Sparse):
    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: _DeltaFunction


class _Delta(_Sparse):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[_DeltaToolCall] | None = None


class _ChunkChoice(_Wire):
    index: int = 0
    delta: _Delta
    logprobs: None = None
    finish_reason: FinishReason | None = None


class _Chunk(_Wire):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[_ChunkChoice]
    service_tier: str = "default"
    system_fingerprint: str = "fp_scripted"
    usage: _Usage | None = None


class _ErrorDetail(_Wire):
    message: str
    type: str
    param: str | None
    code: str | None


class _ErrorBody(_Wire):
    error: _ErrorDetail


def _error_body(failure: ScriptedError) -> bytes:
    detail = _ErrorDetail(
        message=failure.message, type=failure.type, param=failure.param, code=failure.code
    )
    return _ErrorBody(error=detail).model_dump_json().encode()


def _split(text: str, size: int) -> list[str]:
    return [text[start : start + size] for start in range(0, len(text), size)]


def _usage_for(request: RecordedRequest, reply: ScriptedReply) -> _Usage:
    usage = reply.usage
    if usage is None:
        prompt = json.dumps([request.messages, request.tools], ensure_ascii=False)
        completion = (reply.content or "") + "".join(
            call.name + call.arguments_json for call in reply.calls
        )
        usage = ScriptedUsage(
            prompt_tokens=_estimate_tokens(prompt),
            completion_tokens=_estimate_tokens(completion),
        )
    return _Usage(
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        total_tokens=usage.total_tokens,
    )


def _completion(request: RecordedRequest, reply: ScriptedReply) -> _Completion:
    tool_calls = [
        _ToolCall(id=call.id, function=_Function(name=call.name, arguments=call.arguments_json))
        for call in reply.calls
    ]
    message = _Message(content=reply.content, tool_calls=tool_calls or None)
    return _Completion(
        id=f"chatcmpl-{secrets.token_hex(12)}",
        created=int(time.time()),
        model=request.model or _DEFAULT_MODEL,
        choices=[_Choice(message=message, finish_reason=reply.effective_finish_reason)],
        usage=_usage_for(request, reply),
    )


def _stream_events(request: RecordedRequest, reply: ScriptedReply) -> list[bytes]:
    """The SSE events of a streamed reply, each one ``data: ...`` line pair, ``[DONE]`` last."""
    completion_id = f"chatcmpl-{secrets.token_hex(12)}"
    created = int(time.time())
    model = request.model or _DEFAULT_MODEL
    include_usage = request.include_usage

    def chunk(choices: list[_ChunkChoice], usage: _Usage | None = None) -> bytes:
        payload = _Chunk(
            id=completion_id, created=created, model=model, choices=choices, usage=usage
        ).model_dump(mode="json")
        if not include_usage:
            # The API only sends "usage": null on every chunk when usage was asked for.
            payload.pop("usage")
        return b"data: " + json.dumps(payload, ensure_ascii=False).encode() + b"\n\n"

    def delta(value: _Delta, finish_reason: FinishReason | None = None) -> bytes:
        return chunk([_ChunkChoice(delta=value, finish_reason=finish_reason)])

    # Like the API: the first delta has the role, and an empty content only for text replies.
    events = [delta(_Delta(role="assistant", content="" if reply.content is not None else None))]
    events += [
        delta(_Delta(content=piece)) for piece in _split(reply.content or "", reply.chunk_size)
    ]
    for index, call in enumerate(reply.calls):
        opening = _DeltaToolCall(
            index=index,
            id=call.id,
            type="function",
            function=_DeltaFunction(name=call.name, arguments=""),
        )
        events.append(delta(_Delta(tool_calls=[opening])))
        events += [
            delta(
                _Delta(
                    tool_calls=[
                        _DeltaToolCall(index=index, function=_DeltaFunction(arguments=piece))
                    ]
                )
            )
            for piece in _split(call.arguments_json, reply.chunk_size)
        ]
    events.append(delta(_Delta(), reply.effective_finish_reason))
    if include_usage:
        events.append(chunk([], _usage_for(request, reply)))
    events.append(b"data: [DONE]\n\n")
    return events


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class _Outcome(enum.Enum):
    KEEP_ALIVE = "keep-alive"
    """The response was sent completely and the connection can serve another request."""
    CLOSE = "close"
    """The response was sent (or deliberately cut short); close the connection."""
    DISCONNECTED = "disconnected"
    """The client went away before the response was completely sent."""


class _BadRequest(Exception):
    """The request could not be parsed; answered with ``status`` and the connection closed."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(frozen=True, slots=True, kw_only=True)
class _Request:
    method: str
    target: str
    version: str
    headers: dict[str, str]
    body: bytes

    @property
    def keep_alive(self) -> bool:
        tokens = {token.strip().lower() for token in self.headers.get("connection", "").split(",")}
        if self.version == "HTTP/1.0":
            return "keep-alive" in tokens
        return "close" not in tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class _Response:
    """Bytes to send: ``prefix`` at once, then ``parts`` (the chunks), then ``suffix``."""

    prefix: bytes
    parts: Sequence[bytes]
    suffix: bytes
    keep_alive: bool


def _head(status: int, headers: Mapping[str, str]) -> bytes:
    try:
        reason = http.HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def _json_response(
    status: int,
    body: bytes,
    *,
    keep_alive: bool,
    head_only: bool = False,
    extra: Mapping[str, str] | None = None,
) -> _Response:
    headers = {
        "content-type": "application/json",
        "content-length": str(len(body)),
        "x-request-id": f"req_{secrets.token_hex(12)}",
        "connection": "keep-alive" if keep_alive else "close",
        **(extra or {}),
    }
    message = _head(status, headers) + (b"" if head_only else body)
    return _Response(prefix=b"", parts=[message], suffix=b"", keep_alive=keep_alive)


def _sse_response(
    events: Sequence[bytes], *, keep_alive: bool, chunked: bool, extra: Mapping[str, str]
) -> _Response:
    headers = {
        "content-type": "text/event-stream; charset=utf-8",
        "cache-control": "no-cache",
        "x-request-id": f"req_{secrets.token_hex(12)}",
    }
    if chunked:
        headers["transfer-encoding"] = "chunked"
        headers["connection"] = "keep-alive" if keep_alive else "close"
        parts = [f"{len(event):x}\r\n".encode() + event + b"\r\n" for event in events]
        return _Response(
            prefix=_head(200, {**headers, **extra}),
            parts=parts,
            suffix=b"0\r\n\r\n",
            keep_alive=keep_alive,
        )
    # HTTP/1.0 has no chunked encoding: the body ends when the connection closes.
    headers["connection"] = "close"
    return _Response(
        prefix=_head(200, {**headers, **extra}), parts=events, suffix=b"", keep_alive=False
    )


class _Connection:
    """One client connection: a read buffer over the stream, and the writer."""

    def __init__(
        self, number: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        self.number = number
        self._reader = reader
        self.writer = writer
        self._buffer = bytearray()
        self._eof = False

    async def _fill(self) -> bool:
        """Read more bytes into the buffer; ``False`` once the peer has closed."""
        if self._eof:
            return False
        try:
            data = await self._reader.read(_READ_SIZE)
        except OSError:
            data = b""
        if not data:
            self._eof = True
            return False
        self._buffer += data
        return True

    async def wait_peer_closed(self) -> None:
        """Return when the peer closes; bytes that arrive meanwhile stay buffered."""
        while await self._fill():
            pass

    async def _read_line(self) -> bytes:
        while (end := self._buffer.find(b"\r\n")) < 0:
            if len(self._buffer) > _MAX_HEAD_BYTES:
                raise _BadRequest(400, "line too long")
            if not await self._fill():
                raise _BadRequest(400, "connection closed mid-request")
        line = bytes(self._buffer[:end])
        del self._buffer[: end + 2]
        return line

    async def _read_exactly(self, size: int) -> bytes:
        while len(self._buffer) < size:
            if not await self._fill():
                raise _BadRequest(400, "connection closed mid-body")
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    async def read_request(self) -> _Request | None:
        """Read one request; ``None`` when the peer closed between requests."""
        while True:
            # RFC 9112 2.2: ignore empty lines before a request line.
            while self._buffer.startswith(b"\r\n"):
                del self._buffer[:2]
            end = self._buffer.find(b"\r\n\r\n")
            if end >= 0:
                break
            if len(self._buffer) > _MAX_HEAD_BYTES:
                raise _BadRequest(431, "request head too large")
            if not await self._fill():
                if self._buffer:
                    raise _BadRequest(400, "connection closed mid-request")
                return None
        head = bytes(self._buffer[:end]).decode("latin-1")
        del self._buffer[: end + 4]
        request_line, *header_lines = head.split("\r\n")
        parts = request_line.split(" ")
        if len(parts) != 3:
            raise _BadRequest(400, f"malformed request line {request_line!r}")
        method, target, version = parts
        if version not in ("HTTP/1.1", "HTTP/1.0"):
            raise _BadRequest(505, f"unsupported HTTP version {version!r}")
        headers: dict[str, str] = {}
        for line in header_lines:
            name, colon, value = line.partition(":")
            if not colon or not name or name != name.strip():
                raise _BadRequest(400, f"malformed header line {line!r}")
            key = name.lower()
            value = value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        if headers.get("expect", "").lower() == "100-continue":
            await self.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        body = await self._read_body(headers)
        return _Request(method=method, target=target, version=version, headers=headers, body=body)

    async def _read_body(self, headers: Mapping[str, str]) -> bytes:
        encoding = headers.get("transfer-encoding")
        length = headers.get("content-length")
        if encoding is not None:
            if length is not None:
                raise _BadRequest(400, "both Transfer-Encoding and Content-Length")
            if encoding.lower() != "chunked":
                raise _BadRequest(501, f"unsupported transfer encoding {encoding!r}")
            return await self._read_chunked()
        if length is None:
            return b""
        if not length.isdigit():
            raise _BadRequest(400, f"bad Content-Length {length!r}")
        if int(length) > _MAX_BODY_BYTES:
            raise _BadRequest(413, "request body too large")
        return await self._read_exactly(int(length))

    async def _read_chunked(self) -> bytes:
        body = bytearray()
        while True:
            size_field = (await self._read_line()).split(b";", 1)[0].strip()
            try:
                size = int(size_field, 16)
            except ValueError:
                raise _BadRequest(400, f"bad chunk size {size_field!r}") from None
            if size == 0:
                while await self._read_line():  # trailers, up to the blank line
                    pass
                return bytes(body)
            if len(body) + size > _MAX_BODY_BYTES:
                raise _BadRequest(413, "request body too large")
            body += await self._read_exactly(size)
            if await self._read_exactly(2) != b"\r\n":
                raise _BadRequest(400, "chunk not followed by CRLF")

    async def write(self, data: bytes) -> None:
        if data:
            self.writer.write(data)
            await self.writer.drain()

    async def send(self, response: _Response, reply: ScriptedReply | None) -> _Outcome:
        """Send a response, applying the reply's pause and drop controls chunk by chunk."""
        pause_after = reply.pause_after if reply else None
        drop_after = reply.drop_after if reply else None
        gate = reply.gate if reply else None
        parts = [*response.parts, response.suffix]
        try:
            await self.write(response.prefix)
            for position, part in enumerate(parts):
                if position == drop_after:
                    return _Outcome.CLOSE
                if position == pause_after and gate is not None:
                    await gate.wait()
                await self.write(part)
        except ConnectionError:
            return _Outcome.DISCONNECTED
        return _Outcome.KEEP_ALIVE if response.keep_alive else _Outcome.CLOSE

    async def close(self, *, abort: bool) -> None:
        if abort:
            self.writer.transport.abort()
        else:
            self.writer.close()
        # A reset from the peer means the connection is closed either way.
        with contextlib.suppress(OSError):
            await self.writer.wait_closed()


class ScriptedOpenAIServer:
    """An OpenAI-compatible Chat Completions server on ``127.0.0.1`` that follows a script.

    Each chat completion request takes the next reply from the queue (:meth:`enqueue`); when the
    queue is empty the ``responder``, if any, decides. With neither, the request fails with HTTP
    500 ("unexpected request: script exhausted") and the failure is recorded, so
    :meth:`assert_done` raises. Every request is recorded in :attr:`requests`.

    Use it as an async context manager: entering binds a free port, leaving closes the listening
    socket and every connection and cancels every task the server started.
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
        self._state = _State.UNOPENED

    async def __aenter__(self) -> Self:
        if self._state is not _State.UNOPENED:
            raise UsageError(
                f"This ScriptedOpenAIServer is {self._state.value}; it can be entered only once"
            )
        self._server = await asyncio.start_server(
            self._on_connect, "127.0.0.1", self._requested_port
        )
        self._port = int(self._server.sockets[0].getsockname()[1])
        self._state = _State.OPEN
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
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
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
        """Why requests could not be answered from the script (what :meth:`assert_done` reports)."""
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
        if self._state is not _State.OPEN:
            writer.transport.abort()
            return
        connection = _Connection(self._connection_count, reader, writer)
        self._connection_count += 1
        task = asyncio.get_running_loop().create_task(self._serve(connection))
        self._connections.add(task)
        task.add_done_callback(self._connections.discard)

    async def _serve(self, connection: _Connection) -> None:
        abort = True
        try:
            while await self._exchange(connection):
                pass
            abort = False
        except Exception as exc:  # A bug in this server: surface it through assert_done().
            self._failures.append(f"server error: {exc!r}")
        finally:
            await connection.close(abort=abort)

    async def _exchange(self, connection: _Connection) -> bool:
        """Read one request and answer it; ``True`` to keep the connection open."""
        try:
            raw = await connection.read_request()
        except _BadRequest as exc:
            self._failures.append(f"malformed HTTP request: {exc.message}")
            failure = ScriptedError(
                status_code=exc.status, message=exc.message, type="invalid_request_error"
            )
            response = _json_response(exc.status, _error_body(failure), keep_alive=False)
            await connection.send(response, None)
            return False
        if raw is None:
            return False
        recorded = await self._record(connection.number, raw)
        reply = await self._choose(raw, recorded)
        return await self._answer(connection, raw, recorded, reply)

    async def _record(self, connection: int, raw: _Request) -> RecordedRequest:
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

    async def _choose(self, raw: _Request, recorded: RecordedRequest) -> ScriptedReply:
        """The reply for a request: scripted, from the responder, or an error it has earned."""
        where = f"request {recorded.index} ({recorded.method} {recorded.path})"
        if recorded.method != "POST" or recorded.path not in _CHAT_COMPLETIONS_PATHS:
            self._failures.append(f"unexpected {where}: no such endpoint")
            return ScriptedReply.error(
                404, f"Invalid URL ({recorded.method} {recorded.path})", code="unknown_url"
            )
        if not recorded.body:
            self._failures.append(f"{where}: the body is empty or not a JSON object")
            return ScriptedReply.error(400, "The request body must be a JSON object.")
        if self._replies:
            return self._replies.popleft()
        if self._responder is not None:
            try:
                produced = await _call_responder(self._responder, recorded)
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
        connection: _Connection,
        raw: _Request,
        recorded: RecordedRequest,
        reply: ScriptedReply,
    ) -> bool:
        """Send the reply while watching for the client to go away; ``True`` to keep alive."""
        async with asyncio.TaskGroup() as tasks:
            sending = tasks.create_task(self._send_reply(connection, raw, recorded, reply))
            watching = tasks.create_task(connection.wait_peer_closed())
            sending.add_done_callback(lambda _: watching.cancel())
            watching.add_done_callback(lambda _: sending.cancel())
        outcome = _Outcome.DISCONNECTED if sending.cancelled() else sending.result()
        if outcome is _Outcome.DISCONNECTED:
            # The server is the only writer of this flag; tests only read and await it.
            recorded._disconnected.set()  # pyright: ignore[reportPrivateUsage]
        return outcome is _Outcome.KEEP_ALIVE

    async def _send_reply(
        self,
        connection: _Connection,
        raw: _Request,
        recorded: RecordedRequest,
        reply: ScriptedReply,
    ) -> _Outcome:
        if reply.hold is not None:
            await reply.hold.wait()
        if reply.delay:
            await asyncio.sleep(reply.delay)
        keep_alive = raw.keep_alive
        if reply.api_error is not None:
            response = _json_response(
                reply.api_error.status_code,
                _error_body(reply.api_error),
                keep_alive=keep_alive,
                head_only=raw.method == "HEAD",
                extra=reply.headers,
            )
        elif recorded.is_stream:
            response = _sse_response(
                _stream_events(recorded, reply),
                keep_alive=keep_alive,
                chunked=raw.version == "HTTP/1.1",
                extra=reply.headers,
            )
        else:
            body = _completion(recorded, reply).model_dump_json().encode()
            response = _json_response(200, body, keep_alive=keep_alive, extra=reply.headers)
        return await connection.send(response, reply)
