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
returns exactly that (thinking parts with signatures, images and binary content, builtin tool
parts, usage, timestamps and fields of later Pydantic AI versions included). Events written by
others (a summary compaction wrote, a message of our chat client) have no such dump and are
converted from the message.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, cast

from pydantic import JsonValue

from .._checks import (
    require_event,
    require_int,
    require_nonblank,
    require_service,
    require_text,
    require_type,
)
from .._shield import shielded
from ..compaction import CompactionResult, CompactionStrategy, TriggerLike
from ..events import CreateSessionRequest, SessionEvent
from ..exceptions import SessionExists, SessionNotFound, UsageError
from ..filters import EventFilter
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

__all__ = [
    "METADATA_KEY",
    "PydanticAIHistory",
    "from_event",
    "to_event",
    "to_message",
    "whole_turns_window",
]

METADATA_KEY: Final = "pydantic_ai"
"""The event metadata key that holds the whole ``ModelMessage`` (its JSON-mode dump)."""
_PENDING_LIMIT: Final = 64
"""How many failed ``store`` batches a history remembers for their retries."""


def _dump(message: ModelMessage) -> dict[str, JsonValue]:
    dumped = ModelMessagesTypeAdapter.dump_python([message], mode="json")
    return cast("dict[str, JsonValue]", dumped[0])


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


