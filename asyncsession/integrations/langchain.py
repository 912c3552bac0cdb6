"""``LangChainHistory``: a LangChain chat message history on a ``SessionService``.

Needs LangChain: the ``[langchain]`` extra (``pip install '.[langchain]'`` from a clone). ::

    def get_session_history(session_id: str) -> LangChainHistory:
        return LangChainHistory(session_id, service, history_size=40)

    chain = RunnableWithMessageHistory(prompt | model, get_session_history)
    await chain.ainvoke({"input": "Hello"}, {"configurable": {"session_id": "conversation-42"}})

Every LangChain message is one real message event, so compaction, recall search, the memory
tools, the CLI and our own clients read the same log: a ``HumanMessage`` is a user message, an
``AIMessage`` an assistant message (its text as the text, its tool calls as tool calls), a
``ToolMessage`` (or ``FunctionMessage``) a tool message, a ``SystemMessage`` a system message, a
``ChatMessage`` the message of its role. The conversion is lossless: each event also keeps the
whole message, as ``message_to_dict`` dumps it, in its metadata under ``"langchain"``, and the
history reads exactly that back (content blocks with images and reasoning, tool calls, invalid
tool calls, usage metadata, ``additional_kwargs``, ``response_metadata``, ids, names, artifacts
and fields of later LangChain versions included). Events written by others (a summary
compaction wrote, a message of our chat client) have no such dump and are converted from the
message.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

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
    from langchain_core import messages as lc
    from langchain_core.chat_history import BaseChatMessageHistory
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.langchain needs LangChain: "
        "install the [langchain] extra (from a clone: pip install '.[langchain]')"
    ) from _exc

__all__ = [
    "LangChainHistory",
    "whole_turns",
]

METADATA_KEY: Final = "langchain"
"""The event metadata key that holds the whole LangChain message (``message_to_dict``)."""
_ID_NAMESPACE: Final = uuid.UUID("6f1d3c52-6a55-4b8e-9d0e-7c9b1f0a4e21")
_ASSISTANT_ROLES: Final = frozenset({"ai", "assistant"})
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})


def _dump(message: lc.BaseMessage) -> dict[str, JsonValue]:
    return cast("dict[str, JsonValue]", to_jsonable_python(lc.message_to_dict(message)))


def _text(content: str | list[str | dict[str, Any]]) -> str:
    if isinstance(content, str):
        return content
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif block.get("type") == "text" and isinstance(block.get("text"), str):
            texts.append(cast("str", block["text"]))
    return "".join(texts)


def _arguments(args: Mapping[str, Any]) -> str:
    return json.dumps(to_jsonable_python(args), separators=(",", ":"), ensure_ascii=False)


def _require_lc(value: object, name: str) -> None:
    hint = " (wrap text in HumanMessage(content=...))" if isinstance(value, str) else ""
    require_type(value, lc.BaseMessage, name, "a LangChain message such as HumanMessage", hint=hint)


def _to_message(message: lc.BaseMessage) -> Message:
    """The API-neutral view of ``message``: what our clients, compaction and recall read.

    Lossy on its own (the event's metadata keeps the rest, see
    `_to_event`).

    Raises:
        UsageError: ``message`` is not a LangChain message.
    """
    _require_lc(message, "message")
    text = _text(message.content)
    if isinstance(message, lc.AIMessage):
        calls = [
            ToolCall(id=call["id"] or "", name=call["name"], arguments=_arguments(call["args"]))
            for call in message.tool_calls
        ]
        return AssistantMessage(text=text or None, tool_calls=calls)
    if isinstance(message, lc.ToolMessage):
        name = message.name or ""
        return ToolResponseMessage(
            responses=[ToolResponse(id=message.tool_call_id, name=name, data=text)]
        )
    if isinstance(message, lc.FunctionMessage):
        return ToolResponseMessage(
            responses=[ToolResponse(id=message.name, name=message.name, data=text)]
        )
    if isinstance(message, lc.SystemMessage):
        return SystemMessage(text=text)
    if isinstance(message, lc.ChatMessage):
        if message.role in _ASSISTANT_ROLES:
            return AssistantMessage(text=text or None)
        if message.role in _SYSTEM_ROLES:
            return SystemMessage(text=text)
    return UserMessage(text=text)


def _to_event(
    message: lc.BaseMessage, session_id: str, event_id: str | None = None
) -> SessionEvent:
    """The message event that stores ``message`` losslessly (the whole message in metadata).

    Raises:
        UsageError: ``message`` is not a LangChain message, or an id is not text.
    """
    _require_lc(message, "message")
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
    return SessionEvent(**fields)


def _from_message(message: Message) -> lc.BaseMessage:
    if isinstance(message, AssistantMessage):
        calls = [
            lc.ToolCall(name=c.name, args=json.loads(c.arguments or "{}"), id=c.id)
            for c in message.tool_calls
        ]
        return lc.AIMessage(content=message.text or "", tool_calls=calls)
    if isinstance(message, ToolResponseMessage):
        first = message.responses[0]
        return lc.ToolMessage(content=first.data, tool_call_id=first.id, name=first.name or None)
    if isinstance(message, SystemMessage):
        return lc.SystemMessage(content=message.text)
    return lc.HumanMessage(content=message.text)


def _from_event(event: SessionEvent) -> list[lc.BaseMessage]:
    """The LangChain messages an event holds: the stored one when the event has it, else those
    converted from the event's message (a summary, a message another client wrote; a tool
    message of several results is one ``ToolMessage`` per result).

    Raises:
        UsageError: ``event`` is not a `SessionEvent`, or it holds no message.
    """
    stored = require_event(event, "event").metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        return lc.messages_from_dict([stored])
    if event.message is None:
        raise UsageError(f"event {event.id!r} holds no message")
    if isinstance(event.message, ToolResponseMessage):
        return [
            lc.ToolMessage(content=r.data, tool_call_id=r.id, name=r.name or None)
            for r in event.message.responses
        ]
    return [_from_message(event.message)]


def _starts_turn(message: lc.BaseMessage) -> bool:
    """A message of the user's (or a system message): neither a reply nor a tool result."""
    if isinstance(message, lc.ChatMessage):
        return message.role not in _ASSISTANT_ROLES
    return not isinstance(message, lc.AIMessage | lc.ToolMessage | lc.FunctionMessage)


