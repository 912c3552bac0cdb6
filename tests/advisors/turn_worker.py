"""One web process answering one request: run by the process tests of this directory.

``python turn_worker.py <mongo uri> <database> <session id> <request id> [call|stream]
[text|ticket]`` builds the chat client a web app builds (its defaults, no lease settings) over the
MongoDB store, with a scripted model of its own: it prints ``model <unix time>`` when it is
called and answers once a line arrives on stdin, with a text (``text``) or a call of the
return-direct tool ``ticket`` (``ticket``). The process prints ``started``; ``waiting`` the first
time it reads the session while another attempt holds a live lease on it; ``lease`` each time
it takes or renews a lease; and, as its last line, the outcome as JSON: the reply's text and
finish reason, the return-direct results, the text the result chunks added up to (streams) and
how often this process ran the tool.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, EventFilter, MongoSessionRepository, Tool
from asyncsession.openai import ChatClient
from asyncsession.repository import Lease, SessionSnapshot
from asyncsession.testing import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

runs: list[int] = []


async def ticket(number: int) -> str:
    """Show a ticket."""
    runs.append(number)
    return f"ticket {number}: open"


class ObservedRepository(MongoSessionRepository):
    """The store, saying when this process finds another's live lease, and when it takes or
    renews its own."""

    waited = False

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        snapshot = await super().read_snapshot(session_id, filter)
        lease = None if snapshot is None else snapshot.lease
        if not self.waited and lease is not None and lease.is_live():
            self.waited = True
            print("waiting", flush=True)
        return snapshot

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        taken = await super().acquire_lease(session_id, version, lease)
        if taken:
            print("lease", flush=True)
        return taken


async def main(argv: list[str]) -> None:
    uri, database, session_id, request_id, *options = argv
    mode, kind = (options + ["call", "text"][len(options) :])[:2]
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def model(request: RecordedRequest) -> ScriptedReply:
        print(f"model {time.time()}", flush=True)
        await stdin.readline()
        if kind == "ticket":
            return ScriptedReply.tool_calls([ScriptedToolCall("ticket", {"number": 7}, id="c1")])
        return ScriptedReply.text("the answer")

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    service = DefaultSessionService(ObservedRepository(client[database]))
    async with ScriptedOpenAIServer(responder=model) as server:
        chat = ChatClient(
            server.client(),
            model="gpt-test",
            sessions=service,
            tools=[Tool.from_function(ticket, return_direct=True)],
        )
        keywords = {"session_id": session_id, "user_id": "alice", "request_id": request_id}
        print("started", flush=True)
        streamed = ""
        if mode == "stream":
            async with chat.stream("question?", **keywords) as stream:
                streamed = "".join([c.text async for c in stream if c.tool_result is not None])
            reply = stream.response
        else:
            reply = await chat.call("question?", **keywords)
    await client.close()
    results = [] if reply.tool_results is None else reply.tool_results.responses
    outcome = {
        "reply": reply.text,
        "finish_reason": reply.finish_reason,
        "results": [[r.id, r.data] for r in results],
        "streamed": streamed,
        "runs": len(runs),
    }
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
