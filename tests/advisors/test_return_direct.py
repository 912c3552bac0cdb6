"""Return-direct tools: the loop ends without another model call; the turn stores the results."""

from __future__ import annotations

from typing import Any

import openai
import pytest
from chat_support import CLIENTS, MODEL, PATHS, ask, stored, turn

from asyncsession import DefaultSessionService, tool
from asyncsession.chat import ChatChunk
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool(return_direct=True)
def ticket(number: int) -> str:
    """Show a ticket."""
    return f"ticket {number}: open"


@tool(return_direct=True)
def owner(number: int) -> str:
    """Show who owns a ticket."""
    return f"ticket {number}: alice"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def client_of(
    kind: type[ChatClient] | type[ResponsesClient],
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> ChatClient | ResponsesClient:
    return kind(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[ticket, owner, lookup],
    )


async def ask_collecting(client: Any, user: str, *, streaming: bool) -> tuple[Any, list[ChatChunk]]:
    if not streaming:
        return await client.call(user, **turn("s")), []
    async with client.stream(user, **turn("s")) as stream:
        chunks = [chunk async for chunk in stream]
    return stream.response, chunks


@pytest.mark.parametrize("kind", CLIENTS)
@pytest.mark.parametrize("streaming", PATHS)
async def test_return_direct_results_reach_the_caller_and_the_log_without_a_model_round(
    kind: type[ChatClient] | type[ResponsesClient],
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """Two return-direct calls: one model request, results to the caller (as the last chunks
    on a stream), call and results stored, and the next prompt replays both."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("ticket", {"number": 7}, id="c1"),
                ScriptedToolCall("owner", {"number": 7}, id="c2"),
            ]
        ),
        ScriptedReply.text("Anything else?"),
    )
    client = client_of(kind, openai_client, store)

    response, chunks = await ask_collecting(client, "Ticket 7?", streaming=streaming)

    assert len(server.requests) == 1
    assert response.finish_reason == "return_direct"
    assert response.has_tool_calls is False
    assert [call.id for call in response.tool_calls] == ["c1", "c2"]
    assert response.tool_results is not None
    assert [(r.id, r.data) for r in response.tool_results.responses] == [
        ("c1", "ticket 7: open"),
        ("c2", "ticket 7: alice"),
    ]
    assert response.text == "ticket 7: open\nticket 7: alice"
    if streaming:
        last = chunks[-2:]
        assert [c.tool_result.id if c.tool_result else None for c in last] == ["c1", "c2"]
        assert [c.finish_reason for c in last] == [None, "return_direct"]
        assert "".join(c.text for c in last) == response.text
        assert all(c.tool_result is None for c in chunks[:-2])
    log = ["U:Ticket 7?", "A[ticket,owner]", "T[ticket->ticket 7: open,owner->ticket 7: alice]"]
    assert await stored(store, "s") == log
    events = await store.get_events("s")
    assert response.request_event_ids[-1] == events[-1].id

    await ask(client, "Thanks", streaming=streaming, **turn("s"))

    replayed = server.requests[1]
    if kind is ChatClient:
        assert [m["role"] for m in replayed.messages] == [
            "user",
            "assistant",
            "tool",
            "tool",
            "user",
        ]
        assert [m.get("tool_call_id") for m in replayed.messages[2:4]] == ["c1", "c2"]
    else:
        assert [i.get("type", "message") for i in replayed.input] == [
            "message",
            "function_call",
            "function_call",
            "function_call_output",
            "function_call_output",
            "message",
        ]
    assert await stored(store, "s") == [*log, "U:Thanks", "A:Anything else?"]
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_mixed_round_sends_every_result_to_the_model(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """A round with one return-direct tool and one other goes back to the model (Spring's rule:
    every tool of the round must be return-direct)."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("ticket", {"number": 1}, id="c1"),
                ScriptedToolCall("lookup", {"key": "k"}, id="c2"),
            ]
        ),
        ScriptedReply.text("Done."),
    )
    client = client_of(ChatClient, openai_client, store)

    response = await ask(client, "go", streaming=streaming, **turn("s"))

    assert response.text == "Done."
    assert response.tool_results is None
    assert response.finish_reason == "stop"
    assert len(server.requests) == 2
    assert await stored(store, "s") == [
        "U:go",
        "A[ticket,lookup]",
        "T[ticket->ticket 1: open,lookup->value of k]",
        "A:Done.",
    ]


@pytest.mark.parametrize("streaming", PATHS)
async def test_return_direct_tools_answer_on_the_last_allowed_round(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """They need no further model call, so the last round of max_rounds may end on them."""
    server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("ticket", {"number": 2})]))
    client = ChatClient(
        openai_client,
        model=MODEL,
        sessions=store,
        tools=[ticket],
        max_tool_rounds=1,
    )

    response = await ask(client, "go", streaming=streaming, **turn("s"))

    assert response.text == "ticket 2: open"
    server.assert_done()
