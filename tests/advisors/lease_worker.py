"""One web process answering one request: run by ``test_turn_lease_processes.py``.

``python lease_worker.py <mongo uri> <database> <openai base url> <session id> <request id>
<lease seconds> <wait seconds> [call|stream]`` prints ``started``; ``refused`` the first time
the lease is refused to it (another attempt holds the request, so it waits); then, as JSON, the
reply text and (on the stream path) the text its chunks carried.
"""

from __future__ import annotations

import asyncio
import json
import sys
from datetime import timedelta
from typing import Any

import openai
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository
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
from asyncsession.repository import Lease


class ObservedRepository(MongoSessionRepository):
    """The store, saying when it first refuses this process the lease."""

    refused = False

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        taken = await super().acquire_lease(session_id, version, lease)
        if not taken and not self.refused:
            self.refused = True
            print("refused", flush=True)
        return taken


async def main(argv: list[str]) -> None:
    uri, database, base_url, session_id, request_id, lease, wait, *rest = argv
    mode = rest[0] if rest else "call"
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    repository = ObservedRepository(client[database])
    service = DefaultSessionService(repository)
    async with openai.AsyncOpenAI(base_url=base_url, api_key="t", max_retries=0) as sdk:
        chat = ChatClient(
            sdk,
            model="gpt-test",
            advisors=[
                IdempotentTurnAdvisor(
                    service,
                    leases=repository,
                    lease_ttl=timedelta(seconds=float(lease)),
                    wait=float(wait),
                ),
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
        streamed: str | None = None
        if mode == "stream":
            async with chat.stream("question?", context=context) as stream:
                streamed = "".join([chunk.text async for chunk in stream])
            reply = stream.response
        else:
            reply = await chat.call("question?", context=context)
    await client.close()
    print(json.dumps({"reply": reply.message.text, "streamed": streamed}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
