# pyright: reportDeprecated=false
# (RetryPromptPart is deprecated in pydantic-ai 2.68, but histories stored before still hold it:
# the adapter reads and converts it, and builds none.)
"""``PydanticAIHistory``: Pydantic AI message histories on a ``SessionService``.

Needs Pydantic AI: the ``[pydantic-ai]`` extra (``pip install '.[pydantic-ai]'`` from a clone). ::

    history = PydanticAIHistory("conversation-42", service, user_id="alice")
    result = await agent.run("Hello", message_history=await history.load())
    await history.store(result.new_messages())

Every ``ModelMessage`` is one real message event (a ``ModelResponse`` an assistant message, a
request that answers tool calls a tool message, any other request a user message), which also
keeps the whole message, as ``ModelMessagesTypeAdapter`` dumps it, in its metadata under
``"pydantic_ai"``: ``load`` returns exactly what was stored. Events written by others (a
summary, a message of our chat client) are converted from their message.
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

from .._checks import require_int, require_many, require_type
from ..compaction import CompactionResult, CompactionStrategy
from ..compaction_protocols import TriggerLike
from ..events import SessionEvent, utc_now
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
from ._session import History, whole_turns

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
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

__all__ = ["PydanticAIHistory", "whole_turns_window"]

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


def _with_parts(message: ModelMessage, change: Callable[[object], object]) -> ModelMessage:
    """``message`` with ``change`` applied to the free-form fields of its parts."""
    parts: list[Any] = [
        dataclasses.replace(
            part,
            **{name: change(getattr(part, name)) for name in _FREE_FORM if hasattr(part, name)},
        )
        for part in cast("list[Any]", message.parts)
    ]
    return cast("ModelMessage", dataclasses.replace(cast("Any", message), parts=parts))


def _dump(message: ModelMessage) -> dict[str, JsonValue]:
    """The message's JSON-mode dump, bytes in its parts' free-form fields kept as bytes."""
    dumped = ModelMessagesTypeAdapter.dump_python([_with_parts(message, _wrap_bytes)], mode="json")
    return cast("dict[str, JsonValue]", dumped[0])


def _load(stored: dict[str, Any]) -> ModelMessage:
    message = ModelMessagesTypeAdapter.validate_python([stored])[0]
    return _with_parts(message, _unwrap_bytes)


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


def _to_message(message: ModelMessage) -> Message:
    """The API-neutral view of ``message`` (lossy: the event's metadata keeps the rest)."""
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


def _to_event(message: ModelMessage, session_id: str, event_id: str) -> SessionEvent:
    """The message event that stores ``message`` losslessly (the whole message in metadata)."""
    return SessionEvent(
        id=event_id,
        session_id=session_id,
        message=_to_message(message),
        metadata={METADATA_KEY: _dump(message)},
        timestamp=message.timestamp or utc_now(),
    )


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
    """The ``ModelMessage`` a message event holds: the stored one, else one converted from its
    message."""
    stored = event.metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        return _load(stored)
    assert event.message is not None  # the active view holds message events only
    return _from_message(event.message, event.timestamp)


def _starts_turn(message: ModelMessage) -> bool:
    """A request that answers no tool call: the model is never handed an orphaned return."""
    return isinstance(message, ModelRequest) and not any(_answers_tools(p) for p in message.parts)


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
        return whole_turns(messages, keep, _starts_turn)

    return window


class PydanticAIHistory(History):
    """A Pydantic AI message history kept in a session of a ``SessionService``.

    ``message_history=await history.load()`` before a run (``agent.run``, ``run_stream``,
    ``iter``), ``await history.store(result.new_messages())`` (or ``all_messages()``) after it;
    ``load_sync`` and ``store_sync`` around ``agent.run_sync``. One object may serve concurrent
    runs; several objects and processes may share a session id. What it guarantees (the
    Pydantic AI guide has the details):

    - given a ``user_id``, another user's session raises `AccessDenied` and is left untouched;
      a session it creates is owned by ``user_id`` (else by ``session_id``);
    - each ``store`` appends, as one batch, the messages the session does not hold yet: a
      message's event id derives from the session and the whole message (parts, timestamps,
      run id), so ``store(result.all_messages())`` stores only what the run added and a retry
      from any object or process stores nothing twice (two messages built with equal parts and
      timestamps are one message here);
    - ``load`` returns the active view; ``load(limit=n)`` starts at a request that answers no
      tool call, so a tool return never loses its call;
    - every call runs on the event loop the store belongs to; ``load_sync`` and ``store_sync``
      raise ``UsageError`` in a thread that runs an event loop;
    - with ``trigger`` and ``strategy``, each store compacts when the trigger fires.

    Requests of system prompts only are system messages, stored only by a service built with
    ``allow_system_messages=True``; Pydantic AI normally sends its system prompt in the first
    user request, which is a user message.

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
        super().__init__(session_id, service, user_id, metadata, trigger, strategy)
        self._loaded: dict[str, str] = {}
        """Fingerprint to event id of the last load's messages whose id is not derived (events
        written by others), so storing them again is a replay."""

    async def load(self, *, limit: int | None = None) -> list[ModelMessage]:
        """The active messages, oldest first, for ``message_history=``; with a limit, about the
        newest ``limit`` of them, never starting with a tool return.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        return await self._loop.run(self._read(limit))

    def load_sync(self, *, limit: int | None = None) -> list[ModelMessage]:
        """`load` for sync callers (around ``agent.run_sync``)."""
        return self._loop.run_sync(
            lambda: self._read(limit), method="load_sync", instead="await load()"
        )

    async def _read(self, limit: int | None) -> list[ModelMessage]:
        if limit is not None and limit <= 0:
            return []
        events = await self._session.active(limit)
        messages = [_from_event(event) for event in events]
        if limit is not None and messages and not _starts_turn(messages[0]):
            # the window split a tool round: widen it
            return whole_turns(await self._read(None), limit, _starts_turn)
        self._loaded = {
            fingerprint: event.id
            for event, message in zip(events, messages, strict=True)
            if event.id != self._event_id(fingerprint := _fingerprint(message))
        }
        return messages

    async def store(self, messages: Sequence[ModelMessage]) -> None:
        """Append the ``messages`` the session does not hold yet as one batch of events; the
        write runs to its end if the caller is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a request of system prompts only while the service stores none.
        """
        batch = self._batch(messages)
        if batch:
            await self._loop.run(self._store(batch), write=True)

    def store_sync(self, messages: Sequence[ModelMessage]) -> None:
        """`store` for sync callers (around ``agent.run_sync``)."""
        batch = self._batch(messages)
        if batch:
            self._loop.run_sync(
                lambda: self._store(batch), method="store_sync", instead="await store(...)"
            )

    def _batch(self, messages: Sequence[ModelMessage]) -> list[SessionEvent]:
        require_many(messages, "messages", "a list of Pydantic AI messages")
        events: list[SessionEvent] = []
        for index, message in enumerate(messages):
            hint = " (wrap text in ModelRequest.user_text_prompt(...))"
            require_type(
                message,
                (ModelRequest, ModelResponse),
                f"messages[{index}]",
                "a ModelRequest or ModelResponse",
                hint=hint if isinstance(message, str) else "",
            )
            fingerprint = _fingerprint(message)
            event_id = self._loaded.get(fingerprint) or self._event_id(fingerprint)
            events.append(_to_event(message, self.session_id, event_id))
        return events

    def _event_id(self, fingerprint: str) -> str:
        return str(uuid.uuid5(_ID_NAMESPACE, f"{self.session_id}\x00{fingerprint}"))

    async def _store(self, events: list[SessionEvent]) -> None:
        await self._session.append(events)
        await self._compact()

    async def compact(self) -> CompactionResult | None:
        """Compact with the trigger and strategy now; ``None`` without them or a session.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        return await self._loop.run(self._compact(), write=True)
