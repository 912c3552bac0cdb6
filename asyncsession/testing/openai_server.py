"""A scripted, OpenAI-compatible HTTP server on loopback, for tests.

:class:`ScriptedOpenAIServer` speaks enough HTTP/1.1 (keep-alive, ``Content-Length`` and chunked
request bodies, JSON and chunked ``text/event-stream`` responses) for the real
``openai.AsyncOpenAI`` client to talk to it. It serves ``POST /v1/chat/completions`` (and
``/chat/completions``) with the real ``chat.completion`` and ``chat.completion.chunk`` JSON shapes,
and ``POST /v1/responses`` with the Responses API's ``response`` JSON and its SSE events
(``response.created`` ... ``response.completed``, or ``response.failed`` /
``response.incomplete`` / ``error`` as scripted by ``ScriptedReply.outcome``),
answering each request with the next :class:`ScriptedReply` from its queue, or with whatever a
``responder`` function returns. Everything else gets a 404 in OpenAI's error shape.

```python
async with ScriptedOpenAIServer() as server:
    client = openai.AsyncOpenAI(base_url=server.base_url, api_key="test", max_retries=0)
    server.enqueue(ScriptedReply.text("Hello there"))
    reply = await client.chat.completions.create(model="gpt-test", messages=[...])
    assert server.requests[0].messages[-1]["content"] == "..."
    server.assert_done()
```

Replies also carry fault and timing controls so tests can synchronise on events instead of
sleeping: ``hold`` (wait for an event before answering), ``pause_after`` + ``gate`` (stream N
chunks, then wait), ``drop_after`` (stream N chunks, then close the connection) and ``delay``.
While a reply is being sent the server watches the connection, so a client that goes away is
noticed at once (:meth:`ScriptedOpenAIServer.wait_disconnected`).

Only the standard library and pydantic are used, so the module is importable wherever the
library is; it never imports the OpenAI SDK.
"""

from ._openai_server.script import (
    FinishReason,
    RecordedRequest,
    Responder,
    ResponseOutcome,
    ScriptedError,
    ScriptedReply,
    ScriptedReplyOptions,
    ScriptedToolCall,
    ScriptedUsage,
)
from ._openai_server.server import ScriptedOpenAIServer

__all__ = [
    "ScriptedOpenAIServer",
    "ScriptedReply",
    "ScriptedReplyOptions",
    "ScriptedToolCall",
    "ScriptedUsage",
    "ScriptedError",
    "RecordedRequest",
    "Responder",
    "FinishReason",
    "ResponseOutcome",
]
