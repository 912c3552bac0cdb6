"""OpenAI calls and streams through the advisor pipeline.

``ChatClient`` speaks Chat Completions, ``ResponsesClient`` the Responses API; both take the same
advisors. ``OpenAISummarizer`` writes the summaries of recursive summarization.
``items_to_messages`` / ``messages_to_items`` convert Responses API items.

Uses the `openai` package, a core dependency of asyncsession (no extra to install).
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("openai") is None:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.openai needs the OpenAI SDK, a core dependency: pip install openai"
    )

from .._server_compaction import SERVER_COMPACTION_STRATEGY, SERVER_COMPACTION_TRIGGER
from ._chat_client import BaseChatClient, ChatClient, MessagesLike
from ._memory_flush import DEFAULT_MEMORY_FLUSH_PROMPT, ModelMemoryFlush
from ._responses_client import ResponsesClient
from ._responses_compaction import (
    COMPACTION_USAGE_KEY,
    RESPONSES_COMPACT_SOURCE,
    ResponsesCompactionStrategy,
)
from ._responses_items import ItemLike, items_to_messages, messages_to_items
from ._summarizer import OpenAISummarizer
from .streaming import ChatStream

__all__ = [
    "COMPACTION_USAGE_KEY",
    "DEFAULT_MEMORY_FLUSH_PROMPT",
    "RESPONSES_COMPACT_SOURCE",
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "BaseChatClient",
    "ChatClient",
    "ChatStream",
    "ItemLike",
    "MessagesLike",
    "ModelMemoryFlush",
    "OpenAISummarizer",
    "ResponsesClient",
    "ResponsesCompactionStrategy",
    "items_to_messages",
    "messages_to_items",
]
