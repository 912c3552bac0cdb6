"""The turn: one read per call, the owner checked before the model, compaction once the turn is
complete (inline, or by a background compactor)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Self

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, stored, turn

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventType,
    UserMessage,
    tool,
)
from asyncsession.compaction import (
    CompactionRequest,
    CompactionWorker,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.compaction_protocols import TriggerLike
from asyncsession.exceptions import AccessDenied, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def always(request: CompactionRequest) -> bool:
    return True


def turn_client(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService, **options: object
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[lookup],
        **options,  # type: ignore[arg-type]
    )


async def compactions(service: DefaultSessionService) -> int:
    return sum(e.type == EventType.COMPACTION for e in await service.get_events("s"))


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_tool_loop_reads_the_session_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """A two-round tool loop reads the session once; every other call is a commit: the
    question, the round's call (recorded before its tool runs), its result, the reply."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="earlier"))
    repository.reset()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    await ask(turn_client(openai_client, service), "go", streaming=streaming, **turn("s", "alice"))

    assert repository.calls == {"read_snapshot": 1, "append_events": 4}
    assert await stored(service, "s") == [
        "U:earlier",
        "U:go",
        "A[lookup]",
        "T[lookup->value of k]",
        "A:done",
    ]


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_refuses_a_foreign_user_before_the_model_is_called(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Ownership is enforced when the turn reads the session, before anything is written."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))

    with pytest.raises(AccessDenied):
        await ask(
            turn_client(openai_client, service),
            "go",
            streaming=streaming,
            **turn("s", "mallory"),
        )

    assert server.requests == []
    assert await stored(service, "s") == []


async def test_the_turn_needs_a_session_id(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A call without a session id fails before anything is sent."""
    with pytest.raises(UsageError):
        await turn_client(openai_client, service).call("go")


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_quiet_trigger_costs_no_database_command(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """The trigger is asked about the window read plus this turn's events: no extra read."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    repository.reset()
    server.enqueue(ScriptedReply.text("ok"))
    client = turn_client(
        openai_client,
        service,
        compaction=(TurnCountTrigger(5), SlidingWindowCompactionStrategy(2)),
    )

    await ask(client, "go", streaming=streaming, **turn("s"))

    assert repository.calls == {"read_snapshot": 1, "append_events": 2}


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_firing_trigger_compacts_once_the_turn_is_complete(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """More turns than the trigger allows: the completed turn is followed by one compaction."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="u1"))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("a2"),
    )
    client = turn_client(
        openai_client,
        service,
        compaction=(TurnCountTrigger(1), SlidingWindowCompactionStrategy(1)),
    )

    await ask(client, "u2", streaming=streaming, **turn("s"))

    assert await compactions(service) == 1
    active = await service.get_events("s", EventFilter.active())
    assert [e.type.name for e in active] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]


async def test_a_windowed_read_leaves_the_trigger_to_the_service(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """When the read was a window, the call cannot know the active view: the service reads it."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    repository.reset()
    server.enqueue(ScriptedReply.text("ok"))
    client = turn_client(
        openai_client,
        service,
        event_filter=EventFilter.last_n(10),
        compaction=(TurnCountTrigger(5), SlidingWindowCompactionStrategy(2)),
    )

    await client.call("go", **turn("s"))

    assert repository.calls["read_snapshot"] == 2
    assert await compactions(service) == 0  # the service read it, the trigger kept quiet


@dataclass
class Submissions:
    """A stand-in background compactor that records what it was handed."""

    session_ids: list[str] = field(default_factory=list[str])
    trigger: TriggerLike | None = None

    def submit(self, session_id: str) -> None:
        self.session_ids.append(session_id)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        pass


async def test_with_a_worker_the_complete_turn_is_handed_off(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The session id goes to the worker after the turn, not after a round asking for tools."""
    worker = Submissions()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    await turn_client(openai_client, service, compaction=worker).call("go", **turn("s"))

    assert worker.session_ids == ["s"]


async def test_a_quiet_worker_trigger_skips_the_submit(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The worker's own trigger is asked first, on what the call knows."""
    worker = Submissions(trigger=TurnCountTrigger(5))
    server.enqueue(ScriptedReply.text("ok"))

    await turn_client(openai_client, service, compaction=worker).call("go", **turn("s"))

    assert worker.session_ids == []


async def test_a_compaction_worker_compacts_in_the_background(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """With a CompactionWorker, the turn returns and the worker compacts the session."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="u1"))
    server.enqueue(ScriptedReply.text("a2"))

    async with CompactionWorker(service, always, SlidingWindowCompactionStrategy(1)) as worker:
        client = turn_client(openai_client, service, compaction=worker)
        await client.call("u2", **turn("s"))

    active = await service.get_events("s", EventFilter.active())
    assert [e.message.text for e in active if e.message is not None] == ["u2", "a2"]


async def test_a_final_reply_that_asks_for_tools_is_no_complete_turn(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """With no tools offered, a reply with tool calls (the caller's to run) ends the call, and
    triggers no compaction."""
    worker = Submissions()
    client = ChatClient(openai_client, model=MODEL, sessions=service, compaction=worker)
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]))

    response = await client.call("go", **turn("s"))

    assert response.has_tool_calls
    assert worker.session_ids == []
