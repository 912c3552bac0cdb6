"""Idempotent turns: a retried request is answered from the log once its first attempt completed."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, stored, turn

from asyncsession import (
    AccessDenied,
    ChatError,
    DefaultSessionService,
    MongoSessionRepository,
    tool,
)
from asyncsession._turn import request_event_id
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def chat(openai_client: openai.AsyncOpenAI, service: DefaultSessionService) -> ChatClient:
    return ChatClient(openai_client, model=MODEL, sessions=service, tools=[lookup])


def retry_of(request_id: str, session_id: str = "s1", user_id: str = "alice") -> dict[str, Any]:
    return turn(session_id, user_id, request_id=request_id)


@pytest.mark.parametrize("retry_streaming", PATHS)
@pytest.mark.parametrize("first_streaming", PATHS)
async def test_a_retry_after_a_completed_attempt_returns_the_stored_reply_without_the_model(
    first_streaming: bool,
    retry_streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The retry (call or stream, after a call or a stream) gets the stored reply and its event
    ids; the model is called once and the log holds the turn once."""
    server.enqueue(ScriptedReply.text("Hello Alice!", chunk_size=4))
    client = chat(openai_client, store)

    first = await ask(client, "Hi", streaming=first_streaming, **retry_of("r1"))
    again = await ask(client, "Hi", streaming=retry_streaming, **retry_of("r1"))

    assert len(server.requests) == 1
    assert again.text == first.text == "Hello Alice!"
    assert again.request_event_ids == first.request_event_ids
    assert again.response_event_ids == first.response_event_ids
    assert await stored(store, "s1") == ["U:Hi", "A:Hello Alice!"]


