"""SessionAdvisors: the turn and memory advisors of one service, configured in one call."""

from __future__ import annotations

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, context

from asyncsession import CreateSessionRequest, DefaultSessionService, EventFilter, UserMessage
from asyncsession.advisors import (
    SESSION_MEMORY_ORDER,
    SESSION_TURN_ORDER,
    SessionAdvisors,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.advisors.base import (
    AUTO_MEMORY_ORDER,
    IDEMPOTENCY_ORDER,
    RECALL_ORDER,
    TELEMETRY_ORDER,
    TOOL_LOOP_ORDER,
    runs_tool_calls,
)
from asyncsession.compaction import (
    CompactionWorker,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.exceptions import UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def test_it_gives_the_turn_advisor_then_the_memory_advisor_on_one_service(
    service: DefaultSessionService,
) -> None:
    """Iterating gives both advisors, turn first, each on the given service and user id."""
    session = SessionAdvisors(service, default_user_id="owner")
    turn, memory = list(session)
    assert isinstance(turn, SessionTurnAdvisor)
    assert turn is session.turn
    assert isinstance(memory, SessionMemoryAdvisor)
    assert memory is session.memory
    assert turn.service is service
    assert memory.service is service
    assert turn.default_user_id == memory.default_user_id == "owner"
    assert len(session) == 2


def test_the_turn_advisor_owns_the_compaction(service: DefaultSessionService) -> None:
    """Compaction options go to the turn advisor only; the memory advisor never compacts."""
    trigger, strategy = TurnCountTrigger(3), SlidingWindowCompactionStrategy(2)
    session = SessionAdvisors(service, compaction=(trigger, strategy))
    assert session.turn.compaction_trigger is trigger
    assert session.turn.compaction_strategy is strategy
    assert session.memory.compaction_trigger is None
    assert session.memory.compaction_strategy is None


def test_compaction_and_a_worker_are_refused_together(service: DefaultSessionService) -> None:
    """Inline compaction and a background worker exclude each other; a pair is a pair."""
    worker = CompactionWorker(service, TurnCountTrigger(3), SlidingWindowCompactionStrategy(2))
    with pytest.raises(UsageError, match="not both"):
        SessionAdvisors(
            service,
            compaction=(TurnCountTrigger(3), SlidingWindowCompactionStrategy(2)),
            worker=worker,
        )
    with pytest.raises(UsageError, match="pair"):
        SessionAdvisors(service, compaction=(TurnCountTrigger(3),))  # type: ignore[arg-type]


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_client_with_them_stores_the_turn_and_compacts_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """Through a tool loop, the turn is stored round by round and compacted once at its end."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="u1"))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("a2"),
    )
    session = SessionAdvisors(
        service, compaction=(TurnCountTrigger(1), SlidingWindowCompactionStrategy(1))
    )
    client = ChatClient(
        openai_client, model=MODEL, advisors=[*session, ToolCallingAdvisor([lookup])]
    )

    await ask(client, "u2", streaming=streaming, context=context("s"))

    assert repository.calls["compaction"] == 1
    active = await service.get_events("s", EventFilter.active())
    assert [e.type.name for e in active] == ["USER", "ASSISTANT", "TOOL", "ASSISTANT"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_memory_advisor_hands_its_compaction_to_the_turn(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """Options given to the memory advisor beside a turn advisor compact once, after the turn."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="u1"))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("a2"),
    )
    memory = SessionMemoryAdvisor(
        service,
        compaction_trigger=TurnCountTrigger(1),
        compaction_strategy=SlidingWindowCompactionStrategy(1),
    )
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[SessionTurnAdvisor(service), ToolCallingAdvisor([lookup]), memory],
    )

    await ask(client, "u2", streaming=streaming, context=context("s"))

    assert repository.calls["compaction"] == 1


def test_the_default_orders_are_named_and_distinct() -> None:
    """No two of the library's default orders tie, and they nest as documented."""
    orders = [
        TELEMETRY_ORDER,
        IDEMPOTENCY_ORDER,
        SESSION_TURN_ORDER,
        AUTO_MEMORY_ORDER,
        RECALL_ORDER,
        TOOL_LOOP_ORDER,
        SESSION_MEMORY_ORDER,
    ]
    assert orders == sorted(orders)
    assert len(set(orders)) == len(orders)


def test_the_tool_loop_is_a_declared_capability() -> None:
    """The tool loop declares that it runs tool calls; the session advisors do not."""
    assert runs_tool_calls(ToolCallingAdvisor())
    assert not runs_tool_calls(SessionTurnAdvisor.__new__(SessionTurnAdvisor))
    assert not runs_tool_calls(object())
