"""The advisor protocol, ``BaseAdvisor`` with ``before``/``after`` hooks, the call context, and the
chunk stream the stream path passes along.

An advisor wraps what is further in: the client's ``advisors`` wrap the whole turn (once per
call), its ``model_advisors`` wrap each model call (once per round of the tool loop). Each list
runs in the order given, the first outermost; each advisor gets a ``call_next`` that runs the
rest. Every advisor has two shapes of the same lifecycle: ``call`` (one awaited response) and
``stream`` (chunks as they arrive).

On the stream path ``call_next`` returns a [`ChunkStream`][asyncsession.advisors.ChunkStream]:
iterate it to pass the chunks on, and once it is exhausted its
[`response`][asyncsession.advisors.ChunkStream.response] is the response the chunks add up to,
after everything further in has had its say. Assigning ``chunks.response`` replaces the response
that advisors further out see.

Advisors keep no per-call state on ``self``: per-call data goes on the
[`CallContext`][asyncsession.advisors.CallContext].

`MessageFilter` decides which messages a turn stores (the write side); an ``EventFilter``
decides which stored events are read into the next prompt. A rejected message is never written
and so never replayed; the prompt that goes to the model is unaffected. Filters compose with
``&`` / ``|`` / ``~`` (or ``and_``, ``or_``, ``negate``); a filter of your own replaces the
default `MessageFilter.skip_empty_messages`, so compose with it to keep that protection.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, Protocol, cast

from pydantic import JsonValue

from ..chat import ChatChunk, ChatRequest, ChatResponse, ToolCallDelta
from ..events import Session
from ..exceptions import UsageError
from ..filters import EventFilter
from ..messages import MESSAGE_TYPES, AssistantMessage, Message, MessageType

__all__ = [
    "EVENT_FILTER_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "USER_ID_CONTEXT_KEY",
    "Advisor",
    "BaseAdvisor",
    "CallContext",
    "CallNext",
    "ChunkStream",
    "MessageFilter",
    "StreamNext",
]

SESSION_ID_CONTEXT_KEY: Final = "chat_memory_conversation_id"
"""The advisor-context key of the session id, as the reference names it; ``session_id=`` is the
same thing as a keyword."""
USER_ID_CONTEXT_KEY: Final = "chat_memory_user_id"
"""The advisor-context key of the user id (``user_id=``)."""
EVENT_FILTER_CONTEXT_KEY: Final = "chat_memory_event_filter_id"
"""The advisor-context key of a per-call ``EventFilter`` (``event_filter=``)."""


@dataclass(slots=True, kw_only=True)
class CallContext:
    """What one chat call carries besides the request, shared by all its advisors.

    The keywords of the call (``session_id=``, ``user_id=``, ...) and the reference's context
    keys in ``context`` are the same values: each is filled in from the other when the call
    starts.
    """

    session_id: str | None = None
    """The call's session; ``None`` for a call without session memory."""
    user_id: str | None = None
    """The caller's user: the owner of a session the call creates, checked on an existing one."""
    request_id: str | None = None
    """The client's id of this request (an ``Idempotency-Key``): a retry carries the same one."""
    event_filter: EventFilter | None = None
    """An ``EventFilter`` laid over the client's history filter for this call."""
    metadata: dict[str, JsonValue] = field(default_factory=dict[str, JsonValue])
    """The metadata of a session the call creates."""
    context: dict[str, Any] = field(default_factory=dict[str, Any])
    """The advisor context: the reference's keys, and whatever advisors put there; it ends up
    in ``ChatResponse.context``."""
    streaming: bool = False
    """Whether this is a stream call."""
    max_tool_rounds: int = 10
    """The most model calls of the turn's tool loop."""
    session: Session | None = None
    """The session, once the turn has found or created it and checked its owner: set before the
    first model call, so ``model_advisors`` see it; ``None`` before that."""
    _streams: list[ChunkStream] = field(default_factory=list["ChunkStream"], repr=False)


