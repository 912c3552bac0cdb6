"""Test helpers for applications built on asyncsession (no pytest needed to import this).

- :class:`FakeClock`: a settable clock to inject into services.
- ``asyncsession.testing.contract``: the repository contract kit (needs pytest).
- ``asyncsession.testing.openai_server``: a scripted OpenAI-compatible HTTP server.
"""

from ._clock import FakeClock

__all__ = ["FakeClock"]
