"""``LangChainHistory``: a LangChain chat message history on a ``SessionService``.

Needs LangChain: the ``[langchain]`` extra (``pip install '.[langchain]'`` from a clone). ::

    def get_session_history(session_id: str) -> LangChainHistory:
        return LangChainHistory(session_id, service, history_size=40)

    chain = RunnableWithMessageHistory(prompt | model, get_session_history)
    await chain.ainvoke({"input": "Hello"}, {"configurable": {"session_id": "conversation-42"}})

Every LangChain message is one real message event (a ``HumanMessage`` a user message, an
``AIMessage`` an assistant message with its tool calls, a ``ToolMessage`` a tool message...),
which also keeps the whole message, as ``message_to_dict`` dumps it, in its metadata under
``"langchain"``: reads return exactly what was added. Events written by others (a summary, a
message of our chat client) are converted from their message.
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from pydantic import JsonValue
from pydantic_core import to_jsonable_python

from .._checks import require_int, require_type
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
from ._session import History, whole_turns

try:
    from langchain_core import messages as lc
    from langchain_core.chat_history import BaseChatMessageHistory
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.langchain needs LangChain: "
        "install the [langchain] extra (from a clone: pip install '.[langchain]')"
    ) from _exc

__all__ = ["LangChainHistory"]

METADATA_KEY: Final = "langchain"
"""The event metadata key that holds the whole LangChain message (``message_to_dict``)."""
_ID_NAMESPACE: Final = uuid.UUID("6f1d3c52-6a55-4b8e-9d0e-7c9b1f0a4e21")
_ASSISTANT_ROLES: Final = frozenset({"ai", "assistant"})
_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
_INSTEAD: Final = "aget_messages/aadd_messages/aclear (or ainvoke/astream)"


def _dump(message: lc.BaseMessage) -> dict[str, JsonValue]:
    return cast("dict[str, JsonValue]", to_jsonable_python(lc.message_to_dict(message)))


def _arguments(args: Mapping[str, Any]) -> str:
    return json.dumps(to_jsonable_python(args), separators=(",", ":"), ensure_ascii=False)


def _checked(messages: Sequence[lc.BaseMessage]) -> list[lc.BaseMessage]:
    for index, message in enumerate(messages):
        hint = " (wrap text in HumanMessage(content=...))" if isinstance(message, str) else ""
        require_type(
            message,
            lc.BaseMessage,
            f"messages[{index}]",
            "a LangChain message such as HumanMessage",
            hint=hint,
        )
    return list(messages)


def _to_message(message: lc.BaseMessage) -> Message:
    """The API-neutral view of ``message`` (lossy: the event's metadata keeps the rest)."""
    text = str(message.text)  # the text blocks, joined
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


def _to_event(message: lc.BaseMessage, session_id: str, event_id: str) -> SessionEvent:
    """The message event that stores ``message`` losslessly (the whole message in metadata)."""
    return SessionEvent(
        id=event_id,
        session_id=session_id,
        message=_to_message(message),
        metadata={METADATA_KEY: _dump(message)},
    )


def _from_message(message: Message) -> list[lc.BaseMessage]:
    if isinstance(message, AssistantMessage):
        calls = [
            lc.ToolCall(name=c.name, args=json.loads(c.arguments or "{}"), id=c.id)
            for c in message.tool_calls
        ]
        return [lc.AIMessage(content=message.text or "", tool_calls=calls)]
    if isinstance(message, ToolResponseMessage):
        return [
            lc.ToolMessage(content=r.data, tool_call_id=r.id, name=r.name or None)
            for r in message.responses
        ]
    if isinstance(message, SystemMessage):
        return [lc.SystemMessage(content=message.text)]
    return [lc.HumanMessage(content=message.text)]


def _from_event(event: SessionEvent) -> list[lc.BaseMessage]:
    """The LangChain messages a message event holds: the stored one, else those converted from
    its message (a tool message of several results is one ``ToolMessage`` per result)."""
    stored = event.metadata.get(METADATA_KEY)
    if isinstance(stored, dict):
        return lc.messages_from_dict([stored])
    assert event.message is not None  # the active view holds message events only
    return _from_message(event.message)


def _starts_turn(message: lc.BaseMessage) -> bool:
    """A message of the user's (or a system message): neither a reply nor a tool result."""
    if isinstance(message, lc.ChatMessage):
        return message.role not in _ASSISTANT_ROLES
    return not isinstance(message, lc.AIMessage | lc.ToolMessage | lc.FunctionMessage)


def _fingerprint(messages: Sequence[lc.BaseMessage]) -> str:
    dumped = json.dumps([_dump(m) for m in messages], sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(dumped.encode()).hexdigest()


class LangChainHistory(History, BaseChatMessageHistory):
    """A LangChain ``BaseChatMessageHistory`` kept in a session of a ``SessionService``.

    Use it where LangChain takes a chat history (the factory of ``RunnableWithMessageHistory``)
    or directly (``aget_messages``, ``aadd_messages``, ``aclear`` and their sync twins). One
    object may serve concurrent calls; several objects and processes may share a session id.
    What it guarantees (the LangChain guide has the details):

    - given a ``user_id``, another user's session raises `AccessDenied` and is left untouched;
      a session it creates is owned by ``user_id`` (else by ``session_id``);
    - each ``aadd_messages`` is one batch of events; a message with an ``id`` is stored once
      however often it is added (its event id derives from the session and that id), and a
      failed batch without ids keeps its event ids for a retry on this object;
    - reads return the active view; ``history_size`` windows start at a human or system
      message, so a reply never loses its question nor a tool result its call;
    - the sync methods run on the event loop the store belongs to and wait for it; in a thread
      that runs an event loop, or when that loop does not start the call within five seconds
      (its thread is blocked), they raise ``UsageError`` and do nothing;
    - with ``trigger`` and ``strategy``, each write compacts when the trigger fires.

    System messages are stored only by a service built with ``allow_system_messages=True``.

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
        if history_size is not None and require_int(history_size, "history_size") < 1:
            raise UsageError("history_size must be at least 1")
        super().__init__(session_id, service, user_id, metadata, trigger, strategy)
        self.history_size = history_size
        """How many newest messages a read returns (whole turns); all if ``None``."""

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
            # the window split a turn: widen it
            messages = whole_turns(await self._read(None), limit, _starts_turn)
        return messages

    async def aadd_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """Append ``messages`` as one batch of events; the write runs to its end if the caller
        is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a system message while the service stores none.
        """
        if messages:
            await self._loop.run(self._add(_checked(messages)), write=True)

    async def _add(self, messages: list[lc.BaseMessage]) -> None:
        def build(ids: Sequence[str]) -> list[SessionEvent]:
            return [
                _to_event(message, self.session_id, event_id)
                for event_id, message in zip(ids, messages, strict=True)
            ]

        await self._session.append_retrying(
            _fingerprint(messages), len(messages), build, lambda i: self._event_id(messages[i])
        )
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

    @property
    def messages(self) -> list[lc.BaseMessage]:  # type: ignore[override]
        """``aget_messages`` for sync callers."""
        return self._loop.run_sync(
            lambda: self._read(self.history_size), method="messages", instead=_INSTEAD
        )

    def add_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """``aadd_messages`` for sync callers."""
        if messages:
            batch = _checked(messages)
            self._loop.run_sync(lambda: self._add(batch), method="add_messages", instead=_INSTEAD)

    def clear(self) -> None:
        """``aclear`` for sync callers."""
        self._loop.run_sync(self._session.delete, method="clear", instead=_INSTEAD)
