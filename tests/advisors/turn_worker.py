"""One web process answering one request: run by ``test_turn_leases_processes.py``.

``python turn_worker.py <mongo uri> <database> <session id> <request id>`` builds the chat
client a web app builds (its defaults, no lease settings) over the MongoDB store, with a
scripted model of its own that prints ``model <unix time>`` when it is called and answers once
a line arrives on stdin. The process prints ``started``; ``waiting`` the first time it reads the
session while another attempt holds a live lease on it; ``lease`` each time a lease is taken or
renewed; and, as its last line, the reply as JSON.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from datetime import UTC, datetime
from typing import Any

import openai
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, EventFilter, MongoSessionRepository
from asyncsession.advisors import (
    REQUEST_ID_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.openai import ChatClient
from asyncsession.repository import SessionSnapshot
from asyncsession.testing import RecordedRequest, ScriptedOpenAIServer, ScriptedReply


class ObservedRepository(MongoSessionRepository):
    """The store, saying when this process finds another's live lease and takes or renews
    its own."""

    waited = False

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        snapshot = await super().read_snapshot(session_id, filter)
        lease: Any = getattr(snapshot, "lease", None)
        if not self.waited and lease is not None and lease.expires_at > datetime.now(UTC):
            self.waited = True
            print("waiting", flush=True)
        return snapshot

    async def acquire_lease(self, *args: Any, **kwargs: Any) -> bool:
        taken: bool = await super().acquire_lease(*args, **kwargs)  # type: ignore[misc]
        if taken:
            print("lease", flush=True)
        return taken


async def main(argv: list[str]) -> None:
    uri, database, session_id, request_id = argv
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def model(request: RecordedRequest) -> ScriptedReply:
        print(f"model {time.time()}", flush=True)
        await stdin.readline()
        return ScriptedReply.text("the answer")

    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    service = DefaultSessionService(ObservedRepository(client[database]))
    async with ScriptedOpenAIServer(responder=model) as server:
        sdk = openai.AsyncOpenAI(base_url=server.base_url, api_key="t", max_retries=0)
        chat = ChatClient(
            sdk,
            model="gpt-test",
            advisors=[
                IdempotentTurnAdvisor(service),
                SessionTurnAdvisor(service),
                SessionMemoryAdvisor(
                    service, request_event_id_generator=RequestIdEventIdGenerator()
                ),
            ],
        )
        context = {
            SESSION_ID_CONTEXT_KEY: session_id,
            USER_ID_CONTEXT_KEY: "alice",
            REQUEST_ID_CONTEXT_KEY: request_id,
        }
        print("started", flush=True)
        reply = await chat.call("question?", context=context)
        await sdk.close()
    await client.close()
    print(json.dumps({"reply": reply.text}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