class ChunkStream(ABC):
    """The chunks of the rest of the chain, and the response they add up to.

    Iterate it to the end, then read [`response`][asyncsession.advisors.ChunkStream.response].
    Close it with [`aclose`][asyncsession.advisors.ChunkStream.aclose] (or
    ``contextlib.aclosing``) if you stop early: that closes the model's HTTP stream.
    """

    __slots__ = ("_override",)

    def __init__(self) -> None:
        self._override: ChatResponse | None = None

    def __aiter__(self) -> ChunkStream:
        return self

    @abstractmethod
    async def __anext__(self) -> ChatChunk:
        """The next chunk; ``StopAsyncIteration`` at the end."""

    async def aclose(self) -> None:  # noqa: B027 - a no-op default, overridden where needed
        """Stop early and release what the stream holds (the model's HTTP stream)."""

    def _produced(self) -> ChatResponse | None:
        """The response once the stream is exhausted, else ``None``."""
        return None

    @property
    def response(self) -> ChatResponse:
        """The response the chunks add up to, as what is further in left it.

        Raises:
            UsageError: the stream has not been read to the end.
        """
        if self._override is not None:
            return self._override
        produced = self._produced()
        if produced is None:
            raise UsageError("The response is known only once the stream was read to the end")
        return produced

    @response.setter
    def response(self, value: ChatResponse) -> None:
        self._override = value

    @classmethod
    def of_response(cls, response: ChatResponse) -> ChunkStream:
        """A stream that replays a finished response as chunks (for advisors that answer
        without calling further in, such as a cache)."""
        return _ReplayStream(response)


class _ReplayStream(ChunkStream):
    """A finished response as chunks: one for the model's message; after return-direct tools,
    that message's round (its tool calls) and then one chunk per result, as the tool loop
    streamed them."""

    __slots__ = ("_chunks", "_final")

    def __init__(self, response: ChatResponse) -> None:
        super().__init__()
        deltas = tuple(
            ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments)
            for index, call in enumerate(response.message.tool_calls)
        )
        results = response.tool_results
        if results is None:
            text = response.text
            finish = response.finish_reason or ("tool_calls" if deltas else "stop")
        else:  # the model's round that asked for the return-direct tools
            text, finish = response.message.text or "", "tool_calls"
        chunk = ChatChunk(
            text=text,
            tool_calls=deltas,
            finish_reason=finish,
            usage=response.usage,
            id=response.id,
            model=response.model,
        )
        chunks = [chunk] if results is None else [chunk, *response.result_chunks()]
        self._chunks = deque(chunks)
        self._final = response

    async def __anext__(self) -> ChatChunk:
        if not self._chunks:
            raise StopAsyncIteration
        return self._chunks.popleft()

    def _produced(self) -> ChatResponse | None:
        return None if self._chunks else self._final


CallNext = Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]]
"""Runs the rest of the chain on the call path."""
StreamNext = Callable[[CallContext, ChatRequest], ChunkStream]
"""Runs the rest of the chain on the stream path (lazily: nothing happens until iterated)."""


class Advisor(Protocol):
    """Wraps what is further in: the turn, or one model call."""

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """Handle a call: usually ``await call_next(ctx, request)`` with work around it."""
        ...

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """Handle a stream: usually yield the chunks of ``call_next(ctx, request)``.

        Never wrap a ``yield`` in a task group or an ``asyncio.timeout`` block.
        """
        ...


