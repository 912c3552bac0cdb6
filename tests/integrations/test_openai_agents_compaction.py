"""Compaction of Agents SDK sessions: inline after each run, through the worker, or on demand."""

from __future__ import annotations

from typing import Any

from agents import Agent, Runner
from agents.testing import ScriptedModel, assistant_message

from asyncsession import EventFilter, EventType
from asyncsession._compaction_pass import CompactionTicket
from asyncsession.compaction import (
    CompactionResult,
    CompactionWorker,
    RecursiveSummarizationCompactionStrategy,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
)
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.service import SessionService


def user_texts(items: list[Any]) -> list[str]:
    return [item["content"] for item in items if item.get("role") == "user"]


async def run_turns(session: AgentsSession, turns: int) -> ScriptedModel:
    model = ScriptedModel([[assistant_message(f"reply {n}")] for n in range(turns)])
    agent = Agent(name="long-running", model=model)
    for n in range(turns):
        await Runner.run(agent, f"turn {n}", session=session)
    return model


async def test_inline_compaction_keeps_the_history_bounded(service: SessionService) -> None:
    """With a trigger and a strategy, the Runner's compaction hook keeps at most a few turns."""
    session = AgentsSession(
        "inline",
        service,
        trigger=TurnCountTrigger(3),
        strategy=TurnWindowCompactionStrategy(max_turns=2),
    )
    model = await run_turns(session, 8)
    assert user_texts(await session.get_items()) == ["turn 6", "turn 7"]
    # The trigger fires above three turns, after the run that made the fourth.
    assert max(len(user_texts(call.input)) for call in model.calls) == 4
    everything = await service.get_events("inline")
    assert len([event for event in everything if event.is_message]) == 16
    assert sum(event.archived for event in everything) == 12
    records = [event for event in everything if not event.is_message]
    assert records
    assert all(event.type == EventType.COMPACTION for event in records)


async def test_without_compaction_nothing_is_archived(service: SessionService) -> None:
    """A session without a trigger keeps every turn active."""
    session = AgentsSession("keep-all", service)
    await run_turns(session, 5)
    assert len(user_texts(await session.get_items())) == 5
    assert await session.compact() is None


async def test_worker_compaction_keeps_the_history_bounded(service: SessionService) -> None:
    """Through a ``CompactionWorker``, each run submits the session and the worker compacts it."""
    async with CompactionWorker(
        service, TurnCountTrigger(3), TurnWindowCompactionStrategy(max_turns=2)
    ) as worker:
        session = AgentsSession("worker", service, worker=worker)
        await run_turns(session, 6)
        await worker.join()
        ticket = await session.compact()
        assert isinstance(ticket, CompactionTicket)
        await ticket.wait()
    assert len(user_texts(await session.get_items())) <= 3
    archived = await service.get_events("worker", EventFilter(exclude_archived=False))
    assert sum(event.archived for event in archived) >= 6


class FixedSummarizer:
    """Summarizes by counting what it was given."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        self.prompts.append(prompt)
        return "The user counted turns."


async def test_summary_turn_is_replayed_to_the_model(service: SessionService) -> None:
    """A summarizing strategy's summary turn reaches the model as items at the start."""
    summarizer = FixedSummarizer()
    session = AgentsSession(
        "summary",
        service,
        trigger=TurnCountTrigger(4),
        strategy=RecursiveSummarizationCompactionStrategy(summarizer, max_events_to_keep=4),
    )
    model = await run_turns(session, 6)
    assert summarizer.prompts
    assert "turn 0" in summarizer.prompts[0]
    items = await session.get_items()
    assert any("The user counted turns." in str(item.get("content")) for item in items)
    assert "turn 0" not in user_texts(items)
    assert any("The user counted turns." in str(call.input) for call in model.calls)


async def test_compact_on_demand_returns_the_result(service: SessionService) -> None:
    """``compact()`` runs the inline policy now and returns its result."""
    session = AgentsSession(
        "on-demand",
        service,
        trigger=lambda request: request.current_turn_count > 1,
        strategy=TurnWindowCompactionStrategy(max_turns=1),
    )
    assert await session.compact() is None  # no session yet
    await session.add_items(
        [{"role": "user", "content": "one"}, {"role": "user", "content": "two"}]
    )
    result = await session.compact()
    assert isinstance(result, CompactionResult)
    assert result.applied
    assert user_texts(await session.get_items()) == ["two"]
