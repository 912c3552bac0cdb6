"""The scripted values: replies, tool calls, usage, errors, and the recorded requests."""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import KW_ONLY, dataclass, field
from typing import Any, Literal, Self, TypedDict, Unpack, cast

from asyncsession.exceptions import UsageError

__all__ = [
    "DEFAULT_MODEL",
    "RecordedRequest",
    "Responder",
    "ScriptedError",
    "ScriptedReply",
    "ScriptedToolCall",
    "estimate_tokens",
    "json_objects",
]

ResponseOutcome = Literal["completed", "failed", "incomplete", "error"]
"""How a scripted Responses API reply ends."""
FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "function_call"]
"""Why the model stopped, as the Chat Completions API reports it."""

DEFAULT_MODEL = "scripted-model"


def estimate_tokens(text: str) -> int:
    """Roughly one token per four characters, and never zero: good enough for a fake."""
    return max(1, (len(text) + 3) // 4)


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
    id: str = field(default_factory=lambda: f"call_{secrets.token_hex(12)}")
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


class ScriptedReplyOptions(TypedDict, total=False):
    """Keyword options shared by
    [`ScriptedReply.text`][asyncsession.testing._openai_server.script.ScriptedReply.text] and
    `ScriptedReply.tool_calls`.

    Each key is the [`ScriptedReply`][asyncsession.testing._openai_server.script.ScriptedReply]
    field of the same name.
    """

    finish_reason: FinishReason
    prompt_tokens: int
    completion_tokens: int
    chunk_size: int
    pause_after: int
    gate: asyncio.Event
    drop_after: int
    hold: asyncio.Event
    delay: float
    headers: Mapping[str, str]
    reasoning: str
    items: Sequence[Mapping[str, Any]]
    outcome: ResponseOutcome


@dataclass(frozen=True, slots=True, kw_only=True)
class ScriptedReply:
    """What the server answers to one chat completion request.

    Build one with [`text`][asyncsession.testing._openai_server.script.ScriptedReply.text],
    [`tool_calls`][asyncsession.testing._openai_server.script.ScriptedReply.tool_calls] or
    [`error`][asyncsession.testing._openai_server.script.ScriptedReply.error], or directly. The same
    reply serves streaming and non-streaming requests: the request's ``stream`` flag decides the
    shape.

    "Chunks" in the fault controls are the SSE events of a streamed reply, ``data: [DONE]``
    included; a non-streaming reply is a single chunk (its body). A dropped reply ends as a
    connection the server closed: the client raises a connection error.
    """

    content: str | None = None
    """The assistant's text; ``None`` for a reply with tool calls only."""
    calls: tuple[ScriptedToolCall, ...] = ()
    """Tool calls, in order; several make a parallel tool call."""
    finish_reason: FinishReason | None = None
    """Overrides the derived finish reason (``"tool_calls"`` with calls, else ``"stop"``)."""
    prompt_tokens: int | None = None
    """Reported input tokens; with ``completion_tokens``, else both are estimated from sizes."""
    completion_tokens: int | None = None
    """Reported output tokens; given with ``prompt_tokens``."""
    api_error: ScriptedError | None = None
    """When set, the request fails with this HTTP error instead of completing."""
    chunk_size: int = 4
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
    reasoning: str | None = None
    """Responses API only: a reasoning summary; the reply then starts with a ``reasoning`` item
    (with ``encrypted_content``) whose summary streams as ``reasoning_summary_text`` deltas."""
    items: Sequence[Mapping[str, Any]] = ()
    """Responses API only: output items sent as given, after the reasoning item and before the
    message (hosted-tool items such as ``image_generation_call`` or ``web_search_call``).
    Streamed, each is announced by ``response.output_item.added`` (with ``status:
    "in_progress"``) and closed by ``response.output_item.done``. A reply of items alone has
    ``content=None``."""
    outcome: ResponseOutcome = "completed"
    """Responses API only: how the response ends. ``"failed"`` and ``"incomplete"`` end it
    with that status (the ``response.failed`` / ``response.incomplete`` event when streamed),
    ``"error"`` with an ``error`` event (HTTP 500 when not streamed)."""

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
        if (self.prompt_tokens is None) != (self.completion_tokens is None):
            raise UsageError("prompt_tokens and completion_tokens must be given together")
        if self.api_error is not None and (
            self.content is not None
            or self.calls
            or self.finish_reason
            or self.prompt_tokens is not None
            or self.reasoning is not None
            or self.items
        ):
            raise UsageError(
                "an error reply carries no content, tool calls, finish reason or usage"
            )
        for item in self.items:
            if not isinstance(item.get("type"), str) or not isinstance(item.get("id"), str):
                raise UsageError(f"a scripted output item needs a string type and id: {item!r}")
        object.__setattr__(self, "calls", tuple(self.calls))
        object.__setattr__(self, "items", tuple(dict(item) for item in self.items))
        object.__setattr__(self, "headers", dict(self.headers))

    @classmethod
    def text(cls, content: str, **options: Unpack[ScriptedReplyOptions]) -> Self:
        """A plain assistant message.

        Args:
            content: The assistant's text.
            **options: Further
                [`ScriptedReply`][asyncsession.testing._openai_server.script.ScriptedReply] fields
                (finish reason, usage, faults).
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
            **options: Further
                [`ScriptedReply`][asyncsession.testing._openai_server.script.ScriptedReply] fields
                (finish reason, usage, faults).
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
    """One HTTP request the server received, in arrival order.

    Its properties read the body as the APIs define it: ``messages`` (Chat Completions),
    ``input`` (the Responses API), ``tools``, ``model``, ``is_stream``, and ``user_text``, the
    text of the last user message in either shape.
    """

    index: int
    """Position in `ScriptedOpenAIServer.requests`."""
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
        return json_objects(self.body.get("messages"))

    @property
    def input(self) -> list[dict[str, Any]]:
        """The Responses API ``input`` items (a string input as one user message)."""
        value = self.body.get("input")
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        return json_objects(value)

    @property
    def user_text(self) -> str:
        """The text of the last user message the request sent (either API); empty if none."""
        for message in reversed(self.input if "input" in self.body else self.messages):
            if message.get("role") == "user":
                content: object = message.get("content")
                if isinstance(content, str):
                    return content
                parts = json_objects(content)
                return "".join(str(p.get("text", "")) for p in parts if "text" in p)
        return ""

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The ``tools`` the client offered (an empty list when absent)."""
        return json_objects(self.body.get("tools"))

    @property
    def is_stream(self) -> bool:
        """Whether the client asked for a streamed (SSE) response."""
        return self.body.get("stream") is True

    @property
    def include_usage(self) -> bool:
        """Whether the client asked for a usage chunk at the end of the stream."""
        options = json_objects([self.body.get("stream_options")])
        return bool(options) and options[0].get("include_usage") is True

    @property
    def disconnected(self) -> bool:
        """Whether the client went away before the response was completely sent."""
        return self._disconnected.is_set()

    async def wait_disconnected(self) -> None:
        """Wait until the client has gone away mid-response (wrap in ``asyncio.timeout``)."""
        await self._disconnected.wait()


def json_objects(value: object) -> list[dict[str, Any]]:
    """The JSON objects in a parsed JSON list; anything else is ignored."""
    if not isinstance(value, list):
        return []
    items = cast(list[object], value)
    return [cast(dict[str, Any], item) for item in items if isinstance(item, dict)]


Responder = Callable[[RecordedRequest], ScriptedReply | Awaitable[ScriptedReply]]
"""Decides the reply to a request; may be a plain or an ``async`` function."""
