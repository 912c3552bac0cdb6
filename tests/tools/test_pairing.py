"""Pairing kept at write time: a call left without its result by an interrupted turn is answered,
before the next model call of its session, by one stored result saying so; a tool result whose
call is not in the log is refused. On both stores, both APIs, the call and the stream path."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from chat_support import CLIENTS, MODEL, PATHS, ask, stored
from tool_support import results_of, tool_items

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from asyncsession.exceptions import UnknownToolCall
from asyncsession.messages import ToolCall
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

INTERRUPTED = "Error: this tool call was interrupted before it returned a result"


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


async def _interrupted_session(service: DefaultSessionService) -> None:
    """Session ``s`` as a turn that died while its tool ran leaves it: the question, and the
    round's call recorded before the tool ran, without its result."""
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_message("s", UserMessage(text="q1"))
    call = ToolCall(id="c1", name="lookup", arguments='{"key": "k"}')
    await service.append_message("s", AssistantMessage(tool_calls=(call,)))


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("client_type", CLIENTS)
async def test_a_call_left_without_its_result_is_answered_before_the_next_model_call(
    client_type: Any,
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The next turn stores a result saying the call was interrupted, then calls the model
    with the pair whole, and stores its own turn after it."""
    await _interrupted_session(store)
    server.enqueue(ScriptedReply.text("done"))
    client = client_type(openai_client, model=MODEL, sessions=store, tools=[lookup])

    reply = await ask(client, "q2", streaming=streaming, session_id="s", user_id="alice")

    assert reply.text == "done"
    sent = tool_items(server.requests[0])
    assert [item[:2] for item in sent] == [("call", "c1"), ("result", "c1")]
    assert sent[1][2].startswith(INTERRUPTED)
    assert await stored(store, "s") == [
        "U:q1",
        "A[lookup]",
        f"T[lookup->{sent[1][2]}]",
        "U:q2",
        "A:done",
    ]
    server.assert_done()


async def test_concurrent_turns_answer_an_interrupted_call_once(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Many turns of the session start at once on the interrupted call: one result is stored
    for it, and every model call is sent the pair whole."""
    await _interrupted_session(store)
    turns = 8
    server.enqueue(*(ScriptedReply.text(f"answer {n}") for n in range(turns)))
    chat = ChatClient(openai_client, model=MODEL, sessions=store, tools=[lookup])

    await asyncio.gather(
        *(chat.call(f"q{n}", session_id="s", user_id="alice") for n in range(turns))
    )

    results = (await results_of(store, "s"))["c1"]
    assert len(results) == 1
    assert results[0].startswith(INTERRUPTED)
    for request in server.requests:
        assert [item[:2] for item in tool_items(request)] == [("call", "c1"), ("result", "c1")]
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("client_type", CLIENTS)
async def test_a_tool_result_whose_call_is_not_in_the_log_is_refused(
    client_type: Any,
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """Results sent for a call the session never stored are refused with ``UnknownToolCall``
    before anything is stored or the model is called."""
    await store.create(CreateSessionRequest(id="s", user_id="alice"))
    await store.append_message("s", UserMessage(text="q1"))
    await store.append_message("s", AssistantMessage(text="a1"))
    version = await store.get_event_version("s")
    client = client_type(openai_client, model=MODEL, sessions=store, tools=[lookup])
    orphan = ToolResponseMessage(responses=(ToolResponse(id="nope", name="lookup", data="x"),))

    with pytest.raises(UnknownToolCall) as raised:
        await ask(client, None, streaming=streaming, messages=[orphan], session_id="s")

    assert raised.value.call_ids == ("nope",)
    assert await store.get_event_version("s") == version
    assert server.requests == []
