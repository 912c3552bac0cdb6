"""OpenTelemetry traces of chat turns, model calls, tool calls, compactions and store operations.

Install the ``[otel]`` extra (``pip install '.[otel]'`` from a clone) and configure a tracer
provider in your application; without ``opentelemetry-api`` every piece here is a no-op.
Compose what you need:

- `TracingAdvisor` (first of a client's ``advisors``): a ``chat_turn`` span per call, with
  what the turn cost; registered on the store's ``AsyncMongoClient`` too, it counts the turn's
  MongoDB commands;
- `ModelCallTracingAdvisor` (last of its ``model_advisors``): a GenAI ``chat {model}`` span per
  model call;
- `TracingSessionService`: the standard service over a traced store, with a
  ``session_store <operation>`` span per store operation and a ``compaction`` span per
  compaction.

The turn adds an ``execute_tool {name}`` span per tool call on its own.
"""

from __future__ import annotations

import contextlib
import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Final, TypeVar, cast
from urllib.parse import urlsplit

import httpx2
from pymongo import monitoring

from ._checks import REPOSITORY_METHODS, require_object
from ._lifecycle import ForwardsLoop
from ._telemetry import AttributeValue, Span, TurnStats, current_turn, span, start_span, turn_stats
from .chat import Advisor, CallContext, CallNext, ChatChunk, ChatRequest, ChatResponse, StreamNext
from .compaction import CompactionStrategy
from .compaction_protocols import CompactionResult, TriggerLike
from .exceptions import UsageError
from .repository import SessionRepository
from .service import DefaultSessionService

__all__ = ["ModelCallTracingAdvisor", "TracingAdvisor", "TracingSessionService"]

_HANDSHAKES: Final = frozenset(
    {"hello", "ismaster", "isMaster", "ping", "endSessions", "saslStart", "saslContinue"}
)
_DEFAULT_PORTS: Final = {"https": 443, "http": 80}
_M = TypeVar("_M", bound=Callable[..., Awaitable[Any]])


@contextlib.contextmanager
def _current(span: Span, stats: TurnStats | None) -> Generator[None, None, None]:
    with span.activate():
        if stats is None:
            yield
        else:
            with turn_stats(stats):
                yield


