"""Idempotent turns: a retried request is answered from the log once its first attempt completed."""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, CountingRepository, ask, context, stored

from asyncsession import (
    AccessDenied,
    ChatError,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    UsageError,
)
from asyncsession.advisors import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    REQUEST_ID_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def chat(openai_client: openai.AsyncOpenAI, service: DefaultSessionService) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            IdempotentTurnAdvisor(service),
            SessionTurnAdvisor(service),
            ToolCallingAdvisor([lookup]),
            SessionMemoryAdvisor(service, request_event_id_generator=RequestIdEventIdGenerator()),
        ],
    )


def retry_of(request_id: str, session_id: str = "s1", user_id: str = "alice") -> dict[str, Any]:
    return context(session_id, user_id, **{REQUEST_ID_CONTEXT_KEY: request_id})


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

    first = await ask(client, "Hi", streaming=first_streaming, context=retry_of("r1"))
    again = await ask(client, "Hi", streaming=retry_streaming, context=retry_of("r1"))

    assert len(server.requests) == 1
    assert again.text == first.text == "Hello Alice!"
    for key in (REQUEST_EVENT_IDS_CONTEXT_KEY, RESPONSE_EVENT_IDS_CONTEXT_KEY):
        assert again.context[key] == first.context[key]
    assert await stored(store, "s1") == ["U:Hi", "A:Hello Alice!"]


async def test_a_replayed_stream_yields_the_reply_as_chunks(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A retried stream yields chunks whose text is the stored reply."""
    server.enqueue(ScriptedReply.text("Hello Alice!"))
    client = chat(openai_client, store)
    await client.call("Hi", context=retry_of("r1"))

    async with client.stream("Hi", context=retry_of("r1")) as stream:
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
        await ask(client, "Hi", streaming=streaming, context=retry_of("r1"))
    assert await stored(store, "s1") == ["U:Hi"]
    reply = await ask(client, "Hi", streaming=streaming, context=retry_of("r1"))

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
    first = await client.call("What is k?", context=retry_of("r1"))

    again = await client.call("What is k?", context=retry_of("r1"))

    assert again.text == "It is v."
    assert len(server.requests) == 2
    assert len(again.context[REQUEST_EVENT_IDS_CONTEXT_KEY]) == 2
    assert len(again.context[RESPONSE_EVENT_IDS_CONTEXT_KEY]) == 2
    for key in (REQUEST_EVENT_IDS_CONTEXT_KEY, RESPONSE_EVENT_IDS_CONTEXT_KEY):
        assert again.context[key] == first.context[key]


async def test_different_request_ids_are_different_turns_even_with_the_same_text(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """A new request id is a new turn: "yes" twice is stored twice and answered twice."""
    server.enqueue(ScriptedReply.text("one"), ScriptedReply.text("two"))
    client = chat(openai_client, store)

    await client.call("yes", context=retry_of("r1"))
    await client.call("yes", context=retry_of("r2"))
    replay = await client.call("yes", context=retry_of("r1"))

    assert replay.text == "one"
    assert await stored(store, "s1") == ["U:yes", "A:one", "U:yes", "A:two"]


async def test_concurrent_retries_after_completion_never_call_the_model(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, store: DefaultSessionService
) -> None:
    """Twenty concurrent retries of a completed request, calls and streams: no model call."""
    server.enqueue(ScriptedReply.text("Done."))
    client = chat(openai_client, store)
    await client.call("Go", context=retry_of("r1"))

    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(ask(client, "Go", streaming=i % 2 == 1, context=retry_of("r1")))
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
            group.create_task(ask(client, "Go", streaming=i % 2 == 1, context=retry_of("r1")))
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
    await client.call("Hi", context=retry_of("r1"))

    with pytest.raises(AccessDenied):
        await client.call("Hi", context=retry_of("r1", user_id="mallory"))
    assert len(server.requests) == 1


async def test_without_a_request_generator_in_the_chain_a_request_id_is_a_usage_error(
    openai_client: openai.AsyncOpenAI,
) -> None:
    """The advisor cannot find a request's message without request-derived ids: it says so."""
    service = DefaultSessionService(InMemorySessionRepository())
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[IdempotentTurnAdvisor(service), SessionMemoryAdvisor(service)],
    )

    with pytest.raises(UsageError, match="RequestIdEventIdGenerator"):
        await client.call("Hi", context=retry_of("r1"))


@pytest.mark.parametrize("streaming", PATHS)
async def test_without_a_request_id_the_advisor_costs_nothing(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    repository: CountingRepository,
) -> None:
    """No request id: the same repository calls as a turn without the advisor, and two equal
    messages are two turns."""
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))
    client = chat(openai_client, service)
    await ask(client, "yes", streaming=streaming, context=context("s1"))
    repository.reset()

    await ask(client, "yes", streaming=streaming, context=context("s1"))

    assert repository.calls == {
        "read_snapshot": 1,
        "append_events": 1,
        "append_event": 1,
    }
    assert await stored(service, "s1") == ["U:yes", "A:a", "U:yes", "A:b"]


def test_request_ids_fix_the_user_message_id_and_nothing_else() -> None:
    """With a request id the user message's id depends on session and request, not the text;
    without one it is random."""
    from asyncsession import UserMessage

    ids = RequestIdEventIdGenerator()
    a = ids.generate(retry_of("r1"), UserMessage(text="a"))

    assert a == ids.generate(retry_of("r1"), UserMessage(text="b"))
    assert a.startswith("user-")
    assert a != ids.generate(retry_of("r2"), UserMessage(text="a"))
    assert a != ids.generate(retry_of("r1", session_id="s2"), UserMessage(text="a"))
    plain = context("s1")
    assert ids.generate(plain, UserMessage(text="a")) != ids.generate(plain, UserMessage(text="a"))
    uuid.UUID(ids.generate(plain, UserMessage(text="a")))


async def test_overlapping_attempts_in_two_processes_store_the_user_message_once(
    mongo_uri: str, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """The stated limit: two processes (own clients, caches and locks) start the same request
    while neither has answered; both call the model, the user message is stored once, and a
    later retry in either process gets the first stored reply."""
    from pymongo import AsyncMongoClient

    release = asyncio.Event()
    server.enqueue(ScriptedReply.text("First.", hold=release), ScriptedReply.text("Second."))
    name = f"t_{uuid.uuid4().hex[:16]}"
    clients: list[AsyncMongoClient[dict[str, Any]]] = [
        AsyncMongoClient(mongo_uri, tz_aware=True) for _ in range(2)
    ]
    try:
        services = [DefaultSessionService(MongoSessionRepository(c[name])) for c in clients]
        await MongoSessionRepository(clients[0][name]).ensure_indexes()
        a, b = (chat(openai_client, service) for service in services)

        async with asyncio.TaskGroup() as group:
            slow = group.create_task(a.call("Go", context=retry_of("r1")))
            async with asyncio.timeout(10):
                await server.wait_for_request(0)
            fast = await b.call("Go", context=retry_of("r1"))
            release.set()
        later = [await c.call("Go", context=retry_of("r1")) for c in (a, b)]

        assert fast.text == "Second."
        assert slow.result().text == "First."
        assert len(server.requests) == 2
        labels = await stored(services[0], "s1")
        assert labels[0] == "U:Go"
        assert labels.count("U:Go") == 1
        assert sorted(labels[1:]) == ["A:First.", "A:Second."]
        assert {reply.text for reply in later} == {labels[1].removeprefix("A:")}
    finally:
        await clients[0].drop_database(name)
        for client in clients:
            await client.close()
