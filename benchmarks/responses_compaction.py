"""Commands and bytes of both OpenAI compactions on ``MongoSessionRepository``: one
``ResponsesCompactionStrategy`` pass, and one ``ResponsesClient`` turn whose reply the server
compacted during (``context_management``).

Run ``python benchmarks/responses_compaction.py`` (``--turns N``, default 20, keeping 4 events).
It uses ``MONGODB_URI`` when set, or else starts the test server named by
``ASYNCSESSION_SECANTUSD``; the model is the scripted OpenAI server on loopback. It prints one
Markdown table: database commands, round trips and BSON bytes of each, and the HTTP body bytes
of its model request and reply. Nothing here is timed.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from typing import Any

import httpx2
import openai
from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    MongoSessionRepository,
    UserMessage,
)
from asyncsession.compaction import TurnCountTrigger
from asyncsession.openai import ResponsesClient, ResponsesCompactionStrategy
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

if __package__:
    from ._commands import CommandCounter
    from ._server import bench_uri
else:  # run as a script
    from _commands import CommandCounter  # type: ignore[no-redef]
    from _server import bench_uri  # type: ignore[no-redef]


async def main(turns: int) -> None:
    """Store ``turns`` turns of 400-character messages, compact once, print the figures."""
    uri, stop_server = bench_uri(w="majority", journal="true")
    counter = CommandCounter(count_bytes=True)
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
        uri, tz_aware=True, event_listeners=[counter]
    )
    name = f"bench_{uuid.uuid4().hex[:8]}"
    replies: list[int] = []

    async def count_reply(response: Any) -> None:
        replies.append(len(await response.aread()))

    try:
        repository = MongoSessionRepository(client[name])
        await repository.ensure_indexes()
        service = DefaultSessionService(repository)
        sessions: list[str] = []
        for _ in range(2):
            session = await service.create(CreateSessionRequest(user_id="bench"))
            sessions.append(session.id)
            for n in range(turns):
                await service.append_message(session.id, UserMessage(text=f"{n} " + "q" * 400))
                await service.append_message(session.id, AssistantMessage(text=f"{n} " + "a" * 400))
        async with ScriptedOpenAIServer(
            [ScriptedReply.text(""), ScriptedReply.text("ok")]
        ) as model:
            http = httpx2.AsyncClient(
                transport=model.transport, event_hooks={"response": [count_reply]}
            )
            openai_client = openai.AsyncOpenAI(
                base_url=model.base_url, api_key="bench", http_client=http
            )
            strategy = ResponsesCompactionStrategy(
                openai_client, model="scripted-model", max_events_to_keep=4
            )
            with counter.measure() as seen:
                result = await service.compact(sessions[0], TurnCountTrigger(1), strategy)
            chat = ResponsesClient(
                openai_client,
                model="scripted-model",
                sessions=service,
                context_management=[{"type": "compaction", "compact_threshold": 1000}],
            )
            with counter.measure() as turn:
                await chat.call("next " + "q" * 400, session_id=sessions[1])
            sent = [len(request.raw_body) for request in model.requests]
            await openai_client.close()
    finally:
        await client.drop_database(name)
        await client.close()
        stop_server()
    print(f"{turns} turns of 400-character messages; {result.archived_event_count} archived.\n")
    print(
        "| Pass | Commands | Round trips | KiB sent | KiB received | HTTP KiB out | HTTP KiB in |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = [("responses.compact pass", seen), ("turn compacted by the server", turn)]
    for (label, measured), out, got in zip(rows, sent, replies, strict=True):
        print(
            f"| {label} | {measured.commands} | {measured.round_trips} "
            f"| {measured.bytes_sent / 1024:.1f} | {measured.bytes_received / 1024:.1f} "
            f"| {out / 1024:.1f} | {got / 1024:.1f} |"
        )


if __name__ == "__main__":
    arguments = sys.argv[1:]
    asyncio.run(
        main(int(arguments[arguments.index("--turns") + 1]) if "--turns" in arguments else 20)
    )
