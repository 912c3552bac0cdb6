"""Test helpers for applications built on asyncsession (no pytest needed to import this).

- :class:`FakeClock`: a settable clock to inject into services.
- ``asyncsession.testing.contract``: the repository contract kit (needs pytest).
- ``asyncsession.testing.openai_server``: a scripted OpenAI-compatible HTTP server.
"""

from ._clock import FakeClock
from .openai_server import (
    FinishReason,
    RecordedRequest,
    Responder,
    ResponseOutcome,
    ScriptedError,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedReplyOptions,
    ScriptedToolCall,
    ScriptedUsage,
)

__all__ = [
    "FakeClock",
    "FinishReason",
    "RecordedRequest",
    "Responder",
    "ResponseOutcome",
    "ScriptedError",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedReplyOptions",
    "ScriptedToolCall",
    "ScriptedUsage",
]
