"""The advisor protocol, the ``BaseAdvisor`` with ``before``/``after`` hooks, and the call context.

An advisor wraps the model call. The chain of a call is its advisors sorted by ``order`` (lower
runs further out; ties keep registration order), folded so that each advisor gets a
``call_next`` that runs the rest of the chain. Every advisor has two shapes of the same
lifecycle: ``call`` (one awaited response) and ``stream`` (chunks as they arrive).

On the stream path ``call_next`` returns a [`ChunkStream`][asyncsession.advisors.base.ChunkStream]:
iterate it to pass the chunks on, and once it is exhausted its
[`response`][asyncsession.advisors.base.ChunkStream.response] is the response the chunks add up to,
after every advisor further in has had its say. Assigning ``chunks.response`` replaces the response
that advisors further out see.

Advisors keep no per-call state on ``self``: per-call data goes on the
[`CallContext`][asyncsession.advisors.base.CallContext], into its ``context`` (the advisor context
of string keys the caller passed) or its ``state`` (typed scratch space that advisors use to share
what they have read).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar, runtime_checkable

from .._checks import require_object
from ..chat import ChatChunk, ChatRequest, ChatResponse, ToolCallDelta
from ..exceptions import UsageError
from ._returned import result_chunks

__all__ = [
    "AUTO_MEMORY_ORDER",
    "HIGHEST_PRECEDENCE",
    "IDEMPOTENCY_ORDER",
    "LOWEST_PRECEDENCE",
    "RECALL_ORDER",
    "SESSION_MEMORY_ORDER",
    "SESSION_TURN_ORDER",
    "TELEMETRY_ORDER",
    "TOOL_LOOP_ORDER",
    "Advisor",
    "BaseAdvisor",
    "CallContext",
    "CallNext",
    "CallState",
    "ChunkStream",
    "StateKey",
    "StreamNext",
    "ToolLoop",
    "runs_tool_calls",
]

HIGHEST_PRECEDENCE: Final = -(2**31)
"""The lowest possible order: an advisor with it runs outermost."""
LOWEST_PRECEDENCE: Final = 2**31 - 1
"""The highest possible order: an advisor with it runs innermost, next to the model."""

# The default orders of the library's advisors, outermost first; no two are equal, so the chain
# does not depend on the order advisors are registered in.
TELEMETRY_ORDER: Final = HIGHEST_PRECEDENCE + 10
"""``TracingAdvisor``: outermost, so its span covers the whole call."""
IDEMPOTENCY_ORDER: Final = HIGHEST_PRECEDENCE + 100
"""``IdempotentTurnAdvisor``: outside the turn, so a replayed request never starts one."""
SESSION_TURN_ORDER: Final = HIGHEST_PRECEDENCE + 200
"""``SessionTurnAdvisor``: outside the tool loop, so it runs once per call."""
AUTO_MEMORY_ORDER: Final = HIGHEST_PRECEDENCE + 220
"""``AutoMemoryToolsAdvisor``: outside the tool loop, so the loop sees the memory tools."""
RECALL_ORDER: Final = HIGHEST_PRECEDENCE + 250
"""``SessionRecallAdvisor``: outside the tool loop, so the loop sees the recall tools."""
TOOL_LOOP_ORDER: Final = HIGHEST_PRECEDENCE + 300
"""``ToolCallingAdvisor``: the tool loop; what sits inside it runs once per round."""
SESSION_MEMORY_ORDER: Final = HIGHEST_PRECEDENCE + 1000
"""``SessionMemoryAdvisor``: inside the tool loop, so it runs once per round."""

T = TypeVar("T")


class StateKey(Generic[T]):
    """A typed key into [`CallContext.state`][asyncsession.advisors.base.CallContext.state]; keys
    compare by identity."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name: str = name
        """A name for error messages and ``repr``."""

    def __repr__(self) -> str:
        return f"StateKey({self.name!r})"


