"""SessionTurnAdvisor: one resolve per call shared with the memory advisor; compaction per turn."""

from __future__ import annotations

from dataclasses import dataclass, field

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, context, stored

from asyncsession import CreateSessionRequest, DefaultSessionService, EventFilter, UserMessage
from asyncsession.advisors import (
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.compaction import (
    CompactionRequest,
    CompactionWorker,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.exceptions import AccessDenied, MissingSessionId, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def always(request: CompactionRequest) -> bool:
    return True


def turn_client(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    turn: SessionTurnAdvisor,
    *,
    memory: SessionMemoryAdvisor | None = None,
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[turn, ToolCallingAdvisor([lookup]), memory or SessionMemoryAdvisor(service)],
    )


async def test_trigger_and_strategy_must_be_set_together(service: DefaultSessionService) -> None:
    """Only one of compaction trigger and strategy is a usage error."""
    with pytest.raises(UsageError, match="together"):
        SessionTurnAdvisor(service, compaction_strategy=SlidingWindowCompactionStrategy())


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_resolves_the_session_once_and_the_memory_advisor_reuses_the_read(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """A two-round tool loop reads the session once; every other command is an append."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="earlier"))
    repository.reset()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    await ask(
        turn_client(openai_client, service, SessionTurnAdvisor(service)),
        "go",
        streaming=streaming,
        context=context("s", "alice"),
    )

    assert repository.calls == {
        "read_snapshot": 1,
        "append_events": 1,
        "append_event": 3,
    }


async def test_a_memory_advisor_of_another_service_resolves_the_session_itself(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """Only a memory advisor on the turn's own service shares its read; another reads again."""
    other = DefaultSessionService(repository, allow_system_messages=True)
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    repository.reset()
    server.enqueue(ScriptedReply.text("ok"))
    client = turn_client(
        openai_client, service, SessionTurnAdvisor(service), memory=SessionMemoryAdvisor(other)
    )

    await client.call("go", context=context("s"))

    assert repository.calls["find_by_id"] == 1  # the turn: session only
    assert repository.calls["read_snapshot"] == 1  # the memory advisor: its own resolve


async def test_without_a_memory_advisor_the_turn_reads_only_the_session(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """A turn advisor alone finds or creates the session and reads no events."""
    server.enqueue(ScriptedReply.text("ok"))
    client = ChatClient(openai_client, model=MODEL, advisors=[SessionTurnAdvisor(service)])

    await client.call("go", context=context("s", "bob"))

    assert repository.calls == {"find_by_id": 1, "save_if_absent": 1}
    session = await service.find_by_id("s")
    assert session is not None
    assert session.user_id == "bob"


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_refuses_a_foreign_user_before_the_model_is_called(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Ownership is enforced when the turn resolves the session."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))

    with pytest.raises(AccessDenied):
        await ask(
            turn_client(openai_client, service, SessionTurnAdvisor(service)),
            "go",
            streaming=streaming,
            context=context("s", "mallory"),
        )

    assert server.requests == []
    assert await stored(service, "s") == []


async def test_the_turn_needs_a_session_id(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A call without a session id fails at the turn advisor."""
    with pytest.raises(MissingSessionId):
        await turn_client(openai_client, service, SessionTurnAdvisor(service)).call("go")


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
    turn = SessionTurnAdvisor(
        service,
        compaction_trigger=TurnCountTrigger(5),
        compaction_strategy=SlidingWindowCompactionStrategy(2),
    )

    await ask(
        turn_client(openai_client, service, turn), "go", streaming=streaming, context=context("s")
    )

    assert repository.calls == {
        "read_snapshot": 1,
        "append_events": 1,
        "append_event": 1,
    }


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
    turn = SessionTurnAdvisor(
        service,
        compaction_trigger=TurnCountTrigger(1),
        compaction_strategy=SlidingWindowCompactionStrategy(1),
    )

    await ask(
        turn_client(openai_client, service, turn), "u2", streaming=streaming, context=context("s")
    )

    assert repository.calls["compaction"] == 1
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
    turn = SessionTurnAdvisor(
        service,
        compaction_trigger=TurnCountTrigger(5),
        compaction_strategy=SlidingWindowCompactionStrategy(2),
    )
    memory = SessionMemoryAdvisor(service, event_filter=EventFilter.last_n(10))

    await turn_client(openai_client, service, turn, memory=memory).call("go", context=context("s"))

    assert repository.calls["read_snapshot"] == 2
    assert "compaction" not in repository.calls  # the service read it, the trigger kept quiet


@dataclass
class Submissions:
    """A stand-in worker that records what it was handed."""

    session_ids: list[str] = field(default_factory=list[str])

    def submit(self, session_id: str) -> None:
        self.session_ids.append(session_id)


async def test_with_a_worker_the_complete_turn_is_handed_off(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The session id goes to the worker after the turn, not after a round asking for tools."""
    worker = Submissions()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    await turn_client(openai_client, service, SessionTurnAdvisor(service, worker=worker)).call(
        "go", context=context("s")
    )

    assert worker.session_ids == ["s"]


async def test_a_quiet_worker_trigger_skips_the_submit(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The worker's own trigger is asked first, on what the call knows."""
    worker = Submissions()
    worker.trigger = TurnCountTrigger(5)  # type: ignore[attr-defined]  # a worker's trigger
    server.enqueue(ScriptedReply.text("ok"))

    await turn_client(openai_client, service, SessionTurnAdvisor(service, worker=worker)).call(
        "go", context=context("s")
    )

    assert worker.session_ids == []


async def test_a_compaction_worker_compacts_in_the_background(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """With a CompactionWorker, the turn returns and the worker compacts the session."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="u1"))
    server.enqueue(ScriptedReply.text("a2"))

    async with CompactionWorker(service, always, SlidingWindowCompactionStrategy(1)) as worker:
        client = turn_client(openai_client, service, SessionTurnAdvisor(service, worker=worker))
        await client.call("u2", context=context("s"))

    active = await service.get_events("s", EventFilter.active())
    assert [e.message.text for e in active if e.message is not None] == ["u2", "a2"]


async def test_a_final_reply_that_asks_for_tools_is_no_complete_turn(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Without a tool loop, a reply with tool calls (client-side tools) triggers no compaction."""
    worker = Submissions()
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[SessionTurnAdvisor(service, worker=worker), SessionMemoryAdvisor(service)],
    )
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]))

    response = await client.call("go", context=context("s"))

    assert response.has_tool_calls
    assert worker.session_ids == []
