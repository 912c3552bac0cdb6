"""The database work of a chat turn, row by row as ``docs/internals/turn.md`` tables it: the
repository calls of each kind of turn, on both stores, and on MongoDB one command per call."""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from chat_support import MODEL, PATHS, ask
from command_counting import counted_repository

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    SessionRepository,
    SystemMessage,
    UserMessage,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

COUNTED = ("read_snapshot", "save_if_absent", "append_events", "find_events", "acquire_lease")


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@dataclass(frozen=True)
class Case:
    """One row: a turn and the repository calls it makes."""

    calls: dict[str, int]
    new_session: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    keywords: dict[str, Any] = field(default_factory=dict)
    tool_round: bool = False
    extra_commands: int = 0
    """MongoDB commands beyond one per call."""


CASES = {
    "existing-session": Case({"read_snapshot": 1, "append_events": 2}),
    "with-reply": Case(
        {"read_snapshot": 1, "append_events": 1}, options={"store_question": "with_reply"}
    ),
    "new-session": Case(
        {"read_snapshot": 1, "save_if_absent": 1, "append_events": 2}, new_session=True
    ),
    "new-session-with-reply": Case(
        {"read_snapshot": 1, "save_if_absent": 1, "append_events": 1},
        new_session=True,
        options={"store_question": "with_reply"},
    ),
    "tool-round": Case({"read_snapshot": 1, "append_events": 3}, tool_round=True),
    "tool-round-with-reply": Case(
        {"read_snapshot": 1, "append_events": 1},
        tool_round=True,
        options={"store_question": "with_reply"},
    ),
    "request-id": Case(
        {"read_snapshot": 1, "acquire_lease": 1, "append_events": 2},
        keywords={"request_id": "r-1"},
    ),
    "request-id-with-reply": Case(
        {"read_snapshot": 1, "acquire_lease": 1, "append_events": 1},
        options={"store_question": "with_reply"},
        keywords={"request_id": "r-1"},
    ),
    "window-without-its-system-message": Case(
        {"read_snapshot": 1, "find_events": 1, "append_events": 2},
        options={"event_filter": EventFilter.last_n(2)},
        # the lookup reads the newest commits, then the older ones the system message is in
        extra_commands=1,
    ),
}


def count_calls(repository: SessionRepository) -> Counter[str]:
    """Count ``repository``'s calls of the kinds a turn makes, per kind, from now on."""
    calls: Counter[str] = Counter()

    def counting(name: str, method: Callable[..., Awaitable[Any]]) -> Callable[..., Any]:
        @functools.wraps(method)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return await method(*args, **kwargs)

        return counted

    for name in COUNTED:
        setattr(repository, name, counting(name, getattr(repository, name)))
    return calls


async def _prepare(
    case: Case, service: DefaultSessionService, server: ScriptedOpenAIServer
) -> None:
    """The session before the case's turn (unless the turn creates it), and its script."""
    if not case.new_session:
        await service.create(CreateSessionRequest(id="s", user_id="alice"))
        await service.append_message("s", SystemMessage(text="Be brief."))
        for n in range(3):
            await service.append_message("s", UserMessage(text=f"question {n}"))
            await service.append_message("s", AssistantMessage(text=f"answer {n}"))
    if case.tool_round:
        server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]))
    server.enqueue(ScriptedReply.text("done"))


async def _run(
    case: Case, service: DefaultSessionService, server: ScriptedOpenAIServer, streaming: bool
) -> None:
    client = ChatClient(
        server.client(), model=MODEL, sessions=service, tools=[lookup], **case.options
    )
    reply = await ask(client, "go", streaming=streaming, session_id="s", **case.keywords)
    assert reply.text == "done"
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("case", [pytest.param(case, id=name) for name, case in CASES.items()])
async def test_the_repository_calls_of_a_turn_in_memory(case: Case, streaming: bool) -> None:
    """Each kind of turn makes the calls its row says, and no other."""
    repository = InMemorySessionRepository()
    service = DefaultSessionService(repository, allow_system_messages=True)
    async with ScriptedOpenAIServer() as server:
        await _prepare(case, service, server)
        calls = count_calls(repository)
        await _run(case, service, server, streaming)
    assert dict(calls) == case.calls


@pytest.mark.mongodb
@pytest.mark.parametrize("case", [pytest.param(case, id=name) for name, case in CASES.items()])
async def test_on_mongodb_each_repository_call_of_a_turn_is_one_command(
    case: Case, mongo_uri: str
) -> None:
    """On MongoDB the same turns make the same calls, each one database command (a lookup of
    an old system message two)."""
    async with (
        counted_repository(mongo_uri) as (repository, counter),
        ScriptedOpenAIServer() as server,
    ):
        service = DefaultSessionService(repository, allow_system_messages=True)
        await _prepare(case, service, server)
        calls = count_calls(repository)
        counter.clear()
        await _run(case, service, server, streaming=False)
        sent = counter.names
    assert dict(calls) == case.calls
    assert len(sent) == sum(case.calls.values()) + case.extra_commands, sent
