"""``AgentsSession.close()``, and one session used from another event loop or thread."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message
from pymongo import AsyncMongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, InMemorySessionRepository, MongoSessionRepository
from asyncsession.exceptions import UsageError
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.service import SessionService

USER: Any = {"role": "user", "content": "hello"}


def _agent(*replies: str) -> Agent[Any]:
    return Agent(name="test", model=ScriptedModel([[assistant_message(r)] for r in replies]))


def _run_sync(agent: Agent[Any], text: str, session: AgentsSession) -> Any:
    """``Runner.run_sync`` as a worker thread calls it; then the loop it left open is closed."""
    try:
        return Runner.run_sync(agent, text, session=session)
    finally:
        policy = asyncio.get_event_loop_policy()
        policy.get_event_loop().close()
        policy.set_event_loop(None)


async def test_close_is_idempotent_and_a_call_after_it_is_a_usage_error(
    service: SessionService,
) -> None:
    """Closing twice is fine; every call after closing raises UsageError; the service stays open."""
    session = AgentsSession("closing", service)
    await session.add_items([USER])
    await session.close()
    await session.close()
    for call in (
        session.get_items(),
        session.add_items([USER]),
        session.pop_item(),
        session.clear_session(),
        session.compact(),
    ):
        with pytest.raises(UsageError, match="closed"):
            await call
    again = AgentsSession("closing", service)
    stored: list[Any] = await again.get_items()
    assert [item["content"] for item in stored] == ["hello"]


async def test_async_with_hands_back_the_session_and_closes_it(service: SessionService) -> None:
    """Inside the block the session works; after it, it is closed."""
    async with AgentsSession("block", service) as session:
        await session.add_items([USER])
        assert len(await session.get_items()) == 1
    with pytest.raises(UsageError, match="closed"):
        await session.get_items()


async def test_the_in_memory_store_serves_run_sync_in_another_thread() -> None:
    """Over the in-memory store, Runner.run_sync in a worker thread continues the session."""
    session = AgentsSession("threads", DefaultSessionService(InMemorySessionRepository()))
    agent = _agent("first", "second")
    await Runner.run(agent, "one", session=session)
    result = await asyncio.to_thread(_run_sync, agent, "two", session)
    assert result.final_output == "second"
    stored = await session.get_items()
    assert [item.get("role") for item in stored] == ["user", "assistant", "user", "assistant"]


@pytest.mark.mongodb
async def test_run_sync_in_another_thread_on_mongodb_is_a_usage_error_that_says_what_to_do(
    mongo_service: SessionService,
) -> None:
    """The MongoDB client is bound to its loop: run_sync elsewhere fails at once, writes nothing."""
    session = AgentsSession("threads", mongo_service)
    agent = _agent("first", "second")
    await Runner.run(agent, "one", session=session)
    version = await mongo_service.get_event_version("threads")
    with pytest.raises(UsageError, match="event loop") as caught:
        await asyncio.to_thread(_run_sync, agent, "two", session)
    assert "its own AsyncMongoClient" in str(caught.value)
    assert "different event loop" in str(caught.value.__cause__)
    assert await mongo_service.get_event_version("threads") == version
    assert len(await session.get_items()) == 2  # still works on its own loop


@pytest.mark.mongodb
async def test_a_second_event_loop_on_mongodb_is_a_usage_error_and_a_client_per_loop_works(
    mongo_service: SessionService, mongo_db: AsyncDatabase[dict[str, Any]], mongo_uri: str
) -> None:
    """In a second loop the session fails at once; a client, store and session of its own work."""
    session = AgentsSession("loops", mongo_service)
    await session.add_items([USER])

    async def on_a_second_loop() -> int:
        with pytest.raises(UsageError, match="event loop"):
            await session.get_items()
        own: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(mongo_uri, tz_aware=True)
        try:
            repository = MongoSessionRepository(own[mongo_db.name])
            return len(await AgentsSession("loops", DefaultSessionService(repository)).get_items())
        finally:
            await own.close()

    assert await asyncio.to_thread(asyncio.run, on_a_second_loop()) == 1
