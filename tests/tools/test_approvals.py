"""Approvals: a round calling a tool that needs approval stops the turn with the pending calls;
``resume`` from any client continues that turn once, a rejection reaching the model as the
tool's result with its reason. On both stores, both APIs, the call and the stream path."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from chat_support import CLIENTS, MODEL, PATHS, assert_no_leaks, stored
from tool_support import tool_items

from asyncsession import DefaultSessionService, UsageError, tool
from asyncsession.exceptions import UnknownToolCall
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from asyncsession.tools import Tool

paid: list[int] = []
looked: list[str] = []


@pytest.fixture(autouse=True)
def _runs() -> None:
    paid.clear()
    looked.clear()


@tool(needs_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    paid.append(amount)
    return f"paid {amount}"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    looked.append(key)
    return f"value of {key}"


def _pay_call(call_id: str = "c1", amount: int = 5) -> ScriptedReply:
    return ScriptedReply.tool_calls([ScriptedToolCall("pay", {"amount": amount}, id=call_id)])


async def _pause(client: Any, streaming: bool, **keywords: Any) -> Any:
    """Ask for a payment; the turn's response (streamed: and its chunks)."""
    if not streaming:
        return await client.call("pay 5", session_id="s", user_id="alice", **keywords), []
    async with client.stream("pay 5", session_id="s", user_id="alice", **keywords) as stream:
        chunks = [chunk async for chunk in stream]
    return stream.response, chunks


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("client_type", CLIENTS)
async def test_a_turn_stops_for_approval_and_resume_continues_it(
    client_type: Any,
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The turn stops before the tool runs, listing the pending call (a stream ends with a
    chunk naming it); the round is stored; an approval runs the tool once and the turn goes
    on to its reply."""
    server.enqueue(_pay_call(), ScriptedReply.text("done"))
    client = client_type(openai_client, model=MODEL, sessions=store, tools=[pay])

    paused, chunks = await _pause(client, streaming)

    assert paused.finish_reason == "approval_required"
    assert [call.id for call in paused.pending_approvals] == ["c1"]
    if streaming:
        assert chunks[-1].finish_reason == "approval_required"
        assert [call.id for call in chunks[-1].pending_approvals] == ["c1"]
    assert paid == []
    assert await stored(store, "s") == ["U:pay 5", "A[pay]"]

    other = client_type(openai_client, model=MODEL, sessions=store, tools=[pay])
    resumed = await other.resume("s", {"c1": True}, user_id="alice")

    assert resumed.text == "done"
    assert paid == [5]
    assert tool_items(server.requests[1]) == [("call", "c1", "pay"), ("result", "c1", "paid 5")]
    assert await stored(store, "s") == ["U:pay 5", "A[pay]", "T[pay->paid 5]", "A:done"]
    again = await other.resume("s", {"c1": True})
    assert again.text == "done"
    assert paid == [5]
    server.assert_done()


@pytest.mark.parametrize("client_type", CLIENTS)
async def test_a_rejection_reaches_the_model_as_the_tools_result_with_its_reason(
    client_type: Any,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """A rejected call never runs; the model is sent the reason as its result, and it is
    stored so; a call of the round that needs no approval runs on resume."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("pay", {"amount": 5}, id="c1"),
                ScriptedToolCall("lookup", {"key": "k"}, id="c2"),
            ]
        ),
        ScriptedReply.text("understood"),
    )
    client = client_type(openai_client, model=MODEL, sessions=store, tools=[pay, lookup])

    paused = await client.call("pay 5", session_id="s")
    assert [call.id for call in paused.pending_approvals] == ["c1"]
    assert looked == []
    resumed = await client.resume("s", {"c1": "too expensive"})

    assert resumed.text == "understood"
    assert paid == []
    assert looked == ["k"]
    rejection = "Error: not run: the user rejected this tool call: too expensive"
    assert tool_items(server.requests[1])[2:] == [
        ("result", "c1", rejection),
        ("result", "c2", "value of k"),
    ]
    server.assert_done()


