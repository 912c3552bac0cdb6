"""One web process running one chat call whose model calls a tool: run by the process tests of
this directory.

``python tool_worker.py <mongo uri> <database> <request id> <tool> [hold|resume]`` builds a chat
client over the MongoDB store (session ``s1``, lease of 2 s) with a scripted model of its own:
its first request asks for tool ``<tool>`` (call id ``c1``; ``charge`` is not idempotent,
``fetch`` is), every later one answers ``final: <the last tool result>``. The tool prints
``tool <name>`` and returns only once a line arrives on stdin. With ``hold``, the model's
second request prints ``model 2`` and waits for a line too. With ``resume``, the tool needs
approval and the process resumes the session's paused turn, approving call ``c1``, instead of
sending a request. The process prints ``started``
and, last, the outcome as JSON: the reply's text and how often this process ran the tool.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository, Tool
from asyncsession.openai import ChatClient
from asyncsession.testing import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

runs: list[str] = []


async def main(argv: list[str]) -> None:
    uri, database, request_id, tool_name, *options = argv
    loop = asyncio.get_running_loop()
    stdin = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stdin), sys.stdin)

    async def run(item: str) -> str:
        runs.append(item)
        print(f"tool {tool_name}", flush=True)
        await stdin.readline()
        return f"{tool_name}d {item}"

    async def model(request: RecordedRequest) -> ScriptedReply:
        messages = request.messages
        results = [m["content"] for m in messages if m["role"] == "tool"]
        if not any(m.get("tool_calls") for m in messages):
            return ScriptedReply.tool_calls([ScriptedToolCall(tool_name, {"item": "x"}, id="c1")])
        if "hold" in options:
            print("model 2", flush=True)
            await stdin.readline()
        return ScriptedReply.text(f"final: {results[-1]}")

    resume = "resume" in options
    tool = Tool.from_function(
        run, name=tool_name, idempotent=tool_name == "fetch", needs_approval=resume
    )
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    service = DefaultSessionService(MongoSessionRepository(client[database]))
    async with ScriptedOpenAIServer(responder=model) as server:
        chat = ChatClient(
            server.client(), model="gpt-test", sessions=service, tools=[tool], lease_ttl=2.0
        )
        print("started", flush=True)
        if resume:
            reply = await chat.resume("s1", {"c1": True}, user_id="alice")
        else:
            reply = await chat.call(
                f"question of {request_id}", session_id="s1", user_id="alice", request_id=request_id
            )
    await client.close()
    print(json.dumps({"reply": reply.text, "runs": len(runs)}), flush=True)


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
