"""``AgentsSession.close()``, and one session used from another event loop or thread."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

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


async def test_run_sync_in_another_thread_continues_the_session(service: SessionService) -> None:
    """Runner.run_sync in a worker thread (its own loop) continues the session on both stores:
    over MongoDB the call is handed to the loop the client belongs to (this test's)."""
    session = AgentsSession("threads", service)
    agent = _agent("first", "second")
    await Runner.run(agent, "one", session=session)
    result = await asyncio.to_thread(_run_sync, agent, "two", session)
    assert result.final_output == "second"
    stored = await session.get_items()
    assert [item.get("role") for item in stored] == ["user", "assistant", "user", "assistant"]


async def test_a_second_event_loop_uses_the_same_session(service: SessionService) -> None:
    """A call from a second loop in another thread (asyncio.run there) reads and writes the
    session like a call on the store's own loop."""
    session = AgentsSession("loops", service)
    await session.add_items([USER])

    async def on_a_second_loop() -> int:
        await session.add_items([{"role": "user", "content": "again"}])
        return len(await session.get_items())

    assert await asyncio.to_thread(asyncio.run, on_a_second_loop()) == 2
    assert [item["content"] for item in await session.get_items()] == ["hello", "again"]
