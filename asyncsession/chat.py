"""The values a chat call passes through the advisor chain (`ChatOptions`, `ChatRequest`,
`ChatResponse`, `ChatChunk`), and the chain itself.

They know nothing about the OpenAI SDK: ``asyncsession.openai`` converts at its edge, so an
advisor (and its tests) never touches SDK types. The advisor protocol, the call context, the
chunk stream of the stream path and the ``MessageFilter`` are defined here and exported from
``asyncsession.advisors``, where the advisor guide documents them. Advisors keep no per-call
state on ``self``: per-call data goes on the `CallContext`.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, cast

from pydantic import JsonValue

from .events import Session
from .exceptions import UsageError
from .filters import EventFilter
from .messages import (
    AssistantMessage,
    Message,
    MessageType,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)

if TYPE_CHECKING:
    from .tools import Tool

__all__ = ["ChatChunk", "ChatOptions", "ChatRequest", "ChatResponse", "ToolCallDelta", "Usage"]


RETURN_DIRECT: Final = "return_direct"
"""The finish reason of a response (and of its last chunk) answered by return-direct tools."""
APPROVAL_REQUIRED: Final = "approval_required"
"""The finish reason of a response (and of its last chunk) whose turn stopped for approvals:
its ``pending_approvals`` name the calls waiting for a decision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Model parameters of a chat call; ``None`` leaves a parameter to the layer below.

    Options merge field by field ([`merged_with`][asyncsession.chat.ChatOptions.merged_with]): the
    client's defaults, then the call's. Anything the Chat Completions API takes that has no field
    here goes into ``extra_body``.
    """

    model: str | None = None
    """The model; the client's ``model`` when ``None``."""
    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    max_completion_tokens: int | None = None
    """Upper bound on generated tokens, reasoning tokens included."""
    stop: tuple[str, ...] | None = None
    """Sequences where the model stops."""
    seed: int | None = None
    """Best-effort deterministic sampling."""
    tool_choice: str | Mapping[str, Any] | None = None
    """``"auto"``, ``"none"``, ``"required"``, or a mapping naming one tool."""
    parallel_tool_calls: bool | None = None
    """Whether the model may call several tools at once."""
    reasoning_effort: str | None = None
    """For reasoning models: ``"low"``, ``"medium"``, ``"high"``, ..."""
    response_format: Mapping[str, Any] | None = None
    """A ``response_format`` mapping, e.g. ``{"type": "json_object"}``."""
    timeout: float | None = None
    """Seconds before the request times out (raises ``ChatTimeout``); the client's when None."""
    extra_body: Mapping[str, Any] | None = None
    """Further JSON body parameters, sent as they are."""

    def merged_with(self, other: ChatOptions | None) -> ChatOptions:
        """These options with every field that ``other`` sets laid over them."""
        if other is None:
            return self
        changes = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) is not None
        }
        if self.extra_body and other.extra_body:
            changes["extra_body"] = {**self.extra_body, **other.extra_body}
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage the model reported."""

    prompt_tokens: int = 0
    """Tokens in the prompt."""
    completion_tokens: int = 0
    """Tokens generated."""
    total_tokens: int = 0
    """Both together."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """What goes to the model: the prompt, the options and the tools it may call."""

    messages: tuple[Message, ...]
    """The prompt, oldest first."""
    options: ChatOptions = field(default_factory=ChatOptions)
    """Model parameters."""
    tools: tuple[Tool, ...] = ()
    """Tools offered to the model on this request, beside the client's own."""

    def with_messages(self, messages: tuple[Message, ...] | list[Message]) -> ChatRequest:
        """This request with another prompt."""
        return dataclasses.replace(self, messages=tuple(messages))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatResponse:
    """The model's reply to a request."""

    message: AssistantMessage
    """The assistant message: text, tool calls, or both."""
    finish_reason: str | None = None
    """Why the model stopped: ``"stop"``, ``"tool_calls"``, ``"length"``, ..."""
    usage: Usage | None = None
    """Token usage; summed over every round of a tool loop."""
    model: str | None = None
    """The model that answered, as the API reports it."""
    id: str | None = None
    """The completion id the API assigned."""
    context: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """The advisor context when the call ended (the client fills it in): the keys you passed
    plus what advisors added."""
    request_event_ids: tuple[str, ...] = ()
    """The ids of the events the turn stored for the request side: the user's message, then
    each round's tool results (the client fills it in)."""
    response_event_ids: tuple[str, ...] = ()
    """The ids of the events the turn stored for the model's side: each round's tool calls,
    then the reply (the client fills it in)."""
    tool_results: ToolResponseMessage | None = None
    """The results of return-direct tools, when the tool loop ended on them without another
    model call; ``None`` otherwise. ``message`` is then the model's message that asked for
    them, ``finish_reason`` is ``"return_direct"`` and ``text`` is the results' text."""
    pending_approvals: tuple[ToolCall, ...] = ()
    """The tool calls waiting for a person's approval when the turn stopped for them
    (``finish_reason`` is ``"approval_required"``); continue the turn with the client's
    ``resume(session_id, decisions)``. Empty otherwise."""

    @property
    def text(self) -> str:
        """The reply text; empty when the model sent none. After return-direct tools: their
        results' data in call order, one per line."""
        if self.tool_results is not None:
            return "\n".join(response.data for response in self.tool_results.responses)
        return self.message.text or ""

    @property
    def tool_calls(self) -> Sequence[ToolCall]:
        """The tool calls the model asks for (already answered when ``tool_results`` is set)."""
        return self.message.tool_calls

    @property
    def has_tool_calls(self) -> bool:
        """Whether the reply asks for tool calls still to run, i.e. the turn is not complete
        yet; ``False`` once return-direct tools answered them (``tool_results``)."""
        return bool(self.message.tool_calls) and self.tool_results is None

    def result_chunks(self) -> list[ChatChunk]:
        """The chunks a stream ends with when return-direct tools answered: one per result in
        call order, whose texts add up to ``text``; the last has the finish reason
        ``"return_direct"``. Empty without ``tool_results``."""
        results = () if self.tool_results is None else self.tool_results.responses
        return [
            ChatChunk(
                text=result.data if index == 0 else "\n" + result.data,
                tool_result=result,
                finish_reason=RETURN_DIRECT if index == len(results) - 1 else None,
                id=self.id,
                model=self.model,
            )
            for index, result in enumerate(results)
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A fragment of one streamed tool call; fragments with the same ``index`` add up."""

    index: int
    """Which call of the reply this fragment belongs to."""
    id: str | None = None
    """The call id (first fragment only)."""
    name: str | None = None
    """The tool name (first fragment only)."""
    arguments: str = ""
    """The next piece of the JSON arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatChunk:
    """One streamed delta of the model's reply, forwarded as soon as it arrives."""

    text: str = ""
    """The next piece of the reply text (often empty on role, tool-call or usage chunks)."""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    """Fragments of tool calls."""
    finish_reason: str | None = None
    """Set on the chunk that ends a model round: ``"stop"``, ``"tool_calls"``, ..."""
    usage: Usage | None = None
    """Set on the usage chunk that follows the finish reason."""
    id: str | None = None
    """The completion id; it changes from one round of a tool loop to the next."""
    model: str | None = None
    """The model that answers."""
    reasoning: str = ""
    """The next piece of the reasoning summary (Responses API reasoning models)."""
    tool_result: ToolResponse | None = None
    """Set on the chunks that end a tool loop on return-direct tools, one per result in call
    order, after the chunks of the model's round that asked for them; ``text`` is then the
    result's data (after a line break from the second result on), and the last of them has
    the finish reason ``"return_direct"``."""
    pending_approvals: tuple[ToolCall, ...] = ()
    """Set on the last chunk of a turn that stopped for approvals (its finish reason is
    ``"approval_required"``): the tool calls waiting for a decision."""
    raw: object = None
    """The provider's event this chunk was made from, for what the chunk does not type (on the
    Responses API the SDK's ``ResponseStreamEvent``); ``None`` when there is none. Opaque to
    advisors: they must not depend on it."""


# --- the advisor chain ----------------------------------------------------------------------

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


class Advisor:
    """Wraps what is further in (the turn, or one model call); subclass it.

    Override [`before`][asyncsession.advisors.Advisor.before] and
    [`after`][asyncsession.advisors.Advisor.after] for the common case: they serve the call
    and the stream path alike. Or override ``call`` and ``stream`` to wrap the rest of the
    chain yourself: ``call_next(ctx, request)`` runs it, awaited on the call path; on the
    stream path it returns a [`ChunkStream`][asyncsession.advisors.ChunkStream] to iterate
    and pass on (never wrap a ``yield`` in a task group or an ``asyncio.timeout`` block).

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
        """``before``, every chunk of the rest of the chain, then ``after`` on the aggregate.

        Assigning ``chunks.response`` replaces the response that advisors further out see.
        """
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
    """A predicate over messages: ``True`` means "store it" (the write side; an ``EventFilter``
    decides which stored events are read into the next prompt).

    A rejected message is never written and so never replayed; the prompt that goes to the
    model is unaffected. Filters compose with ``&`` / ``|`` / ``~`` (or ``and_``, ``or_``,
    ``negate``); a filter of your own replaces the default `skip_empty_messages`, so compose
    with it to keep that protection.

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
    def by_message_type(cls, *types: MessageType | str) -> MessageFilter:
        """Store only messages of these types.

        Leaving out ``TOOL`` does not strand a stored tool call: the memory advisor's write
        guard stores the result of a stored call anyway.

        Raises:
            UsageError: no type given, or an unknown one (``None`` included).
        """
        if not types:
            raise UsageError("by_message_type needs at least one message type")
        try:
            allowed = frozenset(MessageType(t) for t in types)
        except ValueError:
            raise UsageError(f"by_message_type got an unknown message type in {types!r}") from None
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


# The advisor chain's names are exported (and documented) from ``asyncsession.advisors``.
for _public in (Advisor, CallContext, ChunkStream, MessageFilter):
    _public.__module__ = "asyncsession.advisors"
