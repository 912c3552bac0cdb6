"""One web process answering one request that ends on a return-direct tool: run by
``test_return_direct_processes.py``.

``python return_direct_worker.py <mongo uri> <database> <openai base url> <request id>
[stream]`` prints ``started``, then one JSON line: the finish reason, the results, the text the
result chunks added up to (streams) and how often this process ran the tool.
"""

from __future__ import annotations

import asyncio
import json
import sys
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
    SessionAdvisors,
    ToolCallingAdvisor,
)
from asyncsession.openai import ChatClient
from asyncsession.tools import Tool

runs: list[int] = []


async def ticket(number: int) -> str:
    """Show a ticket."""
    runs.append(number)
    return f"ticket {number}: open"


async def main(argv: list[str]) -> None:
    uri, database, base_url, request_id, *mode = argv
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    repository = MongoSessionRepository(client[database])
    service = DefaultSessionService(repository)
    async with openai.AsyncOpenAI(base_url=base_url, api_key="t", max_retries=0) as sdk:
        chat = ChatClient(
            sdk,
            model="gpt-test",
            advisors=[
                IdempotentTurnAdvisor(service, leases=repository, wait=60, poll=0.02),
                *SessionAdvisors(service, request_event_id_generator=RequestIdEventIdGenerator()),
                ToolCallingAdvisor([Tool.from_function(ticket, return_direct=True)]),
            ],
        )
        context = {
            SESSION_ID_CONTEXT_KEY: "s1",
            USER_ID_CONTEXT_KEY: "alice",
            REQUEST_ID_CONTEXT_KEY: request_id,
        }
        print("started", flush=True)
        streamed = ""
        if mode == ["stream"]:
            async with chat.stream("Ticket 7?", context=context) as stream:
                streamed = "".join([c.text async for c in stream if c.tool_result is not None])
            reply = stream.response
        else:
            reply = await chat.call("Ticket 7?", context=context)
    await client.close()
    results = [] if reply.tool_results is None else reply.tool_results.responses
    outcome = {
        "finish_reason": reply.finish_reason,
        "results": [[r.id, r.data] for r in results],
        "streamed": streamed,
        "runs": len(runs),
    }
    print(json.dumps(outcome), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
