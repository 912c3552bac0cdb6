"""The tracing advisors: a span per chat turn, and a GenAI span per model call."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Final
from urllib.parse import urlsplit

import httpx2

from .._telemetry import AttributeValue, Span, TurnStats, current_turn, start_span, turn_stats
from ..chat import (
    Advisor,
    CallContext,
    CallNext,
    ChatChunk,
    ChatRequest,
    ChatResponse,
    ChunkStream,
    StreamNext,
)
from ..exceptions import UsageError

__all__ = ["ModelCallTracingAdvisor", "TracingAdvisor"]

TURN_SPAN: Final = "chat_turn"
"""The name of a turn's span."""


def _turn_attributes(ctx: CallContext) -> dict[str, str | bool | None]:
    return {
        "gen_ai.conversation.id": ctx.session_id,
        "asyncsession.session.id": ctx.session_id,
        "asyncsession.user.id": ctx.user_id,
        "asyncsession.request.id": ctx.request_id,
        "asyncsession.turn.streaming": ctx.streaming,
    }


def _end_turn(span: Span, stats: TurnStats) -> None:
    span.set_many(
        {
            "asyncsession.turn.model_calls": stats.model_calls,
            "asyncsession.turn.db_commands": stats.db_commands,
            "asyncsession.turn.store_operations": stats.store_operations,
        }
    )
    span.end()


_DEFAULT_PORTS: Final = {"https": 443, "http": 80}


def _server_attributes(base_url: str | httpx2.URL | None) -> dict[str, AttributeValue | None]:
    """``server.address`` and ``server.port`` of the model's endpoint; none without a URL."""
    if base_url is None:
        return {}
    url = urlsplit(str(base_url))
    return {
        "server.address": url.hostname,
        "server.port": url.port or _DEFAULT_PORTS.get(url.scheme),
    }


def _model_attributes(
    ctx: CallContext, model: str | None, server: dict[str, AttributeValue | None]
) -> dict[str, AttributeValue | None]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": model,
        "gen_ai.conversation.id": ctx.session_id,
        **server,
    }


def _end_model_call(span: Span, response: ChatResponse) -> None:
    usage = response.usage
    span.set_many(
        {
            "gen_ai.response.model": response.model,
            "gen_ai.response.id": response.id,
            "gen_ai.response.finish_reasons": [response.finish_reason or "unknown"],
            "gen_ai.usage.input_tokens": None if usage is None else usage.prompt_tokens,
            "gen_ai.usage.output_tokens": None if usage is None else usage.completion_tokens,
        }
    )
    span.end()


class TracingAdvisor(Advisor):
    """A span per chat call: ``chat_turn``. Put it first in the client's ``advisors``.

    Its attributes: the session (also as ``gen_ai.conversation.id``), user and request ids of
    the context, whether it streamed, and what the turn cost:
    ``asyncsession.turn.model_calls``, ``asyncsession.turn.db_commands``
    (the MongoDB commands sent, when the client has a `MongoCommandCounter`) and
    ``asyncsession.turn.store_operations`` (when the store is a `TracingSessionRepository`).
    Everything the turn does (store operations, model calls, tool calls, compaction) nests
    under it. A stream's span ends when the stream ends or is closed; on the stream path the
    span is current only while the chain works on a chunk, never across a ``yield``.
    """

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """The rest of the chain inside a ``chat_turn`` span."""
        span = start_span(TURN_SPAN, attributes=_turn_attributes(ctx))
        stats = TurnStats()
        try:
            with span.activate(), turn_stats(stats):
                return await call_next(ctx, request)
        except BaseException as exc:
            span.fail(exc)
            raise
        finally:
            _end_turn(span, stats)

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The rest of the chain's stream inside a ``chat_turn`` span."""
        stats = TurnStats()
        span = start_span(TURN_SPAN, attributes=_turn_attributes(ctx))
        with span.activate(), turn_stats(stats):
            inner = call_next(ctx, request)
        return _SpanStream(inner, span, stats, lambda _: _end_turn(span, stats))


class ModelCallTracingAdvisor(Advisor):
    """A span per model call, after the OpenTelemetry GenAI conventions: ``chat {model}``. Put
    it last in the client's ``model_advisors``.

    Its attributes: ``gen_ai.operation.name`` (``chat``), ``gen_ai.provider.name``
    (``openai``), ``gen_ai.request.model``, ``gen_ai.response.model``, ``gen_ai.response.id``,
    ``gen_ai.response.finish_reasons``, ``gen_ai.usage.input_tokens`` /
    ``output_tokens``, ``gen_ai.conversation.id`` (the session id of the context) and, given
    the client's ``base_url``, ``server.address`` and ``server.port``. A tool loop's every round
    gets its own span.

    Args:
        model: the model of calls whose options name none (the client's default).
        base_url: the OpenAI client's ``base_url`` (``openai_client.base_url``), for the
            ``server.address`` and ``server.port`` attributes.
    """

    def __init__(
        self, *, model: str | None = None, base_url: str | httpx2.URL | None = None
    ) -> None:
        self.model = model
        """The model of calls whose options name none."""
        self._server = _server_attributes(base_url)

    def _start(self, ctx: CallContext, request: ChatRequest) -> Span:
        model = request.options.model or self.model
        stats = current_turn()
        if stats is not None:
            stats.model_calls += 1
        name = f"chat {model}" if model else "chat"
        attributes = _model_attributes(ctx, model, self._server)
        return start_span(name, kind="client", attributes=attributes)

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """The model call inside its span."""
        span = self._start(ctx, request)
        try:
            with span.activate():
                response = await call_next(ctx, request)
        except BaseException as exc:
            span.fail(exc)
            span.end()
            raise
        _end_model_call(span, response)
        return response

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The model's stream inside its span, which ends with the stream."""
        span = self._start(ctx, request)
        with span.activate():
            inner = call_next(ctx, request)

        def finish(response: ChatResponse | None) -> None:
            if response is None:
                span.end()
            else:
                _end_model_call(span, response)

        return _SpanStream(inner, span, current_turn(), finish)


class _SpanStream(ChunkStream):
    """A stream whose span is current while it produces a chunk, and ends with it."""

    __slots__ = ("_finish", "_inner", "_span", "_stats")

    def __init__(
        self,
        inner: ChunkStream,
        span: Span,
        stats: TurnStats | None,
        finish: Callable[[ChatResponse | None], None],
    ) -> None:
        super().__init__()
        self._inner = inner
        self._span = span
        self._stats = stats
        self._finish: Callable[[ChatResponse | None], None] | None = finish

    def _done(self, response: ChatResponse | None) -> None:
        finish, self._finish = self._finish, None
        if finish is not None:
            finish(response)

    async def __anext__(self) -> ChatChunk:
        try:
            with self._span.activate(), _maybe_stats(self._stats):
                return await self._inner.__anext__()
        except StopAsyncIteration:
            self._done(self._produced())
            raise
        except BaseException as exc:
            self._span.fail(exc)
            self._done(None)
            raise

    def _produced(self) -> ChatResponse | None:
        try:
            return self._inner.response
        except UsageError:  # not read to the end
            return None

    async def aclose(self) -> None:
        try:
            with self._span.activate(), _maybe_stats(self._stats):
                await self._inner.aclose()
        finally:
            if self._finish is not None:
                self._span.set("asyncsession.stream.abandoned", True)
            self._done(None)


def _maybe_stats(stats: TurnStats | None) -> contextlib.AbstractContextManager[None]:
    return contextlib.nullcontext() if stats is None else turn_stats(stats)
