"""OpenTelemetry spans of turns, model calls, tool calls, compactions and store operations."""

from __future__ import annotations

import inspect
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from typing import Any
from unittest.mock import AsyncMock

import openai
import pytest
from chat_support import MODEL, PATHS, ask, turn
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode
from pymongo import AsyncMongoClient

from asyncsession import (
    ChatError,
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionRepository,
    UserMessage,
    tool,
)
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.openai import ChatClient
from asyncsession.telemetry import ModelCallTracingAdvisor, TracingAdvisor, TracingSessionService
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def traced_chat(openai_client: openai.AsyncOpenAI, service: Any) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[lookup],
        advisors=[TracingAdvisor()],
        model_advisors=[ModelCallTracingAdvisor(model=MODEL)],
    )


def named(spans: Sequence[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def the(spans: Sequence[ReadableSpan], prefix: str) -> ReadableSpan:
    found = named(spans, prefix)
    assert len(found) == 1, [s.name for s in spans]
    return found[0]


def parent_of(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_tool_turn_is_one_turn_span_over_model_tool_and_store_spans(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    exporter: InMemorySpanExporter,
) -> None:
    """A two-round tool turn: one ``chat_turn`` span; under it two GenAI model spans, one
    ``execute_tool`` span and a span per store operation, which the turn counts."""
    service = TracingSessionService(InMemorySessionRepository())
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("It is v."),
    )

    reply = await ask(
        traced_chat(openai_client, service),
        "What is k?",
        streaming=streaming,
        **turn("s1", "alice"),
    )

    spans = exporter.get_finished_spans()
    whole = the(spans, "chat_turn")
    assert whole.parent is None
    assert whole.attributes is not None
    assert whole.attributes["asyncsession.session.id"] == "s1"
    assert whole.attributes["asyncsession.user.id"] == "alice"
    assert whole.attributes["asyncsession.turn.streaming"] is streaming
    assert whole.attributes["asyncsession.turn.model_calls"] == 2
    models = named(spans, f"chat {MODEL}")
    assert len(models) == 2
    for model in models:
        assert model.kind is SpanKind.CLIENT
        assert parent_of(model) == whole.context.span_id
        assert model.attributes is not None
        assert model.attributes["gen_ai.operation.name"] == "chat"
        assert model.attributes["gen_ai.request.model"] == MODEL
        assert model.attributes["gen_ai.usage.input_tokens"] > 0
    assert models[0].attributes["gen_ai.response.finish_reasons"] == ("tool_calls",)  # type: ignore[index]
    final = models[1].attributes
    assert final is not None
    assert final["gen_ai.response.finish_reasons"] == ("stop",)
    assert reply.usage is not None
    outputs = [m.attributes["gen_ai.usage.output_tokens"] for m in models]  # type: ignore[index]
    inputs = [m.attributes["gen_ai.usage.input_tokens"] for m in models]  # type: ignore[index]
    assert sum(outputs) == reply.usage.completion_tokens  # type: ignore[arg-type]
    assert sum(inputs) == reply.usage.prompt_tokens  # type: ignore[arg-type]
    tool_span = the(spans, "execute_tool lookup")
    assert tool_span.attributes is not None
    assert tool_span.attributes["gen_ai.tool.name"] == "lookup"
    assert parent_of(tool_span) == whole.context.span_id
    stores = named(spans, "session_store ")
    assert stores
    assert all(parent_of(s) == whole.context.span_id for s in stores)
    assert whole.attributes["asyncsession.turn.store_operations"] == len(stores)
    assert all(s.end_time is not None and whole.end_time is not None for s in spans)
    assert all(s.end_time <= whole.end_time for s in spans)  # type: ignore[operator]


async def test_a_failed_model_call_marks_the_model_and_turn_spans_failed(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    exporter: InMemorySpanExporter,
) -> None:
    """A model error: both spans end with an error status and ``error.type``."""
    server.enqueue(ScriptedReply.error(500, "boom"))

    with pytest.raises(ChatError):
        await traced_chat(openai_client, service).call("Hi", **turn("s1"))

    spans = exporter.get_finished_spans()
    for span in (the(spans, "chat_turn"), the(spans, "chat ")):
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes is not None
        assert span.attributes["error.type"] == "ChatError"


async def test_an_abandoned_stream_ends_its_spans(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    exporter: InMemorySpanExporter,
) -> None:
    """A stream closed after its first chunk ends the turn and model spans, marked abandoned."""
    server.enqueue(ScriptedReply.text("A long answer", chunk_size=2))

    async with traced_chat(openai_client, service).stream("Hi", **turn("s1")) as stream:
        async for _ in stream:
            break

    spans = exporter.get_finished_spans()
    turn_span, model = the(spans, "chat_turn"), the(spans, "chat ")
    for span in (turn_span, model):
        assert span.attributes is not None
        assert span.attributes["asyncsession.stream.abandoned"] is True
    assert model.end_time is not None
    assert turn_span.end_time is not None
    assert model.end_time <= turn_span.end_time  # the model's stream is closed inside the turn


async def test_a_compaction_is_a_span_with_its_outcome(
    service: DefaultSessionService, exporter: InMemorySpanExporter
) -> None:
    """``TracingSessionService.compact`` runs in a ``compaction`` span that says what it did."""
    traced = TracingSessionService(service.repository)
    await traced.create(CreateSessionRequest(id="s1", user_id="u"))
    for n in range(6):
        await traced.append_message("s1", UserMessage(text=f"m{n}"))

    result = await traced.compact("s1", TurnCountTrigger(2), SlidingWindowCompactionStrategy(2))

    span = the(exporter.get_finished_spans(), "compaction")
    assert span.attributes is not None
    assert span.attributes["asyncsession.session.id"] == "s1"
    assert span.attributes["asyncsession.compaction.applied"] is True
    assert span.attributes["asyncsession.compaction.archived_events"] == (
        result.archived_event_count
    )
    assert result.archived_event_count == 4
    assert span.attributes["asyncsession.compaction.strategy"] == "SlidingWindowCompactionStrategy"


@pytest.fixture
async def counted_mongo(mongo_uri: str) -> AsyncIterator[MongoSessionRepository]:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        mongo_uri, tz_aware=True, event_listeners=[TracingAdvisor()]
    )
    name = f"t_{uuid.uuid4().hex[:16]}"
    repository = MongoSessionRepository(client[name])
    try:
        await repository.ensure_indexes()
        yield repository
    finally:
        await client.drop_database(name)
        await client.close()


@pytest.mark.parametrize("streaming", PATHS)
async def test_on_mongodb_the_turn_span_carries_the_turn_s_command_count(
    streaming: bool,
    counted_mongo: MongoSessionRepository,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    exporter: InMemorySpanExporter,
) -> None:
    """With a `TracingAdvisor` registered on the client, the first turn of a new session costs 4
    commands (read, create, question, reply), a steady turn 3 (read, question, reply), and the
    traced store changes neither; the turn span counts its store operations."""
    service = TracingSessionService(counted_mongo)
    server.enqueue(ScriptedReply.text("one"), ScriptedReply.text("two"))
    client = traced_chat(openai_client, service)

    await ask(client, "first", streaming=streaming, **turn("s1"))
    await ask(client, "second", streaming=streaming, **turn("s1"))

    turns = named(exporter.get_finished_spans(), "chat_turn")
    assert [t.attributes["asyncsession.turn.db_commands"] for t in turns] == [4, 3]  # type: ignore[index]
    operations = named(exporter.get_finished_spans(), "session_store ")
    for span in turns:
        mine = [s for s in operations if parent_of(s) == span.context.span_id]
        assert span.attributes["asyncsession.turn.store_operations"] == len(mine)  # type: ignore[index]


def test_without_opentelemetry_everything_is_a_no_op() -> None:
    """With the package unimportable, the helpers, advisors and decorators still work."""
    code = """
import asyncio, sys
sys.modules["opentelemetry"] = None
from asyncsession import _telemetry
from asyncsession.telemetry import TracingSessionService
from asyncsession import InMemorySessionRepository, Session
with _telemetry.span("x", attributes={"a": 1}) as s:
    s.set("b", 2)
async def main():
    repo = TracingSessionService(InMemorySessionRepository()).repository
    await repo.save(Session(id="s1", user_id="u"))
    assert (await repo.find_by_id("s1")) is not None
asyncio.run(main())
print("ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


async def test_every_store_operation_reaches_the_wrapped_store_in_its_span(
    exporter: InMemorySpanExporter,
) -> None:
    """Each coroutine method of `SessionRepository` on a traced service's store, the defaults
    of the base class included (``read_body``: the wrapped store may offload), is the wrapped
    store's, in a ``session_store`` span naming the session; so is a method beyond the base
    class (``ensure_indexes``)."""
    inner = AsyncMock(spec=MongoSessionRepository)
    store = TracingSessionService(inner).repository
    names = [
        name
        for name, _ in inspect.getmembers(SessionRepository, inspect.iscoroutinefunction)
        if not name.startswith("_")
    ]
    for name in [*names, "ensure_indexes"]:
        await getattr(store, name)("s1")
        getattr(inner, name).assert_awaited_once_with("s1")
    spans = exporter.get_finished_spans()
    assert [s.name for s in spans] == [f"session_store {n}" for n in [*names, "ensure_indexes"]]
    by_session = [s for s in spans if s.attributes and s.attributes.get("gen_ai.conversation.id")]
    assert {s.name.split(" ")[1] for s in by_session} >= {"find_events", "read_body", "delete"}
    assert all(s.attributes["asyncsession.session.id"] == "s1" for s in by_session)  # type: ignore[index]
