# pyright: reportDeprecated=false
# (RetryPromptPart is deprecated in pydantic-ai 2.68, but histories stored before still hold it:
# the adapter reads and converts it, and builds none.)
"""``PydanticAIHistory``: Pydantic AI message histories on a ``SessionService``.

Needs Pydantic AI: the ``[pydantic-ai]`` extra (``pip install '.[pydantic-ai]'`` from a clone). ::

    history = PydanticAIHistory("conversation-42", service, user_id="alice")
    result = await agent.run("Hello", message_history=await history.load())
    await history.store(result.new_messages())

Every ``ModelMessage`` is one real message event, so compaction, recall search, the memory tools,
the CLI and our own clients read the same log: a ``ModelResponse`` is an assistant message (its
text parts as the text, its tool calls as tool calls), a ``ModelRequest`` that answers tool calls
is a tool message, any other request a user message (a request of system prompts only, a system
message). The conversion is lossless: each event also keeps the whole message, as
``ModelMessagesTypeAdapter`` dumps it, in its metadata under ``"pydantic_ai"``, and ``load``
returns exactly that (thinking parts with signatures, images and binary content, bytes in tool
returns, builtin tool parts, usage, timestamps and fields of later Pydantic AI versions
included). Events written by
others (a summary compaction wrote, a message of our chat client) have no such dump and are
converted from the message.

Over 500 lines: the lossless conversion and the history that stores and dedupes by it are one
idea (a message's event id is derived from its conversion).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import uuid
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, cast

from pydantic import JsonValue

from .._checks import (
    require_event,
    require_int,
    require_many,
    require_nonblank,
    require_service,
    require_text,
    require_type,
)
from ..compaction import CompactionResult, CompactionStrategy
from ..compaction_protocols import TriggerLike
from ..events import SessionEvent
from ..exceptions import UsageError
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..service import SessionService
from ._loops import StoreLoop
from ._session import AdapterSession

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelRequestPart,
        ModelResponse,
        ModelResponsePart,
        RetryFeedbackPart,
        RetryPromptPart,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.pydantic_ai needs Pydantic AI: "
        "install the [pydantic-ai] extra (from a clone: pip install '.[pydantic-ai]')"
    ) from _exc

__all__ = [
    "PydanticAIHistory",
    "whole_turns_window",
]

METADATA_KEY: Final = "pydantic_ai"
"""The event metadata key that holds the whole ``ModelMessage`` (its JSON-mode dump)."""
_BYTES: Final = "__bytes_base64__"
"""The key of the object that stands for bytes inside a part's free-form ``content`` or
``metadata`` (a tool's return value): JSON has no bytes, and Pydantic AI's own dump turns them
into base64 text that loads back as text."""
_ID_NAMESPACE: Final = uuid.UUID("3c1e5b0a-8f7d-4e62-9a41-5d2b7c6e8f10")
_FREE_FORM: Final = ("content", "metadata")


def _wrap_bytes(value: object) -> object:
    if isinstance(value, bytes | bytearray):
        return {_BYTES: base64.b64encode(value).decode()}
    if isinstance(value, dict):
        return {key: _wrap_bytes(item) for key, item in cast("dict[object, object]", value).items()}
    if isinstance(value, list | tuple):
        return [_wrap_bytes(item) for item in cast("list[object]", value)]
    return value


def _unwrap_bytes(value: object) -> object:
    if isinstance(value, dict):
        found = cast("dict[object, object]", value)
        encoded = found.get(_BYTES)
        if len(found) == 1 and isinstance(encoded, str):
            return base64.b64decode(encoded)
        return {key: _unwrap_bytes(item) for key, item in found.items()}
    if isinstance(value, list):
        return [_unwrap_bytes(item) for item in cast("list[object]", value)]
    return value


def _has_bytes(value: object) -> bool:
    if isinstance(value, bytes | bytearray):
        return True
    if isinstance(value, dict):
        return any(_has_bytes(item) for item in cast("dict[object, object]", value).values())
    if isinstance(value, list | tuple):
        return any(_has_bytes(item) for item in cast("list[object]", value))
    return False


def _with_parts(
    message: ModelMessage, change: Callable[[object], object], test: Callable[[object], bool]
) -> ModelMessage:
    """``message`` with ``change`` applied to the free-form fields of its parts that ``test``
    picks (the message itself when none)."""
    parts: list[Any] = []
    for part in cast("list[Any]", message.parts):
        fields = {
            name: change(getattr(part, name))
            for name in _FREE_FORM
            if test(getattr(part, name, None))
        }
        parts.append(dataclasses.replace(part, **fields) if fields else part)
    if all(new is old for new, old in zip(parts, message.parts, strict=True)):
        return message
    if isinstance(message, ModelRequest):
        return dataclasses.replace(message, parts=cast("list[ModelRequestPart]", parts))
    return dataclasses.replace(message, parts=cast("list[ModelResponsePart]", parts))


def _dump(message: ModelMessage) -> dict[str, JsonValue]:
    """The message's JSON-mode dump, bytes in its parts' free-form fields kept as bytes."""
    stored = _with_parts(message, _wrap_bytes, _has_bytes)
    dumped = ModelMessagesTypeAdapter.dump_python([stored], mode="json")
    return cast("dict[str, JsonValue]", dumped[0])


def _load(stored: dict[str, Any]) -> ModelMessage:
    message = ModelMessagesTypeAdapter.validate_python([stored])[0]
    return _with_parts(message, _unwrap_bytes, lambda value: isinstance(value, dict | list))


def _fingerprint(message: ModelMessage) -> str:
    dumped = json.dumps(_dump(message), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(dumped.encode()).hexdigest()


def _answers_tools(part: object) -> bool:
    return isinstance(part, ToolReturnPart) or (
        isinstance(part, RetryPromptPart) and part.tool_name is not None
    )


def _user_text(part: object) -> str | None:
    if isinstance(part, UserPromptPart):
        if isinstance(part.content, str):
            return part.content
        return "\n".join(item for item in part.content if isinstance(item, str))
    if isinstance(part, RetryPromptPart) and part.tool_name is None:
        return part.model_response()
    if isinstance(part, RetryFeedbackPart):
        return part.model_response()
    return None


def _tool_response(part: ToolReturnPart | RetryPromptPart) -> ToolResponse:
    data = part.model_response_str() if isinstance(part, ToolReturnPart) else part.model_response()
    return ToolResponse(id=part.tool_call_id, name=part.tool_name or "", data=data)


def _require_model_message(value: object, name: str) -> None:
    hint = " (wrap text in ModelRequest.user_text_prompt(...))" if isinstance(value, str) else ""
    require_type(
        value, (ModelRequest, ModelResponse), name, "a ModelRequest or ModelResponse", hint=hint
    )


def _to_message(message: ModelMessage) -> Message:
    """The API-neutral view of ``message``: what our clients, compaction and recall read.

    Lossy on its own (the event's metadata keeps the rest, see
    `_to_event`).

    Raises:
        UsageError: ``message`` is not a Pydantic AI message.
    """
    _require_model_message(message, "message")
    if isinstance(message, ModelResponse):
        texts = [part.content for part in message.parts if isinstance(part, TextPart)]
        calls = [
            ToolCall(id=part.tool_call_id, name=part.tool_name, arguments=part.args_as_json_str())
            for part in message.parts
            if isinstance(part, ToolCallPart)
        ]
        return AssistantMessage(text="".join(texts) if texts else None, tool_calls=calls)
    answers = [part for part in message.parts if _answers_tools(part)]
    if answers:
        responses = [_tool_response(cast("ToolReturnPart | RetryPromptPart", p)) for p in answers]
        return ToolResponseMessage(responses=responses)
    texts = [text for part in message.parts if (text := _user_text(part)) is not None]
    systems = [part.content for part in message.parts if isinstance(part, SystemPromptPart)]
    if systems and not texts:
        return SystemMessage(text="\n".join(systems))
    return UserMessage(text="\n".join(texts))


def _to_event(message: ModelMessage, session_id: str, event_id: str | None = None) -> SessionEvent:
    """The message event that stores ``message`` losslessly (the whole message in metadata).

    Raises:
        UsageError: ``message`` is not a Pydantic AI message, or an id is not text.
    """
    _require_model_message(message, "message")
    require_text(session_id, "session_id")
    if event_id is not None:
        require_text(event_id, "event_id")
    fields: dict[str, Any] = {
        "session_id": session_id,
        "message": _to_message(message),
        "metadata": {METADATA_KEY: _dump(message)},
    }
    if event_id is not None:
        fields["id"] = event_id
    if message.timestamp is not None:
        fields["timestamp"] = message.timestamp
    return SessionEvent(**fields)


def _from_message(message: Message, at: datetime) -> ModelMessage:
    """A Pydantic AI message for one of ours, stamped with its event's time (so converting the
    same event again gives an equal message)."""
    if isinstance(message, AssistantMessage):
        parts: list[Any] = [TextPart(content=message.text)] if message.text else []
        parts += [
            ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id)
            for call in message.tool_calls
        ]
        return ModelResponse(parts=parts, timestamp=at)
    if isinstance(message, ToolResponseMessage):
        return ModelRequest(
            parts=[
                ToolReturnPart(tool_name=r.name, content=r.data, tool_call_id=r.id, timestamp=at)
                for r in message.responses
            ],
            timestamp=at,
        )
    if isinstance(message, SystemMessage):
        return ModelRequest(parts=[SystemPromptPart(content=message.text, timestamp=at)])
    return ModelRequest(parts=[UserPromptPart(content=message.text, timestamp=at)], timestamp=at)


def _from_event(event: SessionEvent) -> ModelMessage:
    """The ``ModelMessage`` an event holds: the stored one when the event has it, else one
    converted from the event's message (a summary, a message another client wrote).

    Raises:
        UsageError: ``event`` is not a `SessionEvent`, or it holds no message.
    """
    stored = require_event(event, "event").metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        return _load(stored)
    if event.message is None:
        raise UsageError(f"event {event.id!r} holds no message")
    return _from_message(event.message, event.timestamp)


def _starts_turn(message: ModelMessage) -> bool:
    """A request that answers no tool call: the model is never handed an orphaned return."""
    return isinstance(message, ModelRequest) and not any(_answers_tools(p) for p in message.parts)


def _cut(messages: Sequence[ModelMessage], keep: int) -> list[ModelMessage]:
    if keep <= 0:
        return []
    cut = max(len(messages) - keep, 0)
    while cut > 0 and not _starts_turn(messages[cut]):
        cut -= 1
    return list(messages[cut:])


def whole_turns_window(keep: int) -> Callable[[list[ModelMessage]], list[ModelMessage]]:
    """A history processor (``Agent(history_processors=[...])``) keeping about the newest
    ``keep`` messages: the window starts at a request that answers no tool call, extended back
    when it has to be, so a tool call is never split from its return.

    Raises:
        UsageError: ``keep`` is not an int, or is below 1.
    """
    if require_int(keep, "keep") < 1:
        raise UsageError("keep must be at least 1")

    def window(messages: list[ModelMessage]) -> list[ModelMessage]:
        return _cut(messages, keep)

    return window


class PydanticAIHistory:
    """A Pydantic AI message history kept in a session of a ``SessionService``.

    ``message_history=await history.load()`` before a run (``agent.run``, ``agent.run_stream``,
    ``agent.iter``), ``await history.store(result.new_messages())`` (or
    ``result.all_messages()``) after it; ``load_sync`` and ``store_sync`` around
    ``agent.run_sync``. Any service works: ``DefaultSessionService`` over the in-memory or the
    MongoDB repository, or a store of your own; one object may serve concurrent runs, and
    several objects (and processes) may share one session id.

    **Owners.** Given a ``user_id``, the history uses only that user's session: a load or store
    of another user's session raises `AccessDenied` and touches nothing. A session it creates is
    owned by ``user_id`` (by ``session_id`` when none is given; then any session is used).

    **Storage.** Each ``store`` call appends the messages the session does not hold yet as one
    batch of events (one version), creating the session on the first write. ``load`` reads the
    active view: what compaction archived is left out, a summary it wrote is included (as a user
    request and a response).

    **Nothing twice.** A message's event id derives from the session and the whole message
    (its parts, timestamps and run id), so a message the session holds already is a replay
    that stores nothing: storing ``result.all_messages()`` stores only what the run added, and
    a retry after a lost acknowledgement, from any object or process, stores nothing twice. A
    message loaded from an event written by others (a summary) stores as that event. Messages
    of agent runs carry their run's id and timestamps, so two are never taken for one; two
    messages built with equal parts and equal timestamps are one message here.

    **Windows.** ``load(limit=n)`` returns about the newest ``n`` messages, extended back to a
    request that answers no tool call, so the model never sees a tool return without its call.

    **Compaction.** Give a ``trigger`` and a ``strategy`` and ``store`` compacts after each write
    when the trigger fires;
    [`compact`][asyncsession.integrations.pydantic_ai.PydanticAIHistory.compact] runs it on
    demand.

    **Event loops.** Every call runs on the event loop the store belongs to (a MongoDB client
    belongs to the first loop that uses it; when none has, the adapters' own loop, a
    background thread, takes it), so ``asyncio.run`` around single calls, ``run_sync`` and
    threads all work. ``load_sync`` and ``store_sync`` raise ``UsageError`` in a thread that
    runs an event loop (waiting would block it).

    Requests of system prompts only are system messages, stored only by a service built with
    ``allow_system_messages=True`` (``store`` raises ``UsageError`` otherwise); Pydantic AI
    normally sends its system prompt in the first user request, which is a user message.

    Args:
        session_id: the session's id.
        service: where the session lives.
        user_id: the user whose session this is; ``None``: any session.
        metadata: metadata of a session this object creates.
        trigger: compact after a store when this fires (needs ``strategy``).
        strategy: what compaction does (needs ``trigger``).

    Raises:
        UsageError: a blank id, ``service`` not a session service, or only one of ``trigger``
            and ``strategy``.
    """

    session_id: str
    """The session's id."""

    def __init__(
        self,
        session_id: str,
        service: SessionService,
        *,
        user_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        trigger: TriggerLike | None = None,
        strategy: CompactionStrategy | None = None,
    ) -> None:
        require_nonblank(session_id, "session_id")
        require_service(service, "service")
        if user_id is not None:
            require_nonblank(user_id, "user_id")
        if (trigger is None) != (strategy is None):
            raise UsageError("compaction needs both a trigger and a strategy")
        self.session_id = session_id
        self.service = service
        """The service the session lives in."""
        self.user_id: str = user_id or session_id
        """The owner of a session this object creates."""
        self.metadata: dict[str, JsonValue] = dict(metadata or {})
        """Metadata of a session this object creates."""
        self._trigger = trigger
        self._strategy = strategy
        self._session = AdapterSession(
            service, session_id, user_id=user_id, creator=self.user_id, metadata=self.metadata
        )
        self._loop = StoreLoop(service, f"PydanticAIHistory {session_id!r}")
        self._loaded: dict[str, str] = {}
        """Fingerprint to event id of the last load's messages whose id is not derived (events
        written by others), so storing them again is a replay."""

    def __repr__(self) -> str:
        return f"PydanticAIHistory(session_id={self.session_id!r})"

    async def load(self, *, limit: int | None = None) -> list[ModelMessage]:
        """The active messages, oldest first, for ``message_history=``; with a limit, about the
        newest ``limit`` of them, never starting with a tool return.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        return await self._loop.run(self._read(limit))

    def load_sync(self, *, limit: int | None = None) -> list[ModelMessage]:
        """`load` for sync callers (around ``agent.run_sync``); see the class docs."""
        return self._loop.run_sync(
            lambda: self._read(limit), method="load_sync", instead="await load()"
        )

    async def _read(self, limit: int | None) -> list[ModelMessage]:
        if limit is not None and limit <= 0:
            return []
        events = await self._session.active(limit)
        messages = [_from_event(event) for event in events]
        if limit is not None and messages and not _starts_turn(messages[0]):
            return _cut(await self._read(None), limit)  # the window split a tool round: widen it
        self._loaded = {
            fingerprint: event.id
            for event, message in zip(events, messages, strict=True)
            if event.id != self._event_id(fingerprint := _fingerprint(message))
        }
        return messages

    async def store(self, messages: Sequence[ModelMessage]) -> None:
        """Append the ``messages`` the session does not hold yet as one batch of events
        (``result.new_messages()``, or ``result.all_messages()``: see the class docs).

        The write runs to its end if the caller is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a request of system prompts only while the service stores none.
        """
        batch = self._batch(messages)
        if batch:
            await self._loop.run(self._store(batch), write=True)

    def store_sync(self, messages: Sequence[ModelMessage]) -> None:
        """`store` for sync callers (around ``agent.run_sync``); see the class docs."""
        batch = self._batch(messages)
        if batch:
            self._loop.run_sync(
                lambda: self._store(batch), method="store_sync", instead="await store(...)"
            )

    def _batch(self, messages: Sequence[ModelMessage]) -> list[SessionEvent]:
        require_many(messages, "messages", "a list of Pydantic AI messages")
        events: list[SessionEvent] = []
        for index, message in enumerate(messages):
            _require_model_message(message, f"messages[{index}]")
            fingerprint = _fingerprint(message)
            event_id = self._loaded.get(fingerprint) or self._event_id(fingerprint)
            events.append(_to_event(message, self.session_id, event_id))
        return events

    def _event_id(self, fingerprint: str) -> str:
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.session_id}\x00{fingerprint}"))

    async def _store(self, events: list[SessionEvent]) -> None:
        await self._session.append(events)
        if self._trigger is not None:
            await self._compact()

    async def compact(self) -> CompactionResult | None:
        """Compact with the trigger and strategy now; ``None`` without them or a session.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        return await self._loop.run(self._compact(), write=True)

    async def _compact(self) -> CompactionResult | None:
        if self._trigger is None or self._strategy is None:
            return None
        return await self._session.compact(self._trigger, self._strategy)
