"""Fixtures of the telemetry tests: an in-memory span exporter on the global tracer provider."""

from collections.abc import Iterator

import pytest
from chat_support import openai_client, repository, server, service
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

__all__ = ["exporter", "openai_client", "repository", "server", "service"]

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="session")
def _provider() -> TracerProvider:
    """The global SDK provider (OpenTelemetry allows one per process), with our exporter."""
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
    return provider


@pytest.fixture
def exporter(_provider: TracerProvider) -> Iterator[InMemorySpanExporter]:
    """The finished spans of one test."""
    _EXPORTER.clear()
    yield _EXPORTER
    _EXPORTER.clear()
