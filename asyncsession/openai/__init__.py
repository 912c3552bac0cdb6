"""``ChatClient``: OpenAI Chat Completions calls and streams through the advisor pipeline.

Uses the `openai` package, a core dependency of asyncsession (no extra to install).
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("openai") is None:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.openai needs the OpenAI SDK, a core dependency: pip install asyncsession"
    )

from ._client import ChatClient, MessagesLike
from .streaming import ChatStream

__all__ = ["ChatClient", "ChatStream", "MessagesLike"]
