"""An ADK run killed inside its tool, for ``test_google_adk_tools.py``.

``python adk_crash_script.py <uri> <database>``: on ``AdkSessionService`` over the test server,
the session ``("shop", "u", "s")`` is asked "look up order 9"; the scripted model calls
``lookup``, which prints ``running`` and waits forever (the test kills the process).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from adk_support import ScriptedModel
from google.adk.agents import LlmAgent
from google.adk.runners import Runner
from google.genai import types
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.google_adk import AdkSessionService


async def lookup(order: str) -> dict[str, str]:
    """The status of an order."""
    print("running", flush=True)
    await asyncio.Event().wait()  # killed here
    return {"status": "never"}


async def main(uri: str, database: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    service = AdkSessionService(DefaultSessionService(MongoSessionRepository(client[database])))
    call = types.FunctionCall(id="fc-9", name="lookup", args={"order": "9"})
    model = ScriptedModel(
        model="scripted",
        replies=[types.Content(role="model", parts=[types.Part(function_call=call)])],
        sent=[],
    )
    agent = LlmAgent(name="support", model=model, tools=[lookup])
    await service.create_session(app_name="shop", user_id="u", session_id="s")
    question = types.Content(role="user", parts=[types.Part(text="look up order 9")])
    runner = Runner(app_name="shop", agent=agent, session_service=service)
    async for _ in runner.run_async(user_id="u", session_id="s", new_message=question):
        pass


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:]))
