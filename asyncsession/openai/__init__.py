"""``ChatClient``: OpenAI Chat Completions calls and streams through the advisor pipeline.

Needs the ``openai`` package: ``pip install 'asyncsession[openai]'``.
"""

import importlib.util as _importlib_util

if _importlib_util.find_spec("openai") is None:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.openai needs the OpenAI SDK: pip install 'asyncsession[openai]'"
    )

from ._client import ChatClient, MessagesLike
from ._responses_items import ItemLike, items_to_messages, messages_to_items
from .streaming import ChatStream

__all__ = [
    "ChatClient",
    "ChatStream",
    "ItemLike",
    "MessagesLike",
    "items_to_messages",
    "messages_to_items",
]
