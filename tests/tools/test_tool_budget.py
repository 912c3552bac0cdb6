"""The database work of tool rounds and approvals (issue 44's targets, pinned): a tool round adds
its own two writes (the call before the tool runs, the result after) and nothing else; an
approval pause adds one command, the resume's claim on the turn (``acquire_lease``), beyond the
read every call makes. In memory as repository calls, on MongoDB as commands (one per call)."""

from __future__ import annotations

import sys
from collections.abc import Awaitable
from pathlib import Path

import pytest
from chat_support import MODEL
from command_counting import counted_repository

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    SessionRepository,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

sys.path.insert(0, str(Path(__file__).parents[1] / "advisors"))
from test_turn_budget import COUNTED, count_calls  # the turn's budget tests' counter


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    return f"paid {amount}"


def _round(name: str, n: int) -> ScriptedReply:
    arguments = {"key": "k"} if name == "lookup" else {"amount": 5}
    return ScriptedReply.tool_calls([ScriptedToolCall(name, arguments, id=f"{name}-{n}")])


async def _measured(
    repository: SessionRepository, action: Awaitable[object], commands: list[object] | None
) -> tuple[dict[str, int], int]:
    """The repository calls ``action`` makes, and the MongoDB commands it sends (if counted)."""
    sent = 0 if commands is None else len(commands)
    calls = count_calls(repository)
    await action
    for name in COUNTED:
        delattr(repository, name)  # the instance's counting wrapper: the class's method again
    return dict(calls), (0 if commands is None else len(commands) - sent)


async def _turns(
    repository: SessionRepository, commands: list[object] | None = None
) -> dict[str, tuple[dict[str, int], int]]:
    """The repository calls (and commands) of each kind of turn on an existing session."""
    service = DefaultSessionService(repository)
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    counted: dict[str, tuple[dict[str, int], int]] = {}
    async with ScriptedOpenAIServer() as server:
        client = ChatClient(server.client(), model=MODEL, sessions=service, tools=[lookup, pay])
        for rounds in (0, 1, 2):
            server.enqueue(*(_round("lookup", n) for n in range(rounds)), ScriptedReply.text("ok"))
            call = client.call("go", session_id="s")
            counted[f"{rounds} rounds"] = await _measured(repository, call, commands)
        server.enqueue(_round("pay", 0))
        pause = client.call("pay", session_id="s")
        counted["pause"] = await _measured(repository, pause, commands)
        server.enqueue(ScriptedReply.text("paid"))
        resume = client.resume("s", {"pay-0": True})
        counted["resume"] = await _measured(repository, resume, commands)
        server.assert_done()
    return counted


EXPECTED = {
    "0 rounds": {"read_snapshot": 1, "append_events": 2},
    "1 rounds": {"read_snapshot": 1, "append_events": 4},
    "2 rounds": {"read_snapshot": 1, "append_events": 6},
    "pause": {"read_snapshot": 1, "append_events": 2},
    "resume": {"read_snapshot": 1, "acquire_lease": 1, "append_events": 2},
}


async def test_tool_rounds_and_approvals_in_memory() -> None:
    """Each round adds two appends; a pause is the turn up to its round's call; a resume
    reads, claims the turn, stores the results and the reply."""
    counted = await _turns(InMemorySessionRepository())
    assert {name: calls for name, (calls, _) in counted.items()} == EXPECTED


@pytest.mark.mongodb
async def test_on_mongodb_each_is_one_command(mongo_uri: str) -> None:
    """The same turns on MongoDB: the same calls, one command each."""
    async with counted_repository(mongo_uri) as (repository, counter):
        await repository.ensure_indexes()
        counted = await _turns(repository, counter.sent)  # type: ignore[arg-type]
    assert {name: calls for name, (calls, _) in counted.items()} == EXPECTED
    for name, (calls, commands) in counted.items():
        assert commands == sum(calls.values()), name
