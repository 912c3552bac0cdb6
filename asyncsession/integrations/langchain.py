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

import asyncio
import contextlib
import hashlib
import json
import uuid
from collections import OrderedDict
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, Final, TypeVar, cast

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
from .._lifecycle import running_loop
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
    from langchain_core import messages as lc
    from langchain_core.chat_history import BaseChatMessageHistory
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.langchain needs LangChain: "
        "install the [langchain] extra (from a clone: pip install '.[langchain]')"
    ) from _exc

__all__ = [
    "METADATA_KEY",
    "LangChainHistory",
    "from_event",
    "to_event",
    "to_message",
    "whole_turns",
]

METADATA_KEY: Final = "langchain"
"""The event metadata key that holds the whole LangChain message (``message_to_dict``)."""
_PENDING_LIMIT: Final = 64
"""How many failed batches a history remembers for their retries."""
_ID_NAMESPACE: Final = uuid.UUID("6f1d3c52-6a55-4b8e-9d0e-7c9b1f0a4e21")
_T = TypeVar("_T")
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


def to_message(message: lc.BaseMessage) -> Message:
    """The API-neutral view of ``message``: what our clients, compaction and recall read.

    Lossy on its own (the event's metadata keeps the rest, see
    [`to_event`][asyncsession.integrations.langchain.to_event]).

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


def to_event(message: lc.BaseMessage, session_id: str, event_id: str | None = None) -> SessionEvent:
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
        "message": to_message(message),
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


def from_event(event: SessionEvent) -> list[lc.BaseMessage]:
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
    (``ainvoke``/``astream``), or directly with ``aget_messages``, ``aadd_messages`` and
    ``aclear``. Any service works: ``DefaultSessionService`` over the in-memory or the MongoDB
    repository, or a store of your own; one object may serve concurrent calls, and several
    objects (or processes) may share one session id.

    **Storage.** Each ``aadd_messages`` call appends its messages as one batch of events (one
    version), creating the session on the first write, owned by ``user_id``. Reads return the
    active view: what compaction archived is left out, a summary it wrote is included.

    **Idempotency.** A message with an ``id`` gets an event id derived from the session and that
    id, so storing it again (a retry after a lost acknowledgement, from this object or any
    other) is a replay and stores nothing twice; LangChain ids name messages, so a second
    message with the same id in one session is taken for the first. Messages without an id get
    event ids drawn from the service before the write; a batch whose write failed keeps them,
    and storing the same messages again on this object reuses them.

    **Windows.** With ``history_size``, reads return about the newest ``history_size``
    messages, extended back to the start of a turn (a human or system message), so the model
    never sees a reply without its question or a tool result without its call.

    **Sync methods.** ``messages``, ``add_messages`` and ``clear`` exist for LangChain's sync
    paths (``invoke``). Called in a thread that runs an event loop they raise ``UsageError``
    rather than block it: use the async methods (``ainvoke``) there. From another thread they
    run the call on ``loop`` (the loop the history was built in, by default) and wait for it;
    without a running loop they run it with ``asyncio.run`` (fine for the in-memory store, not
    for a MongoDB client bound to another loop).

    **Compaction.** Give a ``trigger`` and a ``strategy`` and ``aadd_messages`` compacts after
    each write when the trigger fires;
    [`compact`][asyncsession.integrations.langchain.LangChainHistory.compact] runs it on demand.

    System messages are stored only by a service built with ``allow_system_messages=True``
    (``aadd_messages`` raises ``UsageError`` otherwise).

    Args:
        session_id: the session's id.
        service: where the session lives.
        history_size: read about this many newest messages (whole turns); all if ``None``.
        user_id: the owner of a session this object creates; defaults to ``session_id``.
        metadata: metadata of a session this object creates.
        trigger: compact after a write when this fires (needs ``strategy``).
        strategy: what compaction does (needs ``trigger``).
        loop: the event loop the sync methods run their calls on from other threads.

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
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        require_nonblank(session_id, "session_id")
        require_service(service, "service")
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
        self._loop = loop if loop is not None else running_loop()
        self._exists: bool | None = None
        self._pending: OrderedDict[str, tuple[str, ...]] = OrderedDict()

    def __repr__(self) -> str:
        return f"LangChainHistory(session_id={self.session_id!r})"

    async def aget_messages(self) -> list[lc.BaseMessage]:
        """The active messages, oldest first; with ``history_size``, the window (whole turns)."""
        return await self._read(self.history_size)

    async def _read(self, limit: int | None) -> list[lc.BaseMessage]:
        read = (
            EventFilter.active()
            if limit is None
            else EventFilter(exclude_archived=True, active_view=True, last_n=limit)
        )
        snapshot = await self.service.get_snapshot(self.session_id, read)
        self._exists = snapshot is not None
        if snapshot is None:
            return []
        messages = [message for event in snapshot.events for message in from_event(event)]
        if limit is not None and messages and not _starts_turn(messages[0]):
            messages = whole_turns(await self._read(None), limit)  # the window split a turn
        return messages

    async def aadd_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """Append ``messages`` as one batch of events.

        A retry stores nothing twice (see the class docs). The write runs to its end if the
        caller is cancelled.

        Raises:
            UsageError: a system message while the service stores none.
        """
        if not messages:
            return
        key = _fingerprint(messages)
        ids = self._pending.pop(key, None)
        if ids is None:
            ids = tuple([await self._event_id(message) for message in messages])
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

    async def _event_id(self, message: lc.BaseMessage) -> str:
        if message.id:
            return str(uuid.uuid5(_ID_NAMESPACE, f"{self.session_id}\x00{message.id}"))
        return str(uuid.uuid4())

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

    async def aclear(self) -> None:
        """Delete the session and every event in it; the next write starts it again."""
        await shielded(self.service.delete(self.session_id))
        self._exists = False

    async def compact(self) -> CompactionResult | None:
        """Compact with the trigger and strategy now; ``None`` without them or a session."""
        if self._trigger is None or self._strategy is None:
            return None
        try:
            return await self.service.compact(self.session_id, self._trigger, self._strategy)
        except SessionNotFound:
            return None

    def _run(self, call: Coroutine[Any, Any, _T]) -> _T:
        if running_loop() is not None:
            call.close()
            raise UsageError(
                "a sync method of LangChainHistory would block the running event loop: "
                "use aget_messages/aadd_messages/aclear (or ainvoke) instead"
            )
        if self._loop is not None and self._loop.is_running():
            return asyncio.run_coroutine_threadsafe(call, self._loop).result()
        return asyncio.run(call)

    @property
    def messages(self) -> list[lc.BaseMessage]:  # type: ignore[override]
        """The messages ``aget_messages`` returns, for sync callers (see the class docs)."""
        return self._run(self.aget_messages())

    def add_messages(self, messages: Sequence[lc.BaseMessage]) -> None:
        """``aadd_messages`` for sync callers (see the class docs)."""
        self._run(self.aadd_messages(messages))

    def clear(self) -> None:
        """``aclear`` for sync callers (see the class docs)."""
        self._run(self.aclear())
