"""OpenAI chat turns: Chat Completions (``ChatClient``) and the Responses API
(``ResponsesClient``), with the same session memory, tools and advisors.

``ResponsesCompactionStrategy`` compacts with ``responses.compact``, ``OpenAISummarizer`` writes
the summaries of recursive summarization, ``ModelMemoryFlush`` lets a model save what is about
to be archived to long-term memory.
"""

from ._client import ChatClient
from ._memory_flush import ModelMemoryFlush
from ._responses import ResponsesClient
from ._responses_compaction import ResponsesCompactionStrategy
from ._stream import ChatStream
from ._summarizer import OpenAISummarizer

__all__ = [
    "ChatClient",
    "ChatStream",
    "ModelMemoryFlush",
    "OpenAISummarizer",
    "ResponsesClient",
    "ResponsesCompactionStrategy",
]

# Each public name shows the path users import it from (in reprs, errors and the API docs).
for _public in (
    ChatClient,
    ChatStream,
    ModelMemoryFlush,
    OpenAISummarizer,
    ResponsesClient,
    ResponsesCompactionStrategy,
):
    _public.__module__ = __name__