class CallState:
    """Per-call scratch space shared by the advisors of one call, with typed keys."""

    __slots__ = ("_values",)

    def __init__(self) -> None:
        self._values: dict[StateKey[Any], Any] = {}

    def get(self, key: StateKey[T]) -> T | None:
        """The value under ``key``, or ``None``."""
        value: T | None = self._values.get(key)
        return value

    def __getitem__(self, key: StateKey[T]) -> T:
        try:
            value: T = self._values[key]
        except KeyError:
            raise KeyError(key.name) from None
        return value

    def __setitem__(self, key: StateKey[T], value: T) -> None:
        self._values[key] = value

    def __contains__(self, key: StateKey[Any]) -> bool:
        return key in self._values


@dataclass(frozen=True, slots=True, kw_only=True)
class CallContext:
    """Everything one chat call carries besides the request, shared by all its advisors."""

    context: dict[str, Any] = field(default_factory=dict[str, Any])
    """The advisor context: the string keys the caller passed (session id, user id, ...) and
    what advisors add (the ids of stored events). Ends up in ``ChatResponse.context``."""
    state: CallState = field(default_factory=CallState)
    """Typed scratch space advisors use to share what they read during this call."""
    advisors: tuple[Advisor, ...] = ()
    """The chain of this call, outermost first."""
    streaming: bool = False
    """Whether this is a stream call."""
    _streams: list[ChunkStream] = field(default_factory=list["ChunkStream"], repr=False)
    _before_model: list[Callable[[], Awaitable[None]]] = field(
        default_factory=list[Callable[[], Awaitable[None]]], repr=False
    )

    def before_model_call(self, hook: Callable[[], Awaitable[None]]) -> None:
        """Run ``hook`` right before each model call of this call, in the order registered.

        An advisor uses it for work that must be done before the model runs whatever sits
        between it and the model (the turn advisor resolves a session nobody needed yet).
        An error the hook raises is the call's error; the model is not called.
        """
        self._before_model.append(hook)

    @property
    def has_before_model_hooks(self) -> bool:
        """Whether any advisor registered a hook with `before_model_call`."""
        return bool(self._before_model)

    async def run_before_model_hooks(self) -> None:
        """Run the hooks registered with `before_model_call` (the chain runner calls this)."""
        for hook in self._before_model:
            await hook()


@runtime_checkable
class ToolLoop(Protocol):
    """A declared capability: an advisor that runs the tool calls the model asks for.

    Advisors that add tools to a request (``AutoMemoryToolsAdvisor``) add them only when the
    call's chain has such an advisor; any advisor can declare it with
    ``runs_tool_calls = True``.
    """

    @property
    def runs_tool_calls(self) -> bool:
        """Whether this advisor runs the model's tool calls and calls the model again."""
        ...


def runs_tool_calls(advisor: object) -> bool:
    """Whether ``advisor`` declares that it runs the model's tool calls (see `ToolLoop`).

    Raises:
        UsageError: ``advisor`` is ``None`` or a plain value (a string, a number).
    """
    require_object(advisor, "advisor", "an advisor", methods=())
    return isinstance(advisor, ToolLoop) and advisor.runs_tool_calls


class ChunkStream(ABC):
    """The chunks of the rest of the chain, and the response they add up to.

    Iterate it to the end, then read [`response`][asyncsession.advisors.base.ChunkStream.response].
    Close it with [`aclose`][asyncsession.advisors.base.ChunkStream.aclose] (or
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
        """The response the chunks add up to, as advisors further in left it.

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
        without calling the model, such as a cache)."""
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
        chunks = [chunk] if results is None else [chunk, *result_chunks(response, results)]
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


@runtime_checkable
class Advisor(Protocol):
    """Wraps the model call; the chain nests advisors by ``order``, lower further out."""

    @property
    def order(self) -> int:
        """The position in the chain: lower runs further out."""
        ...

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

    Override [`before`][asyncsession.advisors.base.BaseAdvisor.before] and
    [`after`][asyncsession.advisors.base.BaseAdvisor.after] for the common case, or
    ``call``/``stream`` to wrap the rest of the chain yourself. Set ``order`` as a class attribute
    or in ``__init__``.

    On the stream path the chunks pass through untouched as they arrive, ``after`` runs once
    the stream has been read to the end and sees the aggregated response; it cannot rewrite
    chunks that were already yielded. A stream abandoned by its consumer never reaches ``after``.
    """

    order: int = 0
    """The position in the chain (default 0: inside the session advisors, next to the model)."""

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