class _Tracing(Advisor, ABC):
    """A tracing advisor: the rest of the chain runs inside the span `_start` opens, which
    `_end` ends when the call returns or fails, or when the stream ends or is closed."""

    @abstractmethod
    def _start(self, ctx: CallContext, request: ChatRequest) -> tuple[Span, TurnStats | None]: ...

    @abstractmethod
    def _end(self, span: Span, stats: TurnStats | None, response: ChatResponse | None) -> None: ...

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """The rest of the chain inside the span."""
        span, stats = self._start(ctx, request)
        response = None
        try:
            with _current(span, stats):
                response = await call_next(ctx, request)
            return response
        except BaseException as exc:
            span.fail(exc)
            raise
        finally:
            self._end(span, stats, response)

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The rest of the chain's stream inside the span, which is current only while a chunk
        is produced, and ends with the stream (closed early: ``asyncsession.stream.abandoned``)."""
        span, stats = self._start(ctx, request)
        response: ChatResponse | None = None
        try:
            with _current(span, stats):
                inner = call_next(ctx, request)
        except BaseException as exc:
            span.fail(exc)
            self._end(span, stats, None)
            raise
        try:
            while True:
                with _current(span, stats):
                    try:
                        chunk = await anext(inner)
                    except StopAsyncIteration:
                        break
                yield chunk
            with contextlib.suppress(UsageError):  # a stream that did not say what it produced
                response = inner.response
        except GeneratorExit:  # closed early: close the rest inside the span
            span.set("asyncsession.stream.abandoned", True)
            with _current(span, stats):
                await inner.aclose()
            raise
        except BaseException as exc:
            span.fail(exc)
            raise
        finally:
            self._end(span, stats, response)


class TracingAdvisor(_Tracing, monitoring.CommandListener):
    """A ``chat_turn`` span per chat call, under which everything the turn does nests. Put it
    first in the client's ``advisors``.

    Its attributes: the session (also as ``gen_ai.conversation.id``), user and request ids,
    whether it streamed, and what the turn cost: ``asyncsession.turn.model_calls``,
    ``.store_operations`` (counted by a `ModelCallTracingAdvisor` and a `TracingSessionService`)
    and ``.db_commands``, the MongoDB commands sent (handshakes aside) when the advisor is also
    in the ``event_listeners`` of the store's client. A stream's span ends with the stream and
    is current only while the chain works on a chunk, never across a ``yield``.
    """

    def _start(self, ctx: CallContext, request: ChatRequest) -> tuple[Span, TurnStats | None]:
        attributes: dict[str, AttributeValue | None] = {
            "gen_ai.conversation.id": ctx.session_id,
            "asyncsession.session.id": ctx.session_id,
            "asyncsession.user.id": ctx.user_id,
            "asyncsession.request.id": ctx.request_id,
            "asyncsession.turn.streaming": ctx.streaming,
        }
        return start_span("chat_turn", attributes=attributes), TurnStats()

    def _end(self, span: Span, stats: TurnStats | None, response: ChatResponse | None) -> None:
        if stats is not None:
            span.set("asyncsession.turn.model_calls", stats.model_calls)
            span.set("asyncsession.turn.db_commands", stats.db_commands)
            span.set("asyncsession.turn.store_operations", stats.store_operations)
        span.end()

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        """Count the command towards the turn current in the task that sends it."""
        stats = current_turn()
        if stats is not None and event.command_name not in _HANDSHAKES:
            stats.db_commands += 1

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        """Nothing to do."""

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        """Nothing to do."""


class ModelCallTracingAdvisor(_Tracing):
    """A span per model call, after the OpenTelemetry GenAI conventions: ``chat {model}``. Put
    it last in the client's ``model_advisors``; each round of a tool loop gets its own span.

    Its attributes: ``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name``
    (``openai``), ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.response.id``,
    ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` /
    ``output_tokens``, ``gen_ai.conversation.id`` (the session id of the context) and, given
    ``base_url``, ``server.address`` and ``server.port``.

    Args:
        model: the model of calls whose options name none (the client's default).
        base_url: the OpenAI client's ``base_url`` (``openai_client.base_url``).
    """

    def __init__(
        self, *, model: str | None = None, base_url: str | httpx2.URL | None = None
    ) -> None:
        self.model = model
        """The model of calls whose options name none."""
        url = urlsplit(str(base_url)) if base_url is not None else None
        self._server: dict[str, AttributeValue | None] = (
            {}
            if url is None
            else {
                "server.address": url.hostname,
                "server.port": url.port or _DEFAULT_PORTS.get(url.scheme),
            }
        )

    def _start(self, ctx: CallContext, request: ChatRequest) -> tuple[Span, TurnStats | None]:
        model = request.options.model or self.model
        stats = current_turn()
        if stats is not None:
            stats.model_calls += 1
        attributes: dict[str, AttributeValue | None] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "openai",
            "gen_ai.request.model": model,
            "gen_ai.conversation.id": ctx.session_id,
            **self._server,
        }
        name = f"chat {model}" if model else "chat"
        return start_span(name, kind="client", attributes=attributes), stats

    def _end(self, span: Span, stats: TurnStats | None, response: ChatResponse | None) -> None:
        if response is not None:
            usage = response.usage
            span.set_many(
                {
                    "gen_ai.response.model": response.model,
                    "gen_ai.response.id": response.id,
                    "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
                    "gen_ai.usage.input_tokens": None if usage is None else usage.prompt_tokens,
                    "gen_ai.usage.output_tokens": (
                        None if usage is None else usage.completion_tokens
                    ),
                }
            )
        span.end()


def _session_of(parameter: str | None, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """The session id an operation names: its first argument when that is a ``session_id``, a
    ``session`` or an ``event``; ``None`` for the others (a user id, a metadata name)."""
    value = args[0] if args else kwargs.get(parameter or "")
    if parameter == "session_id":
        return value
    if parameter in ("session", "event"):
        return getattr(value, "session_id", None) or getattr(value, "id", None)
    return None


def _first_parameter(method: Callable[..., Any]) -> str | None:
    names = [name for name in inspect.signature(method).parameters if name != "self"]
    return names[0] if names else None


def _forward(method: _M, name: str = "") -> _M:
    """A method that runs the wrapped store's ``name`` (default: the method's) traced."""
    name = name or method.__name__
    parameter = _first_parameter(method)

    async def traced(self: _TracedRepository, *args: Any, **kwargs: Any) -> Any:
        work = getattr(self.repository, name)
        return await self.traced(name, _session_of(parameter, args, kwargs), work(*args, **kwargs))

    traced.__name__ = traced.__qualname__ = name
    return cast(_M, traced)


class _TracedRepository(ForwardsLoop, SessionRepository):
    """A repository whose every operation runs in a ``session_store <operation>`` span and
    counts towards the current turn's ``store_operations``; methods of the wrapped store beyond
    the base class (``ensure_indexes``) pass through, traced."""

    def __init__(self, repository: SessionRepository) -> None:
        self.repository = repository
        name = type(repository).__name__
        self._attributes: dict[str, AttributeValue | None] = {
            "asyncsession.store": name,
            "db.system.name": "mongodb" if name.startswith("Mongo") else None,
        }

    def __repr__(self) -> str:
        return f"traced({self.repository!r})"

    async def traced(self, operation: str, session_id: str | None, work: Awaitable[Any]) -> Any:
        stats = current_turn()
        if stats is not None:
            stats.store_operations += 1
        attributes = {
            **self._attributes,
            "db.operation.name": operation,
            "asyncsession.session.id": session_id,
            "gen_ai.conversation.id": session_id,
        }
        with span(f"session_store {operation}", kind="client", attributes=attributes):
            return await work

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.repository, name)
        return _forward(found, name).__get__(self) if inspect.iscoroutinefunction(found) else found

    save = _forward(SessionRepository.save)
    save_if_absent = _forward(SessionRepository.save_if_absent)
    find_by_id = _forward(SessionRepository.find_by_id)
    find_by_user_id = _forward(SessionRepository.find_by_user_id)
    find_by_metadata = _forward(SessionRepository.find_by_metadata)
    delete = _forward(SessionRepository.delete)
    delete_expired_sessions = _forward(SessionRepository.delete_expired_sessions)
    fork = _forward(SessionRepository.fork)
    locate = _forward(SessionRepository.locate)
    find_forks = _forward(SessionRepository.find_forks)
    append_events = _forward(SessionRepository.append_events)
    append_event = _forward(SessionRepository.append_event)
    find_events = _forward(SessionRepository.find_events)
    find_events_by_user_id = _forward(SessionRepository.find_events_by_user_id)
    get_event_version = _forward(SessionRepository.get_event_version)
    read_snapshot = _forward(SessionRepository.read_snapshot)
    read_body = _forward(SessionRepository.read_body)
    read_body_page = _forward(SessionRepository.read_body_page)
    acquire_lease = _forward(SessionRepository.acquire_lease)
    release_lease = _forward(SessionRepository.release_lease)
    aclose = _forward(SessionRepository.aclose)


class TracingSessionService(DefaultSessionService):
    """A ``DefaultSessionService`` (same arguments) over a traced store, whose compactions run
    in a ``compaction`` span. Give it to the client and the compaction worker.

    Each store operation runs in a ``session_store <operation>`` span (``db.operation.name``,
    ``db.system.name``, ``asyncsession.store``, and the session id where the operation names
    one) and counts towards the turn's ``store_operations``. Its ``repository`` is the traced
    store (the given one stays its owner's to close): pass it wherever a repository is wanted.
    The ``compaction`` span holds the session id, the strategy and trigger classes, and
    ``asyncsession.compaction.applied``, ``.archived_events``, ``.tokens_saved`` and ``.error``.
    """

    def __init__(self, repository: SessionRepository, **options: Any) -> None:
        require_object(
            repository,
            "TracingSessionService's repository",
            "a SessionRepository such as InMemorySessionRepository()",
            methods=REPOSITORY_METHODS,
        )
        super().__init__(_TracedRepository(repository), **options)

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact inside a ``compaction`` span."""
        attributes = {
            "asyncsession.session.id": session_id,
            "gen_ai.conversation.id": session_id,
            "asyncsession.compaction.strategy": type(strategy).__name__,
            "asyncsession.compaction.trigger": type(trigger).__name__,
        }
        with span("compaction", attributes=attributes) as traced:
            result = await super().compact(session_id, trigger, strategy)
            traced.set_many(
                {
                    "asyncsession.compaction.applied": result.applied,
                    "asyncsession.compaction.archived_events": result.archived_event_count,
                    "asyncsession.compaction.tokens_saved": result.tokens_estimated_saved,
                    "asyncsession.compaction.error": result.error,
                }
            )
        return result