def to_message(message: ModelMessage) -> Message:
    """The API-neutral view of ``message``: what our clients, compaction and recall read.

    Lossy on its own (the event's metadata keeps the rest, see
    [`to_event`][asyncsession.integrations.pydantic_ai.to_event]).

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


def to_event(message: ModelMessage, session_id: str, event_id: str | None = None) -> SessionEvent:
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
        "message": to_message(message),
        "metadata": {METADATA_KEY: _dump(message)},
    }
    if event_id is not None:
        fields["id"] = event_id
    if message.timestamp is not None:
        fields["timestamp"] = message.timestamp
    return SessionEvent(**fields)


def _from_message(message: Message) -> ModelMessage:
    if isinstance(message, AssistantMessage):
        parts: list[Any] = [TextPart(content=message.text)] if message.text else []
        parts += [
            ToolCallPart(tool_name=call.name, args=call.arguments, tool_call_id=call.id)
            for call in message.tool_calls
        ]
        return ModelResponse(parts=parts)
    if isinstance(message, ToolResponseMessage):
        return ModelRequest(
            parts=[
                ToolReturnPart(tool_name=r.name, content=r.data, tool_call_id=r.id)
                for r in message.responses
            ]
        )
    if isinstance(message, SystemMessage):
        return ModelRequest(parts=[SystemPromptPart(content=message.text)])
    return ModelRequest(parts=[UserPromptPart(content=message.text)])


def from_event(event: SessionEvent) -> ModelMessage:
    """The ``ModelMessage`` an event holds: the stored one when the event has it, else one
    converted from the event's message (a summary, a message another client wrote).

    Raises:
        UsageError: ``event`` is not a `SessionEvent`, or it holds no message.
    """
    stored = require_event(event, "event").metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        return ModelMessagesTypeAdapter.validate_python([stored])[0]
    if event.message is None:
        raise UsageError(f"event {event.id!r} holds no message")
    return _from_message(event.message)


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


def _fingerprint(messages: Sequence[ModelMessage]) -> str:
    return hashlib.sha256(ModelMessagesTypeAdapter.dump_json(list(messages))).hexdigest()


class PydanticAIHistory:
    """A Pydantic AI message history kept in a session of a ``SessionService``.

    ``store(result.new_messages())`` after a run (``agent.run``, ``agent.run_stream``,
    ``agent.iter``), ``message_history=await history.load()`` before the next. Any service works:
    ``DefaultSessionService`` over the in-memory or the MongoDB repository, or a store of your
    own; one object may serve concurrent runs, and several objects may share one session id.

    **Storage.** Each ``store`` call appends its messages as one batch of events (one version),
    creating the session on the first write, owned by ``user_id``. ``load`` reads the active view:
    what compaction archived is left out, a summary it wrote is included (as a user request and
    a response).

    **Idempotency.** Event ids are drawn from the service before the write. A batch whose write
    failed (a lost acknowledgement, a timeout) keeps its ids: storing the same messages again on
    this object reuses them, so a write that did land is a replay and nothing is stored twice.
    Equal messages stored by separate successful calls are stored twice, as they happened.

    **Windows.** ``load(limit=n)`` returns about the newest ``n`` messages, extended back to a
    request that answers no tool call, so the model never sees a tool return without its call.

    **Compaction.** Give a ``trigger`` and a ``strategy`` and ``store`` compacts after each write
    when the trigger fires;
    [`compact`][asyncsession.integrations.pydantic_ai.PydanticAIHistory.compact] runs it on
    demand.

    Requests of system prompts only are system messages, stored only by a service built with
    ``allow_system_messages=True`` (``store`` raises ``UsageError`` otherwise); Pydantic AI
    normally sends its system prompt in the first user request, which is a user message.

    Args:
        session_id: the session's id.
        service: where the session lives.
        user_id: the owner of a session this object creates; defaults to ``session_id``.
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
        self._exists: bool | None = None
        self._pending: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def __repr__(self) -> str:
        return f"PydanticAIHistory(session_id={self.session_id!r})"

    async def load(self, *, limit: int | None = None) -> list[ModelMessage]:
        """The active messages, oldest first, for ``message_history=``; with a limit, about the
        newest ``limit`` of them, never starting with a tool return."""
        if limit is not None and limit <= 0:
            return []
        read = (
            EventFilter.active()
            if limit is None
            else EventFilter(exclude_archived=True, active_view=True, last_n=limit)
        )
        snapshot = await self.service.get_snapshot(self.session_id, read)
        self._exists = snapshot is not None
        if snapshot is None:
            return []
        messages = [from_event(event) for event in snapshot.events]
        if limit is not None and messages and not _starts_turn(messages[0]):
            messages = _cut(await self.load(), limit)  # the window split a tool round: widen it
        return messages

    async def store(self, messages: Sequence[ModelMessage]) -> None:
        """Append ``messages`` (typically ``result.new_messages()``) as one batch of events.

        A retry of a batch that failed on this object stores nothing twice (see the class
        docs). The write runs to its end if the caller is cancelled.

        Raises:
            UsageError: a request of system prompts only while the service stores none.
        """
        if not messages:
            return
        key = _fingerprint(messages)
        ids = self._pending.pop(key, None)
        if ids is None:  # new ids
            ids = tuple([str(uuid.uuid4()) for _ in messages])
        events = [
            to_event(message, self.session_id, event_id)
            for event_id, message in zip(ids, messages, strict=True)
        ]
        try:
            await shielded(self._append(events))
        except Exception:
            self._pending[key] = ids
            while len(self._pending) > _PENDING_LIMIT:
                self._pending.popitem(last=False)
            raise
        if self._trigger is not None:
            await self.compact()

    async def _append(self, events: Sequence[SessionEvent]) -> None:
        if self._exists is False:
            await self._create()
        try:
            await self.service.append_events(self.session_id, events)
        except SessionNotFound:
            await self._create()
            await self.service.append_events(self.session_id, events)
        self._exists = True

    async def _create(self) -> None:
        request = CreateSessionRequest(
            id=self.session_id, user_id=self.user_id, metadata=self.metadata
        )
        with contextlib.suppress(SessionExists):  # created by another writer: append to it
            await self.service.create(request)

    async def compact(self) -> CompactionResult | None:
        """Compact with the trigger and strategy now; ``None`` without them or a session."""
        if self._trigger is None or self._strategy is None:
            return None
        try:
            return await self.service.compact(self.session_id, self._trigger, self._strategy)
        except SessionNotFound:
            return None
