"""OpenTelemetry traces of chat turns, model calls, tool calls, compactions and store operations.

Install the ``[otel]`` extra (``pip install '.[otel]'`` from a clone) and configure a tracer
provider in your application; without ``opentelemetry-api`` every piece here is a no-op.
Compose what you need:

- `TracingAdvisor` (first of a client's ``advisors``): a ``chat_turn`` span per call, with
  what the turn cost; `ModelCallTracingAdvisor` (last of its ``model_advisors``): a GenAI
  ``chat {model}`` span per model call;
- `TracingSessionRepository`: a ``session_store <operation>`` span per store operation;
- `TracingSessionService`: the standard service, with a ``compaction`` span per compaction;
- `MongoCommandCounter`: a PyMongo command listener that counts a turn's MongoDB commands.

The turn adds an ``execute_tool {name}`` span per tool call on its own.
"""

from ._advisors import ModelCallTracingAdvisor, TracingAdvisor
from ._commands import MongoCommandCounter
from ._repository import TracingSessionRepository
from ._service import TracingSessionService

__all__ = [
    "ModelCallTracingAdvisor",
    "MongoCommandCounter",
    "TracingAdvisor",
    "TracingSessionRepository",
    "TracingSessionService",
]