class BaseAdvisor:
    """An advisor with ``before``/``after`` hooks that serve the call and the stream path alike.

    Override [`before`][asyncsession.advisors.BaseAdvisor.before] and
    [`after`][asyncsession.advisors.BaseAdvisor.after] for the common case, or ``call``/``stream``
    to wrap the rest of the chain yourself.

    On the stream path the chunks pass through untouched as they arrive, ``after`` runs once
    the stream has been read to the end and sees the aggregated response; it cannot rewrite
    chunks that were already yielded. A stream abandoned by its consumer never reaches ``after``.
    """

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Change the request on its way in (default: unchanged)."""
        return request

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        """Change the response on its way out (default: unchanged)."""
        return response

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """``before``, the rest of the chain, ``after``."""
        request = await self.before(ctx, request)
        response = await call_next(ctx, request)
        return await self.after(ctx, response)

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """``before``, every chunk of the rest of the chain, then ``after`` on the aggregate."""
        request = await self.before(ctx, request)
        chunks = call_next(ctx, request)
        async with aclosing(chunks):
            async for chunk in chunks:
                yield chunk
        chunks.response = await self.after(ctx, chunks.response)


# --- which messages a turn stores ------------------------------------------------------------


def _has_media(message: AssistantMessage) -> bool:
    parts = message.parts or ()
    return any(part.get("type") != "text" for part in parts) or "audio" in message.extra


_FRAME_ITEMS = frozenset({"message", "reasoning"})
"""Responses output items that carry nothing of their own once the text is blank: a message
item (its text is the message's), and reasoning, which cannot be replayed without the item it
preceded."""


def _has_output_items(message: AssistantMessage) -> bool:
    """Whether the reply's Responses items include one that is content of its own: a hosted
    tool's call or result (an image generation, a web search), or an item type we do not
    know."""
    return any(item.get("type") not in _FRAME_ITEMS for item in message.items)


def _checked(other: MessageFilter, operation: str) -> MessageFilter:
    """``other`` if it is a ``MessageFilter``: a ``None`` would only fail inside a chat call."""
    given = cast(object, other)  # callers outside the type checker may pass anything
    if not isinstance(given, MessageFilter):
        raise UsageError(f"MessageFilter.{operation} needs a MessageFilter, not {given!r}")
    return other


class MessageFilter:
    """A predicate over messages: ``True`` means "store it".

    Args:
        predicate: the decision; any ``Callable[[Message], bool]``.

    Raises:
        UsageError: ``predicate`` is not callable (for example ``None``).
    """

    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[Message], bool]) -> None:
        if not callable(cast(object, predicate)):
            raise UsageError(f"a MessageFilter needs a callable predicate, not {predicate!r}")
        self._predicate = predicate

    def should_persist(self, message: Message) -> bool:
        """Whether ``message`` is stored."""
        return bool(self._predicate(message))

    __call__ = should_persist

    def and_(self, other: MessageFilter) -> MessageFilter:
        """Store only what both filters accept.

        Raises:
            UsageError: ``other`` is not a ``MessageFilter`` (for example ``None``).
        """
        other = _checked(other, "and_")
        return MessageFilter(lambda m: self.should_persist(m) and other.should_persist(m))

    def or_(self, other: MessageFilter) -> MessageFilter:
        """Store what either filter accepts.

        Raises:
            UsageError: ``other`` is not a ``MessageFilter`` (for example ``None``).
        """
        other = _checked(other, "or_")
        return MessageFilter(lambda m: self.should_persist(m) or other.should_persist(m))

    def negate(self) -> MessageFilter:
        """Store what this filter rejects."""
        return MessageFilter(lambda m: not self.should_persist(m))

    __and__ = and_
    __or__ = or_
    __invert__ = negate

    @classmethod
    def all(cls) -> MessageFilter:
        """Store every message."""
        return cls(lambda _: True)

    @classmethod
    def skip_empty_messages(cls) -> MessageFilter:
        """Skip assistant messages with blank text, no tool calls, no media and no Responses
        items beyond message and reasoning items (the default).

        Some models send an empty end-of-turn frame after tool use; replayed as history, it is
        rejected by the next request. A reply made only of hosted-tool items (an image
        generation, a web search) is content and is stored.
        """

        def accept(message: Message) -> bool:
            if not isinstance(message, AssistantMessage):
                return True
            blank = message.text is None or not message.text.strip()
            return (
                not blank
                or message.has_tool_calls
                or _has_media(message)
                or _has_output_items(message)
            )

        return cls(accept)

    @classmethod
    def by_message_type(cls, *types: MessageType) -> MessageFilter:
        """Store only messages of these types.

        Leaving out ``TOOL`` does not strand a stored tool call: the memory advisor's write
        guard stores the result of a stored call anyway.

        Raises:
            UsageError: no type given, or an unknown one (``None`` included).
        """
        if not types:
            raise UsageError("by_message_type needs at least one message type")
        if any(t not in MESSAGE_TYPES for t in types):
            raise UsageError(f"by_message_type got an unknown message type in {types!r}")
        allowed = frozenset(types)
        return cls(lambda m: m.message_type in allowed)

    @classmethod
    def contains_text(cls, keyword: str) -> MessageFilter:
        """Store only messages whose text contains ``keyword``, case-insensitively.

        Messages without text (tool results) are rejected.

        Raises:
            UsageError: the keyword is blank or not a string.
        """
        if not isinstance(cast(object, keyword), str) or not keyword.strip():
            raise UsageError(f"contains_text needs a non-blank keyword, not {keyword!r}")
        lowered = keyword.lower()

        def accept(message: Message) -> bool:
            text = message.text
            return text is not None and lowered in text.lower()

        return cls(accept)
