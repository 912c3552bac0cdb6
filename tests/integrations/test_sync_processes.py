"""Plain sync programs as OS processes on the test server: each framework's sync API works on
MongoDB as on the in-memory store, and a sync call inside ``async def`` raises instead of
hanging (``sync_script.py`` holds the programs)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations._loops import START_BOUND
from asyncsession.integrations.langchain import LangChainHistory
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.integrations.pydantic_ai import PydanticAIHistory
from asyncsession.service import SessionService

SCRIPT = Path(__file__).with_name("sync_script.py")
LIMIT = 120.0
"""Seconds a program may take before the test fails (a hang fails it, never the suite)."""


async def run(scenario: str, uri: str, database: str, session_id: str) -> dict[str, Any]:
    """Run one program to its end and return what it printed."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(SCRIPT),
        scenario,
        uri,
        database,
        session_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        out, err = await asyncio.wait_for(process.communicate(), LIMIT)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"{scenario} did not finish within {LIMIT:g} s") from None
    assert process.returncode == 0, err.decode()[-3000:]
    result: dict[str, Any] = json.loads(out.decode().splitlines()[-1])
    return result


async def indexed(mongo_db: AsyncDatabase[dict[str, Any]]) -> SessionService:
    """The test's view of the programs' database, with the indexes made beforehand (as
    ``asyncsession ensure-indexes`` makes them)."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return DefaultSessionService(repository)


async def test_langchain_sync_programs_in_four_processes_at_once(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Four programs, each two ``invoke`` calls and a ``stream`` on a session of its own: every
    turn answered and stored, question and answer, in order."""
    service = await indexed(mongo_db)
    results = await asyncio.gather(
        *(run("langchain", mongo_uri, mongo_db.name, f"s{n}") for n in range(4))
    )
    for n, result in enumerate(results):
        assert result == {"replies": ["a0", "a1", "a2"]}
        history = LangChainHistory(f"s{n}", service, user_id="alice")
        stored = await history.aget_messages()
        assert [(type(m), m.content) for m in stored] == [
            (HumanMessage, "q0"),
            (AIMessage, "a0"),
            (HumanMessage, "q1"),
            (AIMessage, "a1"),
            (HumanMessage, "q2"),
            (AIMessageChunk, "a2"),  # the streamed reply, as LangChain's stream hands it over
        ]


async def test_invoke_inside_async_def_raises_instead_of_hanging(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """On a store the running loop owns, and on the in-memory store, the sync invoke raises our
    UsageError and stores nothing: at once when LangChain reads the history on the loop's own
    thread (a bare model), once the bound has passed when it reads it in a worker thread (a
    prompt first), since the blocked loop cannot serve the call it waits for."""
    result = await run("langchain-in-async-def", mongo_uri, mongo_db.name, "blocked")
    for store in ("mongo", "memory"):
        at_once, bounded = result[f"{store}-bare"], result[f"{store}-prompt"]
        assert at_once["raised"].startswith("UsageError: "), at_once
        assert "this thread runs an event loop" in at_once["raised"]
        assert at_once["seconds"] < START_BOUND
        assert bounded["raised"].startswith("UsageError: "), bounded
        assert "did not start it" in bounded["raised"]
        assert START_BOUND <= bounded["seconds"] < LIMIT
        assert at_once["stored"] is bounded["stored"] is False


async def test_pydantic_ai_run_sync_programs(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Three ``run_sync`` turns storing ``all_messages()`` each time, in three processes at
    once: each session holds its run's messages once, bytes from the tool came back as bytes."""
    service = await indexed(mongo_db)
    results = await asyncio.gather(
        *(run("pydantic-ai", mongo_uri, mongo_db.name, f"p{n}") for n in range(3))
    )
    for n, result in enumerate(results):
        assert result["loaded"] == result["all"]
        assert result["equal"] is True
        assert set(result["returns"]) == {"bytes"}
        stored = await service.get_events(f"p{n}")
        assert len(stored) == result["all"]
        assert len(await PydanticAIHistory(f"p{n}", service).load()) == result["all"]


async def test_adk_sync_runner_run_program(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """``asyncio.run(create_session(...))`` then the sync ``runner.run`` twice (a new loop in a
    new thread each time): both turns stored, the second model call saw the first turn, and a
    state value JSON has no form for is stored as ADK's database service stores it."""
    await indexed(mongo_db)
    result = await run("adk", mongo_uri, mongo_db.name, "trip")
    assert result["replies"] == ["sent 1", "sent 3"]
    assert result["events"] == 4
    assert result["state"] == {"callback": repr(print)}


async def test_agents_run_sync_program(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """``Runner.run_sync`` in the main thread, then in another thread, then ``asyncio.run``
    around a read: one session, both turns."""
    service = await indexed(mongo_db)
    result = await run("agents", mongo_uri, mongo_db.name, "run-sync")
    assert result["outputs"] == ["r0", "r1"]
    assert [item if isinstance(item, str) else item[0]["text"] for item in result["items"]] == [
        "q0",
        "r0",
        "q1",
        "r1",
    ]
    assert len(await AgentsSession("run-sync", service, user_id="alice").get_items()) == 4
