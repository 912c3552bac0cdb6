"""Pydantic AI tool approvals and orphaned calls on ``PydanticAIHistory``, held against a plain
list of messages (Pydantic AI's own way): what the guide's table says of them."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic_ai import Agent, DeferredToolRequests, DeferredToolResults, ModelMessage
from pydantic_ai.exceptions import UserError
from pydantic_ai.messages import (
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    repair_messages,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai_support import HistoryFactory


def _parts(messages: list[ModelMessage]) -> list[tuple[str, Any]]:
    return [
        (type(p).__name__, getattr(p, "content", None) or getattr(p, "tool_call_id", None))
        for m in messages
        for p in m.parts
        if not isinstance(p, TextPart) or p.content
    ]


Output = str | DeferredToolRequests


def _agent(sent: list[list[tuple[str, Any]]], ran: list[str]) -> Agent[None, Output]:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        sent.append(_parts(messages))
        if isinstance(messages[-1].parts[-1], ToolReturnPart):
            return ModelResponse(parts=[TextPart("done")])
        if len(sent) == 1:
            return ModelResponse(parts=[ToolCallPart("refund", {"order": "7"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("hello")])

    agent: Agent[None, Output] = Agent(
        FunctionModel(model), output_type=[str, DeferredToolRequests]
    )

    @agent.tool_plain(requires_approval=True)
    def refund(order: str) -> str:  # pyright: ignore[reportUnusedFunction]
        ran.append(order)
        return f"order {order} refunded"

    return agent


@pytest.mark.parametrize("approved", [True, False], ids=["approved", "denied"])
async def test_an_approval_resumes_from_a_history_loaded_anew(
    any_history: HistoryFactory, approved: bool
) -> None:
    """A run stops on a tool that needs approval; its messages are stored; a new history object
    loads them and the run resumes with the decision: the tool runs once or never, and the
    stored messages are the list's."""
    sent: list[list[tuple[str, Any]]] = []
    ran: list[str] = []
    agent = _agent(sent, ran)
    first = await agent.run("refund 7")
    assert isinstance(first.output, DeferredToolRequests)
    await any_history("s").store(first.new_messages())
    history = any_history("s")
    decision = DeferredToolResults(approvals={"c1": approved})
    second = await agent.run(message_history=await history.load(), deferred_tool_results=decision)
    assert second.output == "done"
    assert ran == (["7"] if approved else [])
    await history.store(second.new_messages())
    stored = _parts(await any_history("s").load())
    assert [kind for kind, _ in stored] == [
        "UserPromptPart",
        "ToolCallPart",
        "ToolReturnPart",
        "TextPart",
    ]
    assert stored[2][1] == ("order 7 refunded" if approved else "The tool call was denied.")


async def test_an_unanswered_call_at_the_end_stops_a_new_prompt_as_with_a_list(
    any_history: HistoryFactory,
) -> None:
    """A paused run never resumed leaves its call unanswered at the end: a new prompt is
    refused by Pydantic AI itself (``UserError``, before any model request), as with a list;
    ``repair_messages`` closes the call and the run goes on."""
    sent: list[list[tuple[str, Any]]] = []
    agent = _agent(sent, [])
    first = await agent.run("refund 7")
    await any_history("s").store(first.new_messages())
    loaded = await any_history("s").load()
    with pytest.raises(UserError, match="unprocessed tool calls"):
        await agent.run("something else", message_history=loaded)
    assert len(sent) == 1
    result = await agent.run("something else", message_history=repair_messages(loaded))
    assert result.output == "hello"
    assert [kind for kind, _ in sent[-1]][:3] == [
        "UserPromptPart",
        "ToolCallPart",
        "ToolReturnPart",
    ]


async def test_an_unanswered_call_inside_the_history_is_answered_in_the_request(
    any_history: HistoryFactory,
) -> None:
    """A call left unanswered with later messages after it (a process killed between storing
    the call and its result, then more turns): Pydantic AI answers it in the request it builds
    (its repair runs before every model request), as with a list; the log keeps it as stored."""
    sent: list[list[tuple[str, Any]]] = []
    agent = _agent(sent, [])
    first = await agent.run("refund 7")
    call = first.new_messages()
    repaired = await agent.run("hi", message_history=repair_messages(call))
    history = any_history("s")
    await history.store([*call, *repaired.new_messages()])
    kinds = [kind for kind, _ in _parts(await history.load())]
    assert kinds == ["UserPromptPart", "ToolCallPart", "UserPromptPart", "TextPart"]
    result = await agent.run("again", message_history=await any_history("s").load())
    assert result.output == "hello"
    assert [kind for kind, _ in sent[-1]][:3] == [
        "UserPromptPart",
        "ToolCallPart",
        "ToolReturnPart",
    ]
