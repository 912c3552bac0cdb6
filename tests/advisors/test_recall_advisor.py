"""SessionRecallAdvisor: the model recalls archived turns, bound to its own session and user."""

from __future__ import annotations

import json

import openai
from chat_support import MODEL, turn

from asyncsession import DefaultSessionService, EventFilter
from asyncsession.advisors import SessionRecallAdvisor
from asyncsession.compaction import CompactionRequest, CompactionResult
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


def _client(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService, *, cross: bool = False
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        advisors=[SessionRecallAdvisor(service, cross_session=cross)],
    )


class ArchiveAll:
    """A compaction that takes every event out of the active view."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        return CompactionResult(compacted_events=(), archived_events=request.events)


async def test_the_model_recalls_a_turn_that_compaction_archived(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """After compaction archives a turn, conversation_search still finds its text for the model."""
    client = _client(openai_client, service)
    server.enqueue(ScriptedReply.text("Nice, Miso is a lovely name."))
    await client.call("My cat is called Miso.", **turn("s1", "alice"))
    assert (await service.compact("s1", lambda request: True, ArchiveAll())).applied
    assert await service.get_events("s1", EventFilter.active()) == []

    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("conversation_search", {"inner_thought": "name?", "query": "cat"})]
        ),
        ScriptedReply.text("Your cat is Miso."),
    )
    reply = await client.call("What is my cat called?", **turn("s1", "alice"))
    assert reply.text == "Your cat is Miso."
    result = [m for m in server.requests[-1].messages if m["role"] == "tool"][-1]["content"]
    texts = [row["text"] for row in json.loads(result)]
    assert texts == ["My cat is called Miso.", "What is my cat called?"]
    names = [t["function"]["name"] for t in server.requests[1].tools]
    assert names == ["conversation_search"]


async def test_cross_session_search_is_bound_to_the_calls_user(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """cross_session_search sees the call user's sessions only; bad arguments become errors."""
    client = _client(openai_client, service, cross=True)
    server.enqueue(ScriptedReply.text("ok"), ScriptedReply.text("ok"))
    await client.call("alice likes Lisbon", **turn("a1", "alice"))
    await client.call("bob likes Lisbon", **turn("b1", "bob"))
    server.enqueue(
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall("cross_session_search", {"inner_thought": "t", "query": "lisbon"}),
                ScriptedToolCall("cross_session_search", {"inner_thought": "t", "query": " "}),
                ScriptedToolCall("conversation_search", "not json"),
            ]
        ),
        ScriptedReply.text("You like Lisbon."),
    )
    await client.call("Where do I like?", **turn("a2", "alice"))
    results = [m["content"] for m in server.requests[-1].messages if m["role"] == "tool"]
    assert [row["text"] for row in json.loads(results[0])] == ["alice likes Lisbon"]
    assert results[1].startswith("Error:")
    assert results[2].startswith("Error:")
