"""Test helpers for applications built on asyncsession (no pytest needed to import this).

- `FakeClock`: a settable clock to inject into services.
- ``asyncsession.testing.contract``: the repository contract kit (needs pytest).
- `ScriptedOpenAIServer` (``asyncsession.testing.openai_server``): a scripted OpenAI-compatible
  model, reached through the real ``openai`` client's ``httpx`` transport.
"""

from ._clock import FakeClock
from .openai_server import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

__all__ = [
    "FakeClock",
    "RecordedRequest",
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedToolCall",
]
