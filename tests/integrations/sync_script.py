"""Plain sync programs, one per framework, run as OS processes by ``test_sync_processes.py``.

``python sync_script.py <scenario> <uri> <database> <session id>`` builds its store with
``MongoSessionRepository.from_uri`` (no event loop has used it) and uses the framework's sync
API, as a script or a notebook cell does; it prints one JSON line of what it saw.
"""

from __future__ import annotations

import asyncio
import json
import sys
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any

from asyncsession import DefaultSessionService, InMemorySessionRepository, MongoSessionRepository
from asyncsession.service import SessionService


def _service(uri: str, database: str) -> SessionService:
    return DefaultSessionService(MongoSessionRepository.from_uri(uri, database))


def langchain_invoke(uri: str, database: str, session_id: str) -> dict[str, Any]:
    """RunnableWithMessageHistory's sync invoke and stream, twice and once."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from asyncsession.integrations.langchain import LangChainHistory

    service = _service(uri, database)
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = GenericFakeChatModel(messages=iter([AIMessage(content=f"a{n}") for n in range(3)]))
    chain = RunnableWithMessageHistory(
        prompt | model,
        lambda sid: LangChainHistory(sid, service, user_id="alice"),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": session_id}}
    replies = [chain.invoke({"question": f"q{n}"}, config).content for n in range(2)]
    replies += ["".join(str(c.content) for c in chain.stream({"question": "q2"}, config))]
    return {"replies": replies}


def langchain_invoke_in_async_def(uri: str, database: str, session_id: str) -> dict[str, Any]:
    """The mistake: a sync invoke inside ``async def``, on a store the running loop owns (it
    made the indexes) and on the in-memory store, with a bare model (LangChain reads the history
    on the loop's thread) and with a prompt (it reads it in a worker thread). Each must raise,
    not hang or answer while losing the turn."""
    from langchain_core.language_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from asyncsession.integrations.langchain import LangChainHistory

    async def endpoint(service: SessionService, shape: str) -> dict[str, Any]:
        model = GenericFakeChatModel(messages=iter([AIMessage(content="never")]))
        if shape == "bare":
            chain = RunnableWithMessageHistory(model, lambda sid: LangChainHistory(sid, service))
            question: Any = "hello"
        else:
            prompt = ChatPromptTemplate.from_messages(
                [MessagesPlaceholder("history"), ("human", "{question}")]
            )
            chain = RunnableWithMessageHistory(
                prompt | model,
                lambda sid: LangChainHistory(sid, service),
                input_messages_key="question",
                history_messages_key="history",
            )
            question = {"question": "hello"}
        sid = f"{session_id}-{shape}"
        started = time.monotonic()
        try:
            chain.invoke(question, {"configurable": {"session_id": sid}})
        except Exception as error:
            raised = f"{type(error).__name__}: {error}"
        else:
            raised = ""
        stored = await service.find_by_id(sid) is not None
        return {"raised": raised, "seconds": time.monotonic() - started, "stored": stored}

    async def main() -> dict[str, Any]:
        repository = MongoSessionRepository.from_uri(uri, database)
        await repository.ensure_indexes()
        stores = {
            "mongo": DefaultSessionService(repository),
            "memory": DefaultSessionService(InMemorySessionRepository()),
        }
        outcomes = {
            f"{name}-{shape}": await endpoint(service, shape)
            for name, service in stores.items()
            for shape in ("bare", "prompt")
        }
        await repository.aclose()
        return outcomes

    return asyncio.run(main())


def pydantic_ai_run_sync(uri: str, database: str, session_id: str) -> dict[str, Any]:
    """Agent.run_sync with load_sync and store_sync of all_messages(), three turns."""
    from pydantic_ai import Agent
    from pydantic_ai.models.test import TestModel

    from asyncsession.integrations.pydantic_ai import PydanticAIHistory

    history = PydanticAIHistory(session_id, _service(uri, database), user_id="alice")
    agent = Agent(TestModel(custom_output_text="ok"))

    @agent.tool_plain
    def echo(data: str) -> bytes:
        return data.encode()

    for question in ("one", "two", "three"):
        result = agent.run_sync(question, message_history=history.load_sync())
        history.store_sync(result.all_messages())
    loaded = history.load_sync()
    returns = [part.content for m in loaded for part in m.parts if part.part_kind == "tool-return"]
    return {
        "all": len(result.all_messages()),
        "loaded": len(loaded),
        "equal": loaded == result.all_messages(),
        "returns": [type(value).__name__ for value in returns],
    }


def adk_runner_run(uri: str, database: str, session_id: str) -> dict[str, Any]:
    """asyncio.run(create_session(...)) with a state value JSON has no form for, then the sync
    runner.run twice, as ADK's guides write a script."""
    from adk_support import CountingModel
    from google.adk.agents import LlmAgent
    from google.adk.runners import Runner
    from google.genai import types

    from asyncsession.integrations.google_adk import AdkSessionService

    sessions = AdkSessionService(_service(uri, database))
    asyncio.run(
        sessions.create_session(
            app_name="app", user_id="alice", session_id=session_id, state={"callback": print}
        )
    )
    runner = Runner(
        app_name="app",
        agent=LlmAgent(name="a", model=CountingModel(model="counting")),
        session_service=sessions,
    )
    replies = []
    for question in ("one", "two"):
        message = types.Content(role="user", parts=[types.Part(text=question)])
        for event in runner.run(user_id="alice", session_id=session_id, new_message=message):
            if event.content is not None and event.content.parts:
                replies.append(event.content.parts[0].text)
    stored = asyncio.run(
        sessions.get_session(app_name="app", user_id="alice", session_id=session_id)
    )
    assert stored is not None
    return {"replies": replies, "events": len(stored.events), "state": stored.state}


def agents_run_sync(uri: str, database: str, session_id: str) -> dict[str, Any]:
    """Runner.run_sync in the main thread, then in another thread, then asyncio.run."""
    from agents import Agent, Runner, set_tracing_disabled
    from agents.testing import ScriptedModel, assistant_message

    from asyncsession.integrations.openai_agents import AgentsSession

    set_tracing_disabled(True)
    session = AgentsSession(session_id, _service(uri, database), user_id="alice")
    agent = Agent(name="t", model=ScriptedModel([[assistant_message(f"r{n}")] for n in range(2)]))
    outputs = [Runner.run_sync(agent, "q0", session=session).final_output]

    def in_a_thread() -> None:
        outputs.append(Runner.run_sync(agent, "q1", session=session).final_output)

    thread = threading.Thread(target=in_a_thread)
    thread.start()
    thread.join()
    items = asyncio.run(session.get_items())
    return {"outputs": outputs, "items": [item.get("content") for item in items]}


SCENARIOS: dict[str, Callable[[str, str, str], dict[str, Any]]] = {
    "langchain": langchain_invoke,
    "langchain-in-async-def": langchain_invoke_in_async_def,
    "pydantic-ai": pydantic_ai_run_sync,
    "adk": adk_runner_run,
    "agents": agents_run_sync,
}

if __name__ == "__main__":
    warnings.simplefilter("ignore")  # deprecations of the frameworks' own
    scenario, uri, database, session_id = sys.argv[1:5]
    print(json.dumps(SCENARIOS[scenario](uri, database, session_id)), flush=True)