async def test_a_replayed_stream_yields_the_reply_as_chunks(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A retried stream yields chunks whose text is the stored reply."""
    server.enqueue(ScriptedReply.text("Hello Alice!"))
    client = chat(openai_client, store)
    await client.call("Hi", **retry_of("r1"))

    async with client.stream("Hi", **retry_of("r1")) as stream:
        texts = [chunk.text async for chunk in stream]

    assert "".join(texts) == "Hello Alice!"
    assert stream.response.text == "Hello Alice!"


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_retry_after_a_failed_attempt_calls_the_model_again_and_stores_the_message_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    store: DefaultSessionService,
) -> None:
    """The first attempt's model call fails after the user message was stored; the retry calls
    the model once more, and the log holds the user message once, then the reply."""
    server.enqueue(ScriptedReply.error(500, "boom"), ScriptedReply.text("Recovered."))
    client = chat(openai_client, store)

    with pytest.raises(ChatError):
        await ask(client, "Hi", streaming=streaming, **retry_of("r1"))
    assert await stored(store, "s1") == ["U:Hi"]
    reply = await ask(client, "Hi", streaming=streaming, **retry_of("r1"))

    assert reply.text == "Recovered."
    assert len(server.requests) == 2
    assert [m["content"] for m in server.requests[1].messages] == ["Hi"]
    assert await stored(store, "s1") == ["U:Hi", "A:Recovered."]


async def test_a_retried_tool_turn_replays_the_final_reply_and_every_event_id(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A completed tool loop is replayed whole: its final reply, and the ids of all its events."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("It is v."),
    )
    client = chat(openai_client, store)
    first = await client.call("What is k?", **retry_of("r1"))

    again = await client.call("What is k?", **retry_of("r1"))

    assert again.text == "It is v."
    assert len(server.requests) == 2
    assert len(again.request_event_ids) == 2
    assert len(again.response_event_ids) == 2
    assert again.request_event_ids == first.request_event_ids
    assert again.response_event_ids == first.response_event_ids


async def test_different_request_ids_are_different_turns_even_with_the_same_text(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A new request id is a new turn: "yes" twice is stored twice and answered twice."""
    server.enqueue(ScriptedReply.text("one"), ScriptedReply.text("two"))
    client = chat(openai_client, store)

    await client.call("yes", **retry_of("r1"))
    await client.call("yes", **retry_of("r2"))
    replay = await client.call("yes", **retry_of("r1"))

    assert replay.text == "one"
    assert await stored(store, "s1") == ["U:yes", "A:one", "U:yes", "A:two"]


async def test_concurrent_retries_after_completion_never_call_the_model(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Twenty concurrent retries of a completed request, calls and streams: no model call."""
    server.enqueue(ScriptedReply.text("Done."))
    client = chat(openai_client, store)
    await client.call("Go", **retry_of("r1"))

    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(ask(client, "Go", streaming=i % 2 == 1, **retry_of("r1")))
            for i in range(20)
        ]

    assert {task.result().text for task in tasks} == {"Done."}
    assert len(server.requests) == 1
    assert await stored(store, "s1") == ["U:Go", "A:Done."]


async def test_concurrent_first_attempts_in_one_process_call_the_model_once(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Twenty overlapping attempts of one new request (a client retrying before the first
    answered) in one process: the model is called once, the turn stored once."""
    server.enqueue(ScriptedReply.text("Once.", delay=0.05))
    client = chat(openai_client, store)

    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(ask(client, "Go", streaming=i % 2 == 1, **retry_of("r1")))
            for i in range(20)
        ]

    assert {task.result().text for task in tasks} == {"Once."}
    assert len(server.requests) == 1
    assert await stored(store, "s1") == ["U:Go", "A:Once."]


async def test_a_foreign_user_retrying_a_request_id_gets_access_denied(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Another user's retry of a completed request is refused, not answered from the log."""
    server.enqueue(ScriptedReply.text("private"))
    client = chat(openai_client, store)
    await client.call("Hi", **retry_of("r1"))

    with pytest.raises(AccessDenied):
        await client.call("Hi", **retry_of("r1", user_id="mallory"))
    assert len(server.requests) == 1


@pytest.mark.parametrize("streaming", PATHS)
async def test_without_a_request_id_a_turn_costs_no_more(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """No request id: a read and two appends (no lease command), and two equal messages are two
    turns."""
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))
    client = chat(openai_client, service)
    await ask(client, "yes", streaming=streaming, **turn("s1"))
    repository.reset()

    await ask(client, "yes", streaming=streaming, **turn("s1"))

    assert repository.calls == {"read_snapshot": 1, "append_events": 2}
    assert await stored(service, "s1") == ["U:yes", "A:a", "U:yes", "A:b"]


def test_request_ids_fix_the_question_and_reply_ids_and_nothing_else() -> None:
    """With a request id the question's and the reply's ids depend on session and request, not
    on the text."""
    from asyncsession import AssistantMessage, UserMessage

    a = request_event_id("s1", "r1", UserMessage(text="a"), reply=False)
    assert a == request_event_id("s1", "r1", UserMessage(text="b"), reply=False)
    assert a.startswith("user-")
    assert a != request_event_id("s1", "r2", UserMessage(text="a"), reply=False)
    assert a != request_event_id("s2", "r1", UserMessage(text="a"), reply=False)
    reply = request_event_id("s1", "r1", AssistantMessage(text="x"), reply=True)
    assert reply == request_event_id("s1", "r1", AssistantMessage(text="y"), reply=True)
    assert reply.startswith("reply-")
    assert reply != a


async def test_overlapping_attempts_on_two_clients_call_the_model_once(
    mongo_uri: str, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Two clients (own MongoDB clients, services and chat clients, as two processes have)
    start the same request while the first is waiting for the model: the model is called once,
    the turn stored once, and both get the reply."""
    from pymongo import AsyncMongoClient

    release = asyncio.Event()
    server.enqueue(ScriptedReply.text("First.", hold=release))
    name = f"t_{uuid.uuid4().hex[:16]}"
    clients: list[AsyncMongoClient[dict[str, Any]]] = [
        AsyncMongoClient(mongo_uri, tz_aware=True) for _ in range(2)
    ]
    try:
        services = [DefaultSessionService(MongoSessionRepository(c[name])) for c in clients]
        await MongoSessionRepository(clients[0][name]).ensure_indexes()
        a, b = (chat(openai_client, service) for service in services)

        async with asyncio.TaskGroup() as group:
            slow = group.create_task(a.call("Go", **retry_of("r1")))
            async with asyncio.timeout(10):
                await server.wait_for_request(0)
            fast = group.create_task(b.call("Go", **retry_of("r1")))
            release.set()

        assert slow.result().text == fast.result().text == "First."
        assert len(server.requests) == 1
        assert await stored(services[0], "s1") == ["U:Go", "A:First."]
    finally:
        await clients[0].drop_database(name)
        for client in clients:
            await client.close()