def whole_turns(messages: Sequence[lc.BaseMessage], keep: int) -> list[lc.BaseMessage]:
    """About the newest ``keep`` of ``messages``, extended back to the start of the turn the
    cut lands in, so a reply is never separated from its question nor a tool call from its
    result; empty for ``keep`` below 1.

    Raises:
        UsageError: ``messages`` is not a list, or ``keep`` not an int.
    """
    require_many(messages, "messages", "a list of LangChain messages")
    if require_int(keep, "keep") <= 0:
        return []
    cut = max(len(messages) - keep, 0)
    while cut > 0 and not _starts_turn(messages[cut]):
        cut -= 1
    return list(messages[cut:])


def _fingerprint(messages: Sequence[lc.BaseMessage]) -> str:
    dumped = json.dumps([_dump(m) for m in messages], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(dumped.encode()).hexdigest()


class LangChainHistory(BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` kept in a session of a ``SessionService``.

    Use it where LangChain takes a chat history: the factory of ``RunnableWithMessageHistory``
    (``invoke``/``stream`` or ``ainvoke``/``astream``), or directly with ``aget_messages``,
    ``aadd_messages`` and ``aclear`` (or their sync twins). Any service works:
    ``DefaultSessionService`` over the in-memory or the MongoDB repository, or a store of your
    own; one object may serve concurrent calls, and several objects (or processes) may share one
    session id.

    **Owners.** Given a ``user_id``, the history uses only that user's session: every read,
    append and clear of another user's session raises `AccessDenied` and touches nothing. A
    session it creates is owned by ``user_id`` (by ``session_id`` when none is given; then any
    session is used).

    **Storage.** Each ``aadd_messages`` call appends its messages as one batch of events (one
    version), creating the session on the first write. Reads return the active view: what
    compaction archived is left out, a summary it wrote is included.

    **Idempotency.** A message with an ``id`` gets an event id derived from the session and that
    id, so storing it again (a retry after a lost acknowledgement, from this object or any
    other) is a replay and stores nothing twice; LangChain ids name messages, so a second
    message with the same id in one session is taken for the first. Messages without an id get
    new event ids; a batch whose write failed keeps them, and storing the same messages again on
    this object reuses them.

    **Windows.** With ``history_size``, reads return about the newest ``history_size``
    messages, extended back to the start of a turn (a human or system message), so the model
    never sees a reply without its question or a tool result without its call.

    **Sync methods.** ``messages``, ``add_messages`` and ``clear`` serve LangChain's sync paths
    (``invoke``, ``stream``, ``add_message``). They run the call on the event loop the store
    belongs to (a MongoDB client belongs to the first loop that uses it; when none has, the
    adapters' own loop, a background thread, takes it) and wait for it, from any thread. In a
    thread that runs an event loop they raise ``UsageError`` at once, since waiting would block
    that loop: use the async methods (``ainvoke``) there. When the store's loop does not start
    the call within five seconds (its thread is blocked, as by ``invoke`` called on it), they
    raise ``UsageError`` and nothing is written.

    **Compaction.** Give a ``trigger`` and a ``strategy`` and ``aadd_messages`` compacts after
    each write when the trigger fires;
    [`compact`][asyncsession.integrations.langchain.LangChainHistory.compact] runs it on demand.

    System messages are stored only by a service built with ``allow_system_messages=True``
    (``aadd_messages`` raises ``UsageError`` otherwise).

    Args:
        session_id: the session's id.
        service: where the session lives.
        history_size: read about this many newest messages (whole turns); all if ``None``.
        user_id: the user whose session this is; ``None``: any session.
        metadata: metadata of a session this object creates.
        trigger: compact after a write when this fires (needs ``strategy``).
        strategy: what compaction does (needs ``trigger``).

    Raises:
        UsageError: a blank id, ``service`` not a session service, a ``history_size`` below
            1, or only one of ``trigger`` and ``strategy``.
    """

    session_id: str
    """The session's id."""

    def __init__(
        self,
        session_id: str,
        service: SessionService,
        *,
        history_size: int | None = None,
        user_id: str | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        trigger: TriggerLike | None = None,
        strategy: CompactionStrategy | None = None,
    ) -> None:
        require_nonblank(session_id, "session_id")
        require_service(service, "service")
        if user_id is not None:
            require_nonblank(user_id, "user_id")
        if history_size is not None and require_int(history_size, "history_size") < 1:
            raise UsageError("history_size must be at least 1")
        if (trigger is None) != (strategy is None):
            raise UsageError("compaction needs both a trigger and a strategy")
        self.session_id = session_id
        self.service = service
        """The service the session lives in."""
        self.history_size = history_size
        """How many newest messages a read returns (whole turns); all if ``None``."""
        self.user_id: str = user_id or session_id
        """The owner of a session this object creates."""
        self.metadata: dict[str, JsonValue] = dict(metadata or {})
        """Metadata of a session this object creates."""
        self._trigger = trigger
        self._strategy = strategy
        self._session = AdapterSession(
            service, session_id, user_id=user_id, creator=self.user_id, metadata=self.metadata
        )
        self._loop = StoreLoop(service, f"LangChainHistory {session_id!r}")

    def __repr__(self) -> str:
        return f"LangChainHistory(session_id={self.session_id!r})"

    async def aget_messages(self) -> list[lc.BaseMessage]:
        """The active messages, oldest first; with ``history_size``, the window (whole turns).

        Raises:
            AccessDenied: the session belongs to another user.
        """
        return await self._loop.run(self._read(self.history_size))

    async def _read(self, limit: int | None) -> list[lc.BaseMessage]:
        events = await self._session.active(limit)
        messages = [message for event in events for message in _from_event(event)]
        if limit is not None and messages and not _starts_turn(messages[0]):
            messages = whole_turns(await self._read(None), limit)  # the window split a turn
        return messages

    async def aadd_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """Append ``messages`` as one batch of events.

        A retry stores nothing twice (see the class docs). The write runs to its end if the
        caller is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a system message while the service stores none.
        """
        if not messages:
            return
        for index, message in enumerate(messages):
            _require_lc(message, f"messages[{index}]")
        await self._loop.run(self._add(list(messages)), write=True)

    async def _add(self, messages: list[lc.BaseMessage]) -> None:
        def build(ids: Sequence[str]) -> list[SessionEvent]:
            return [
                _to_event(message, self.session_id, event_id)
                for event_id, message in zip(ids, messages, strict=True)
            ]

        await self._session.append_retrying(
            _fingerprint(messages), len(messages), build, lambda i: self._event_id(messages[i])
        )
        if self._trigger is not None:
            await self._compact()

    def _event_id(self, message: lc.BaseMessage) -> str:
        if message.id:
            return str(uuid.uuid5(_ID_NAMESPACE, f"{self.session_id}\x00{message.id}"))
        return str(uuid.uuid4())

    async def aclear(self) -> None:
        """Delete the session and every event in it; the next write starts it again.

        Raises:
            AccessDenied: the session belongs to another user; nothing was deleted.
        """
        await self._loop.run(self._session.delete(), write=True)

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

    _INSTEAD = "aget_messages/aadd_messages/aclear (or ainvoke/astream)"

    @property
    def messages(self) -> list[lc.BaseMessage]:  # type: ignore[override]
        """The messages ``aget_messages`` returns, for sync callers (see the class docs)."""
        return self._loop.run_sync(
            lambda: self._read(self.history_size), method="messages", instead=self._INSTEAD
        )

    def add_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """``aadd_messages`` for sync callers (see the class docs)."""
        if not messages:
            return
        for index, message in enumerate(messages):
            _require_lc(message, f"messages[{index}]")
        batch = list(messages)
        self._loop.run_sync(lambda: self._add(batch), method="add_messages", instead=self._INSTEAD)

    def clear(self) -> None:
        """``aclear`` for sync callers (see the class docs)."""
        self._loop.run_sync(self._session.delete, method="clear", instead=self._INSTEAD)
