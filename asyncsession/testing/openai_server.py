"""A scripted, OpenAI-compatible server for tests, reached through the ``openai`` client's own
``httpx`` transport: no socket, no port, no network.

[`ScriptedOpenAIServer`][asyncsession.testing.openai_server.ScriptedOpenAIServer] answers the
real ``openai.AsyncOpenAI`` client, which parses every reply and stream as it would parse
OpenAI's. It serves ``POST /v1/chat/completions`` with the real ``chat.completion`` and
``chat.completion.chunk`` JSON shapes, and ``POST /v1/responses`` with the Responses API's
``response`` JSON and its SSE events (``response.created`` ... ``response.completed``, or
``response.failed`` / ``response.incomplete`` / ``error`` as scripted by
``ScriptedReply.outcome``), answering each request with the next
[`ScriptedReply`][asyncsession.testing.openai_server.ScriptedReply] from its queue, or with
whatever a ``responder`` function returns. Everything else gets a 404 in OpenAI's error shape.

```python
async with ScriptedOpenAIServer() as server:
    client = server.client()  # an openai.AsyncOpenAI whose requests the server answers
    server.enqueue(ScriptedReply.text("Hello there"))
    reply = await client.chat.completions.create(model="gpt-test", messages=[...])
    assert server.requests[0].messages[-1]["content"] == "..."
    server.assert_done()
```

Replies also carry fault and timing controls so tests can synchronise on events instead of
sleeping: ``hold`` (wait for an event before answering), ``pause_after`` + ``gate`` (stream N
chunks, then wait), ``drop_after`` (stream N chunks, then break the connection) and ``delay``.
The client's read timeout bounds each wait, as it would on a network. A client that goes away
mid-response is noticed at once (`ScriptedOpenAIServer.wait_disconnected`).
"""

from ._openai_server.script import (
    RecordedRequest,
    ScriptedReply,
    ScriptedToolCall,
)
from ._openai_server.server import ScriptedOpenAIServer

__all__ = [
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedToolCall",
    "RecordedRequest",
]
