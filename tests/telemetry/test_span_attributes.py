"""Spans carry the GenAI ``gen_ai.conversation.id`` and ``server.address`` / ``server.port``."""

from __future__ import annotations

from urllib.parse import urlsplit

import openai
import pytest
from chat_support import MODEL, PATHS, ask, turn
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from asyncsession import CreateSessionRequest, InMemorySessionRepository
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.openai import ChatClient
from asyncsession.telemetry import ModelCallTracingAdvisor, TracingAdvisor, TracingSessionService
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


@pytest.mark.parametrize("streaming", PATHS)
async def test_turn_model_and_store_spans_name_the_conversation_and_the_server(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    exporter: InMemorySpanExporter,
) -> None:
    """Every span of a turn carries the session id as ``gen_ai.conversation.id``; the model
    span names the host and port of the client's base URL."""
    service = TracingSessionService(InMemorySessionRepository())
    chat = ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        advisors=[TracingAdvisor()],
        model_advisors=[ModelCallTracingAdvisor(model=MODEL, base_url=openai_client.base_url)],
    )
    server.enqueue(ScriptedReply.text("Hello."))

    await ask(chat, "Hi", streaming=streaming, **turn("conv-7", "alice"))

    spans = exporter.get_finished_spans()
    kinds = {span.name.split(" ")[0] for span in spans}
    assert {"chat_turn", "chat", "session_store"} <= kinds
    for span in spans:
        assert span.attributes is not None
        assert span.attributes["gen_ai.conversation.id"] == "conv-7", span.name
    (model,) = [span for span in spans if span.name == f"chat {MODEL}"]
    assert model.attributes is not None
    url = urlsplit(server.base_url)
    assert model.attributes["server.address"] == url.hostname == "scripted-openai.test"
    assert model.attributes["server.port"] == 80


async def test_a_compaction_span_names_the_conversation(exporter: InMemorySpanExporter) -> None:
    """The ``compaction`` span of a traced service carries ``gen_ai.conversation.id``."""
    service = TracingSessionService(InMemorySessionRepository())
    await service.create(CreateSessionRequest(id="conv-8", user_id="alice"))
    await service.compact("conv-8", TurnCountTrigger(1), SlidingWindowCompactionStrategy(2))
    (compaction,) = [span for span in exporter.get_finished_spans() if span.name == "compaction"]
    assert compaction.attributes is not None
    assert compaction.attributes["gen_ai.conversation.id"] == "conv-8"


@pytest.mark.parametrize(
    ("base_url", "address", "port"),
    [
        pytest.param("https://api.openai.com/v1", "api.openai.com", 443, id="https-default"),
        pytest.param("http://models.internal/v1", "models.internal", 80, id="http-default"),
        pytest.param("http://[::1]:8080/v1", "::1", 8080, id="ipv6-explicit-port"),
    ],
)
async def test_the_server_port_defaults_by_scheme(
    base_url: str,
    address: str,
    port: int,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    exporter: InMemorySpanExporter,
) -> None:
    """A base URL without a port names the scheme's default port."""
    chat = ChatClient(
        openai_client, model=MODEL, model_advisors=[ModelCallTracingAdvisor(base_url=base_url)]
    )
    server.enqueue(ScriptedReply.text("Hello."))
    await chat.call("Hi")
    (model,) = exporter.get_finished_spans()
    assert model.attributes is not None
    assert (model.attributes["server.address"], model.attributes["server.port"]) == (address, port)
    assert "gen_ai.conversation.id" not in model.attributes  # no session in the context
