"""Agents SDK runs with tools, one step per OS process, for ``test_openai_agents_tools.py``.

``python agents_tools_script.py <step> <api> <store> <target> <session id> [<decision>]``:

- ``store`` is ``sqlite`` (the SDK's own ``SQLiteSession``, the reference; ``target`` a file)
  or ``mongo`` (an ``AgentsSession`` on the test server; ``target`` is ``<uri> <database>``
  joined by a space).
- ``api`` is ``responses`` or ``chat``: the SDK's ``OpenAIResponsesModel`` or
  ``OpenAIChatCompletionsModel``, over the real ``openai`` client, answered by the scripted
  server in this process.

Steps (each prints one JSON line last; the tool's runs are appended to ``$TOOL_RUNS``):

- ``pause``: "refund order 7"; the model calls ``refund``, which needs approval: the run stops
  with an interruption; prints the serialized ``RunState``.
- ``resume``: reads that state from stdin, approves or rejects (``decision``) every pending call,
  runs on; prints the final output and the input of the model request after the decision.
- ``crash``: "look up order 9"; the model calls ``lookup``, which prints ``running`` and then
  waits forever (the test kills the process).
- ``next``: "anything else?"; prints the input the model was sent.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from agents import (
    Agent,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    Runner,
    RunState,
    function_tool,
    set_tracing_disabled,
)
from agents.memory import Session, SQLiteSession
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.testing.openai_server import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

REJECTION = "A person declined this refund."


def _ran(name: str, argument: str) -> None:
    with open(os.environ["TOOL_RUNS"], "a", encoding="utf-8") as runs:
        runs.write(f"{name} {argument}\n")


@function_tool(needs_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves each refund)."""
    _ran("refund", order)
    return f"order {order} refunded"


@function_tool
async def lookup(order: str) -> str:
    """The status of an order."""
    _ran("lookup", order)
    print("running", flush=True)
    await asyncio.Event().wait()  # killed here
    return "never"


def _agent(api: str, server: ScriptedOpenAIServer) -> Agent[Any]:
    client = server.client()
    model = (
        OpenAIResponsesModel(model="gpt-test", openai_client=client)
        if api == "responses"
        else OpenAIChatCompletionsModel(model="gpt-test", openai_client=client)
    )
    return Agent(name="support", model=model, tools=[refund, lookup])


def _sent(server: ScriptedOpenAIServer, api: str) -> list[Any]:
    body = server.requests[-1].body
    return list(body["input"] if api == "responses" else body["messages"])


async def main(step: str, api: str, store: str, target: str, session_id: str, *rest: str) -> None:
    set_tracing_disabled(True)
    client: AsyncMongoClient[dict[str, Any]] | None = None
    session: Session
    if store == "sqlite":
        session = SQLiteSession(session_id, target)
    else:
        uri, database = target.split(" ")
        client = AsyncMongoClient(uri, tz_aware=True)
        session = AgentsSession(
            session_id, DefaultSessionService(MongoSessionRepository(client[database]))
        )
    async with ScriptedOpenAIServer() as server:
        agent = _agent(api, server)
        out: dict[str, Any]
        if step == "pause":
            call = ScriptedToolCall("refund", {"order": "7"}, id="call_refund_7")
            server.enqueue(ScriptedReply.tool_calls([call]))
            result = await Runner.run(agent, "refund order 7", session=session)
            out = {
                "pending": [item.raw_item.call_id for item in result.interruptions],  # type: ignore[union-attr]
                "state": result.to_state().to_string(),
            }
        elif step == "resume":
            server.enqueue(ScriptedReply.text("Done."))
            state = await RunState.from_string(agent, sys.stdin.read())
            for item in state.get_interruptions():
                if rest[0] == "approve":
                    state.approve(item)
                else:
                    state.reject(item, rejection_message=REJECTION)
            result = await Runner.run(agent, state, session=session)
            out = {"final": result.final_output, "sent": _sent(server, api)}
        elif step == "crash":
            call = ScriptedToolCall("lookup", {"order": "9"}, id="call_lookup_9")
            server.enqueue(ScriptedReply.tool_calls([call]))
            await Runner.run(agent, "look up order 9", session=session)
            out = {}  # never reached
        else:
            server.enqueue(ScriptedReply.text("Nothing else."))
            result = await Runner.run(agent, "anything else?", session=session)
            out = {"final": result.final_output, "sent": _sent(server, api)}
        server.assert_done()
    if client is not None:
        await client.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
