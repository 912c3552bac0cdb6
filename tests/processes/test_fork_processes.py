"""Forks and rewinds from four OS processes against one store, and a forking process killed
with SIGKILL: what holds without in-process locks."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from typing import Any

from process_support import SCRIPT, Writer, ask_all

from asyncsession import CreateSessionRequest, DefaultSessionService, EventFilter, UserMessage
from asyncsession.events import EventType


async def test_forks_taken_while_other_processes_append_see_exactly_their_prefix(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Three processes append 60 events each, two a commit, while a fourth takes 30 forks:
    each fork reads exactly the parent's first events up to the version it was made at."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    appenders, forker = writers[:-1], writers[-1]
    commands: list[dict[str, Any]] = [
        {"op": "stream", "sid": session.id, "prefix": f"w{i}", "count": 60, "chunk": 2}
        for i in range(len(appenders))
    ]
    answers = await ask_all(
        [*appenders, forker], [*commands, {"op": "forks", "sid": session.id, "count": 30}]
    )
    log = [e.id for e in await service.get_events(session.id)]
    assert len(log) == 180
    forks = answers[-1]["forks"]
    assert len({fork_id for fork_id, _ in forks}) == 30
    for fork_id, version in forks:
        mine = [e.id for e in await service.get_events(fork_id)]
        assert mine == log[: 2 * version]
        assert await service.get_event_version(fork_id) == version
    assert len(await service.repository.find_forks(session.id)) == 30


async def test_rewinds_from_one_process_while_others_append_keep_one_log(
    service: DefaultSessionService, writers: list[Writer]
) -> None:
    """Three processes append while a fourth rewinds to version 1 twenty times: every event is
    stored once, each rewind is one commit at the version it read, and the active view is the
    first event and what came after the newest rewind."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    first = await service.append_message(session.id, _user("base"))
    appenders, rewinder = writers[:-1], writers[-1]
    commands: list[dict[str, Any]] = [
        {"op": "stream", "sid": session.id, "prefix": f"w{i}", "count": 40, "chunk": 1}
        for i in range(len(appenders))
    ]
    answers = await ask_all(
        [*appenders, rewinder],
        [*commands, {"op": "rewinds", "sid": session.id, "to": 1, "count": 20}],
    )
    log = await service.get_events(session.id)
    messages = [e for e in log if e.is_message]
    assert len(messages) == 1 + 40 * len(appenders)
    assert len({e.id for e in messages}) == len(messages)
    rewinds = [i for i, e in enumerate(log) if e.type == EventType.REWIND]
    assert len(rewinds) == 20
    assert await service.get_event_version(session.id) == len(log)
    assert sorted(answers[-1]["from"]) == [rewinds[k] for k in range(20)]
    newest = rewinds[-1]
    active = await service.get_events(session.id, EventFilter.active())
    assert [e.id for e in active] == [first.id, *(e.id for e in log[newest + 1 :])]


async def test_a_forking_process_killed_leaves_whole_forks_that_outlive_their_parent(
    mongo_uri: str, service: DefaultSessionService
) -> None:
    """A process forks a session over and over and is killed with SIGKILL: every fork it made
    reads the whole prefix, and still does after the parent is deleted; deleting the forks then
    removes the parent for good."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for i in range(10):
        await service.append_message(session.id, _user(f"m{i}"))
    database = service.repository._database.name  # type: ignore[attr-defined]
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(SCRIPT), mongo_uri, database,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )  # fmt: skip
    writer = Writer(process)
    assert process.stdin is not None
    assert process.stdout is not None
    try:
        async with asyncio.timeout(60):
            assert json.loads(await process.stdout.readline()) == {"ready": True}
        process.stdin.write(json.dumps({"op": "fork_forever", "sid": session.id}).encode() + b"\n")
        async with asyncio.timeout(60):
            for _ in range(5):
                assert "fork" in json.loads(await process.stdout.readline())
    finally:
        process.send_signal(signal.SIGKILL)
        await writer.process.wait()
    forks = await service.repository.find_forks(session.id)
    assert len(forks) >= 5
    log = [e.id for e in await service.get_events(session.id)]
    for fork in forks:
        assert [e.id for e in await service.get_events(fork.id)] == log
    await service.delete(session.id)
    assert await service.find_by_id(session.id) is None
    for fork in forks:
        assert [e.id for e in await service.get_events(fork.id)] == log
        await service.delete(fork.id)
    assert await service.repository.save_if_absent(session.model_copy())
    assert await service.get_events(session.id) == []


def _user(text: str) -> UserMessage:
    return UserMessage(text=text)
