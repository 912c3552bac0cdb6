"""OpenAI chat turns: Chat Completions (``ChatClient``) and the Responses API
(``ResponsesClient``), with the same session memory, tools and advisors.

``ResponsesCompactionStrategy`` compacts with ``responses.compact``, ``OpenAISummarizer`` writes
the summaries of recursive summarization, ``ModelMemoryFlush`` lets a model save what is about
to be archived to long-term memory. ``items_to_messages`` / ``messages_to_items`` convert
Responses API items.
"""

from ._client import BaseChatClient, ChatClient
from ._memory_flush import ModelMemoryFlush
from ._responses_client import ResponsesClient
from ._responses_compaction import ResponsesCompactionStrategy
from ._responses_items import items_to_messages, messages_to_items
from ._stream import ChatStream
from ._summarizer import OpenAISummarizer

__all__ = [
    "BaseChatClient",
    "ChatClient",
    "ChatStream",
    "ModelMemoryFlush",
    "OpenAISummarizer",
    "ResponsesClient",
    "ResponsesCompactionStrategy",
    "items_to_messages",
    "messages_to_items",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (
    BaseChatClient,
    ChatClient,
    ChatStream,
    ModelMemoryFlush,
    OpenAISummarizer,
    ResponsesClient,
    ResponsesCompactionStrategy,
    items_to_messages,
    messages_to_items,
):
    _public.__module__ = __name__