async def test_a_policy_decides_per_call(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """``needs_approval`` as a function of the arguments: a small payment runs at once, a
    large one waits."""

    async def run_pay(amount: int) -> str:
        paid.append(amount)
        return f"paid {amount}"

    guarded = Tool.from_function(
        run_pay, name="pay", needs_approval=lambda arguments: arguments["amount"] > 100
    )
    server.enqueue(_pay_call("c1", 5), ScriptedReply.text("small done"), _pay_call("c2", 500))
    client = ChatClient(openai_client, model=MODEL, sessions=store, tools=[guarded])

    assert (await client.call("pay 5", session_id="s")).text == "small done"
    waiting = await client.call("pay 500", session_id="s")

    assert [call.id for call in waiting.pending_approvals] == ["c2"]
    assert paid == [5]
    server.assert_done()


async def test_concurrent_resumes_continue_the_turn_once(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Many resumes of one pause at once, from clients of their own: the tool runs once, the
    model is called once, and every resume gets the same reply."""
    server.enqueue(_pay_call(), ScriptedReply.text("done"))
    await ChatClient(openai_client, model=MODEL, sessions=store, tools=[pay]).call(
        "pay 5", session_id="s"
    )
    clients = [
        ChatClient(openai_client, model=MODEL, sessions=store, tools=[pay]) for _ in range(8)
    ]

    replies = await asyncio.gather(*(c.resume("s", {"c1": True}) for c in clients))

    assert {reply.text for reply in replies} == {"done"}
    assert paid == [5]
    assert len(server.requests) == 2
    server.assert_done()


async def test_resume_refuses_decisions_it_cannot_apply(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Without a paused turn, for a call that is not waiting, or leaving one undecided: a
    typed error, nothing stored, no model call."""
    client = ChatClient(openai_client, model=MODEL, sessions=store, tools=[pay])
    server.enqueue(ScriptedReply.text("hi"), _pay_call())
    await client.call("hello", session_id="s")
    with pytest.raises(UnknownToolCall):
        await client.resume("s", {"c1": True})
    await client.call("pay 5", session_id="s")
    version = await store.get_event_version("s")

    with pytest.raises(UnknownToolCall) as unknown:
        await client.resume("s", {"c1": True, "c9": False})
    with pytest.raises(UsageError, match="undecided"):
        await client.resume("s", {})

    assert unknown.value.call_ids == ("c9",)
    assert await store.get_event_version("s") == version
    assert len(server.requests) == 2
    server.assert_done()


async def test_a_new_message_instead_of_a_decision_answers_the_waiting_call(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """The conversation goes on without a decision: the waiting call is answered as not
    approved (the model is sent the pair whole), and the pause can no longer be resumed."""
    server.enqueue(_pay_call(), ScriptedReply.text("ok, no payment"))
    client = ChatClient(openai_client, model=MODEL, sessions=store, tools=[pay])
    await client.call("pay 5", session_id="s")

    await client.call("never mind", session_id="s")

    assert tool_items(server.requests[1]) == [
        ("call", "c1", "pay"),
        (
            "result",
            "c1",
            "Error: not run: the conversation went on before anyone approved this tool call.",
        ),
    ]
    with pytest.raises(UnknownToolCall):
        await client.resume("s", {"c1": True})
    assert paid == []
    server.assert_done()


async def test_a_turn_storing_its_question_with_the_reply_pauses_and_resumes_too(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """With ``store_question="with_reply"`` the pause stores the question and the round in one
    commit; the resume goes on as usual."""
    server.enqueue(_pay_call(), ScriptedReply.text("done"))
    client = ChatClient(
        openai_client, model=MODEL, sessions=store, tools=[pay], store_question="with_reply"
    )

    await client.call("pay 5", session_id="s")
    assert await store.get_event_version("s") == 1
    resumed = await client.resume("s", {"c1": True})

    assert resumed.text == "done"
    assert paid == [5]
    assert await stored(store, "s") == ["U:pay 5", "A[pay]", "T[pay->paid 5]", "A:done"]
    server.assert_done()


async def test_a_resume_cancelled_while_the_approved_tool_runs_never_runs_it_twice(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A resume is cancelled (a client that went away) while the approved tool runs: the next
    resume, once the lease it kept has expired, tells the model the run was interrupted
    instead of running the tool again; nothing is left running."""
    started, release = asyncio.Event(), asyncio.Event()
    runs: list[int] = []

    async def slow_pay(amount: int) -> str:
        runs.append(amount)
        started.set()
        await release.wait()
        return f"paid {amount}"

    slow = Tool.from_function(slow_pay, name="pay", needs_approval=True)
    client = ChatClient(openai_client, model=MODEL, sessions=store, tools=[slow], lease_ttl=0.5)
    server.enqueue(_pay_call(), ScriptedReply.text("checked"))
    await client.call("pay 5", session_id="s")

    first = asyncio.create_task(client.resume("s", {"c1": True}))
    await started.wait()
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    resumed = await client.resume("s", {"c1": True})

    assert runs == [5]
    assert resumed.text == "checked"
    interrupted = "Error: this tool call was interrupted before it returned a result"
    assert tool_items(server.requests[1])[-1][2].startswith(interrupted)
    assert_no_leaks()
    server.assert_done()
