"""Sync callers and other event loops: every adapter call runs on the loop its store belongs
to, and no call hangs.

The plain-script claims (a sync program, ``run_sync``, ADK's ``runner.run``) are proven again
with OS processes in ``test_sync_processes.py``; here they run in the test process, on both
stores, with threads and loops of the test's making.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from adk_support import CountingModel
from agents import Agent as SdkAgent
from agents import Runner
from agents.testing import ScriptedModel, assistant_message
from google.adk.agents import LlmAgent
from google.adk.runners import Runner as AdkRunner
from google.genai import types
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from pydantic_ai import Agent, ModelRequest
from pydantic_ai.models.test import TestModel
from pymongo import AsyncMongoClient

from asyncsession import DefaultSessionService, MongoSessionRepository, SessionEvent
from asyncsession.exceptions import UsageError
from asyncsession.integrations._loops import START_BOUND
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.integrations.langchain import LangChainHistory
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.integrations.pydantic_ai import PydanticAIHistory
from asyncsession.repository import Lease
from asyncsession.service import SessionService

USER: Any = {"role": "user", "content": "hello"}


def close_this_threads_loop() -> None:
    """Close the loop ``run_sync`` left set for this thread (Agents and Pydantic AI keep it for
    their next call), so the test leaves no loop open."""
    policy = asyncio.get_event_loop_policy()
    policy.get_event_loop().close()
    policy.set_event_loop(None)


def run_sync_in_a_thread(agent: SdkAgent[Any], text: str, session: AgentsSession) -> Any:
    """``Runner.run_sync`` as a worker thread calls it; then the loop it left open is closed."""
    try:
        return Runner.run_sync(agent, text, session=session)
    finally:
        close_this_threads_loop()


def ask(text: str) -> types.Content:
    return types.Content(role="user", parts=[types.Part(text=text)])


# --- sync callers without a loop -----------------------------------------------------------------


def test_sync_methods_with_no_loop_anywhere(sync_service: SessionService) -> None:
    """A plain sync program: LangChain's and Pydantic AI's sync methods store and read on both
    stores (a MongoDB store no loop has used runs on the adapters' own loop)."""
    history = LangChainHistory("plain", sync_service, user_id="alice")
    history.add_user_message("hi")
    history.add_ai_message("yo")
    assert history.messages == [HumanMessage(content="hi"), AIMessage(content="yo")]
    assert str(history) == "Human: hi\nAI: yo"
    history.clear()
    assert history.messages == []
    pydantic = PydanticAIHistory("plain-pa", sync_service, user_id="alice")
    agent = Agent(TestModel(custom_output_text="ok"))
    for question in ("one", "two", "three"):
        result = agent.run_sync(question, message_history=pydantic.load_sync())
        pydantic.store_sync(result.all_messages())
    close_this_threads_loop()
    assert pydantic.load_sync() == result.all_messages()
    assert len(result.all_messages()) == 6


def test_one_loop_per_call_reaches_one_store(sync_service: SessionService) -> None:
    """``asyncio.run`` around single adapter calls (a new loop each time) works on both stores:
    over MongoDB every call runs on the loop the first one gave the store."""
    history = PydanticAIHistory("runs", sync_service)
    session = AgentsSession("runs", sync_service)
    for n in range(3):
        asyncio.run(history.store([ModelRequest.user_text_prompt(f"q{n}")]))
        asyncio.run(session.add_items([{"role": "user", "content": f"q{n}"}]))
    assert len(asyncio.run(history.load())) == 6
    assert len(asyncio.run(session.get_items())) == 6


def test_run_sync_in_any_thread_continues_one_session(sync_service: SessionService) -> None:
    """Runner.run_sync in the main thread, then in four worker threads at once, then again in
    the main thread: one session, every turn stored, on both stores."""
    session = AgentsSession("run-sync", sync_service, user_id="alice")
    agent = SdkAgent(
        name="t", model=ScriptedModel([[assistant_message(f"r{n}")] for n in range(6)])
    )
    assert run_sync_in_a_thread(agent, "q0", session).final_output == "r0"
    threads = [
        threading.Thread(target=run_sync_in_a_thread, args=(agent, f"q{n}", session))
        for n in range(1, 5)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert run_sync_in_a_thread(agent, "q5", session).final_output == "r5"
    items = asyncio.run(session.get_items())
    assert sorted(i["content"] for i in items if i.get("role") == "user") == [
        f"q{n}" for n in range(6)
    ]
    assert len(items) == 12


def test_adk_sync_runner_run(sync_service: SessionService) -> None:
    """ADK's sync ``runner.run`` (a new loop in a new thread per run) after an
    ``asyncio.run(create_session(...))``, as ADK's guides write it: both turns are stored and
    the second model call sees the first turn."""
    sessions = AdkSessionService(sync_service)
    asyncio.run(sessions.create_session(app_name="app", user_id="alice", session_id="s"))
    runner = AdkRunner(
        app_name="app",
        agent=LlmAgent(name="a", model=CountingModel(model="counting")),
        session_service=sessions,
    )
    replies = [
        event.content.parts[0].text
        for question in ("one", "two")
        for event in runner.run(user_id="alice", session_id="s", new_message=ask(question))
        if event.content is not None and event.content.parts
    ]
    assert replies == ["sent 1", "sent 3"]
    stored = asyncio.run(sessions.get_session(app_name="app", user_id="alice", session_id="s"))
    assert stored is not None
    assert len(stored.events) == 4


def test_a_store_whose_loop_has_ended_is_a_usage_error_that_says_why(mongo_uri: str) -> None:
    """A client first used by an ``asyncio.run`` that has returned belongs to a closed loop: the
    adapters say so in our words instead of PyMongo's."""

    def refused() -> None:
        repository = MongoSessionRepository.from_uri(mongo_uri, "ended")
        asyncio.run(repository.ensure_indexes())
        history = LangChainHistory("ended", DefaultSessionService(repository))
        with pytest.raises(UsageError, match="ended"):
            _ = history.messages
        with pytest.raises(UsageError, match="ended"):
            asyncio.run(history.aget_messages())

    with warnings.catch_warnings():
        # The client's sockets belong to the loop that ended: nothing can close them any more,
        # which is the mistake under test; collect them here, quietly.
        warnings.simplefilter("ignore", ResourceWarning)
        refused()
        gc.collect()


@pytest.mark.filterwarnings("ignore::langchain_core._api.deprecation.LangChainDeprecationWarning")
async def test_an_apps_loop_keeps_a_store_the_frameworks_use_first(mongo_uri: str) -> None:
    """In an app's loop (this test's), a store no loop has used yet goes to that loop even when
    the framework makes the first call in a task of its own (LangChain gathers the history read,
    the Agents SDK streams in a background task): the app's own calls on the store work after."""
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
    name = f"t_{uuid.uuid4().hex[:16]}"
    try:
        service = DefaultSessionService(MongoSessionRepository(client[name]))
        chain = RunnableWithMessageHistory(
            RunnableLambda(lambda messages: f"{len(messages)} messages"),
            lambda session_id: LangChainHistory(session_id, service),
        )
        config: RunnableConfig = {"configurable": {"session_id": "app"}}
        assert await chain.ainvoke([HumanMessage(content="hi")], config) == "1 messages"
        session = AgentsSession("streamed", service)
        agent = SdkAgent(name="t", model=ScriptedModel([[assistant_message("streamed")]]))
        streamed = Runner.run_streamed(agent, "q", session=session)
        async for _ in streamed.stream_events():
            pass
        assert len(await service.get_events("app")) == 2  # the app's own call, on its loop
        assert len(await service.get_events("streamed")) == 2
    finally:
        await client.drop_database(name)
        await client.close()


# --- sync callers beside a running loop ----------------------------------------------------------


async def test_sync_methods_on_a_loops_thread_refuse_at_once(service: SessionService) -> None:
    """Called on the thread that runs the loop, every sync path raises UsageError at once
    (the message names this thread's loop, not a wait that timed out) and writes nothing."""
    history = LangChainHistory("on-loop", service)
    pydantic = PydanticAIHistory("on-loop", service)
    calls: list[Callable[[], object]] = [
        lambda: history.messages,
        lambda: history.add_messages([HumanMessage(content="x")]),
        lambda: history.add_message(HumanMessage(content="x")),
        lambda: history.add_user_message("x"),
        lambda: history.add_ai_message("x"),
        history.clear,
        lambda: str(history),
        pydantic.load_sync,
        lambda: pydantic.store_sync([ModelRequest.user_text_prompt("x")]),
    ]
    for call in calls:
        with pytest.raises(UsageError, match="this thread runs an event loop"):
            call()
    assert await service.find_by_id("on-loop") is None


async def test_sync_methods_from_threads_beside_the_loop(service: SessionService) -> None:
    """Eight threads beside the running loop add and read at once: over MongoDB each call is
    handed to the test's loop, which the client belongs to; every batch is stored once, whole."""
    history = LangChainHistory("beside", service)

    def add(n: int) -> int:
        history.add_messages([HumanMessage(content=f"q{n}"), AIMessage(content=f"a{n}")])
        return len(history.messages)

    counts = await asyncio.gather(*(asyncio.to_thread(add, n) for n in range(8)))
    assert max(counts) == 16
    stored = await history.aget_messages()
    pairs = [(stored[k].content, stored[k + 1].content) for k in range(0, 16, 2)]
    assert sorted(pairs) == sorted((f"q{n}", f"a{n}") for n in range(8))


@pytest.mark.mongodb
async def test_a_sync_call_waiting_on_a_blocked_loop_is_refused_after_the_bound(
    mongo_service: SessionService,
) -> None:
    """The store's loop (the test's) is blocked while a worker thread's sync call waits for it:
    after START_BOUND seconds the call is abandoned, never started, and raises UsageError."""
    history = LangChainHistory("blocked", mongo_service)
    caught: list[BaseException] = []

    def worker() -> None:
        try:
            history.add_messages([HumanMessage(content="never")])
        except UsageError as error:
            caught.append(error)

    thread = threading.Thread(target=worker)
    started = time.monotonic()
    thread.start()
    thread.join()  # blocks the loop: the call cannot start
    assert time.monotonic() - started >= START_BOUND
    assert len(caught) == 1
    assert "did not start it" in str(caught[0])
    assert await mongo_service.find_by_id("blocked") is None


@pytest.mark.mongodb
async def test_an_async_call_from_another_loop_waiting_on_a_blocked_loop_is_refused(
    mongo_service: SessionService,
) -> None:
    """The same for an async call on another loop in another thread: it is refused after the
    bound, and its write never starts."""
    session = AgentsSession("blocked", mongo_service)
    caught: list[BaseException] = []

    def worker() -> None:
        try:
            asyncio.run(session.add_items([USER]))
        except UsageError as error:
            caught.append(error)

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert len(caught) == 1
    assert "did not start it" in str(caught[0])
    assert await mongo_service.find_by_id("blocked") is None


# --- async callers on another loop ---------------------------------------------------------------


async def test_every_adapter_serves_a_caller_on_another_loop(service: SessionService) -> None:
    """Each adapter's async calls made on a second loop in another thread (asyncio.run there)
    reach the same sessions as calls on the test's loop, on both stores."""
    history = LangChainHistory("elsewhere", service)
    pydantic = PydanticAIHistory("elsewhere-pa", service)
    session = AgentsSession("elsewhere-ag", service)
    adk = AdkSessionService(service)

    async def elsewhere() -> None:
        await history.aadd_messages([HumanMessage(content="q")])
        await pydantic.store([ModelRequest.user_text_prompt("q")])
        await session.add_items([USER, {"role": "user", "content": "again"}])
        assert await session.pop_item() == {"role": "user", "content": "again"}
        created = await adk.create_session(app_name="app", user_id="u", session_id="s")
        await adk.append_event(created, SdkEvent.user("q"))

    await asyncio.to_thread(asyncio.run, elsewhere())
    assert await history.aget_messages() == [HumanMessage(content="q")]
    assert len(await pydantic.load()) == 1
    assert await session.get_items() == [USER]
    found = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert found is not None
    assert len(found.events) == 1


class SdkEvent:
    """ADK events for the tests."""

    @staticmethod
    def user(text: str) -> Any:
        from google.adk.events.event import Event

        return Event(author="user", content=ask(text))


class GatedService(DefaultSessionService):
    """A service whose appends wait at a gate (an event of the store's loop) and report (on the
    store of ``service``, a `DefaultSessionService`)."""

    def __init__(self, service: SessionService) -> None:
        assert isinstance(service, DefaultSessionService)
        super().__init__(service.repository)
        self.gate = asyncio.Event()
        self.entered = threading.Event()
        self.written = threading.Event()

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        self.entered.set()
        await self.gate.wait()
        done = await super().append_events(session_id, events, expected_version, lease=lease)
        self.written.set()
        return done


@pytest.mark.mongodb
async def test_a_cancelled_caller_on_another_loop_waits_for_its_write(
    mongo_service: SessionService,
) -> None:
    """A write handed to the store's loop that has started runs to its end before the caller,
    cancelled on its own loop, sees the cancellation: it never leaves a write in progress."""
    gated = GatedService(mongo_service)
    history = LangChainHistory("gated", gated)
    cancelled = threading.Event()

    async def caller() -> bool:
        write = asyncio.create_task(history.aadd_messages([HumanMessage(content="x")]))
        await asyncio.to_thread(gated.entered.wait)
        write.cancel()
        cancelled.set()
        with pytest.raises(asyncio.CancelledError):
            await write
        return gated.written.is_set()

    outcome = asyncio.create_task(asyncio.to_thread(asyncio.run, caller()))
    await asyncio.to_thread(cancelled.wait)
    gated.gate.set()
    assert await outcome is True
    assert await history.aget_messages() == [HumanMessage(content="x")]
