"""``store_question="with_reply"``: the whole turn stored in one write once the call is complete."""

from __future__ import annotations

import asyncio

import openai
import pytest
from chat_support import MODEL, PATHS, ask, stored, turn

from asyncsession import (
    AssistantMessage,
    ChatError,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    UsageError,
    UserMessage,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import (
    RecordedRequest,
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def chat(openai_client: openai.AsyncOpenAI, service: DefaultSessionService) -> ChatClient:
    return ChatClient(
        openai_client, model=MODEL, sessions=service, store_question="with_reply", tools=[lookup]
    )


async def with_history(service: DefaultSessionService) -> None:
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    await service.append_messages(
        "s", [UserMessage(text="earlier"), AssistantMessage(text="noted")]
    )


def test_store_question_is_validated(openai_client: openai.AsyncOpenAI) -> None:
    """Anything but the two choices is a usage error naming the argument."""
    service = DefaultSessionService(InMemorySessionRepository())
    client = ChatClient(openai_client, model=MODEL, sessions=service)
    assert client.memory is not None
    assert client.memory.store_question == "first"
    for bad in ("after", None, 1):
        with pytest.raises(UsageError, match="store_question"):
            ChatClient(openai_client, model=MODEL, sessions=service, store_question=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_is_one_write_and_the_model_sees_the_question(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(ScriptedReply.text("hello"))

    reply = await ask(chat(openai_client, store), "hi", streaming=streaming, **turn("s"))

    assert [m["content"] for m in server.requests[-1].messages] == ["earlier", "noted", "hi"]
    assert await stored(store, "s") == ["U:earlier", "A:noted", "U:hi", "A:hello"]
    assert await store.get_event_version("s") == version + 1
    events = await store.get_events("s", EventFilter.all())
    assert reply.request_event_ids == (events[2].id,)
    assert reply.response_event_ids == (events[3].id,)


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_failed_model_call_stores_nothing(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(ScriptedReply.error(500, "boom"))

    with pytest.raises(ChatError):
        await ask(chat(openai_client, store), "hi", streaming=streaming, **turn("s"))

    assert await stored(store, "s") == ["U:earlier", "A:noted"]
    assert await store.get_event_version("s") == version


async def test_a_cancelled_call_stores_nothing(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    await with_history(store)
    server.enqueue(ScriptedReply.text("never", hold=asyncio.Event()))
    task = asyncio.create_task(chat(openai_client, store).call("hi", **turn("s")))
    await asyncio.wait_for(server.wait_for_request(0), 10)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await stored(store, "s") == ["U:earlier", "A:noted"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_tool_loop_is_stored_in_the_final_write(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    await with_history(store)
    version = await store.get_event_version("s")
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    await ask(chat(openai_client, store), "go", streaming=streaming, **turn("s"))

    assert await stored(store, "s") == [
        "U:earlier",
        "A:noted",
        "U:go",
        "A[lookup]",
        "T[lookup->value of k]",
        "A:done",
    ]
    assert await store.get_event_version("s") == version + 1
    assert [m["role"] for m in server.requests[1].messages][-3:] == ["user", "assistant", "tool"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_idempotent_retries_store_nothing_twice(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A failed attempt stores nothing; its retry stores the turn; a retry of the completed
    request replays it without the model; four overlapping attempts call the model once."""
    server.enqueue(ScriptedReply.error(500, "boom"), ScriptedReply.text("answer"))
    retry = turn("s", "alice", request_id="r1")
    client = chat(openai_client, store)
    with pytest.raises(ChatError):
        await ask(client, "q", streaming=streaming, **retry)
    assert await stored(store, "s") == []
    first = await ask(client, "q", streaming=streaming, **retry)
    again = await ask(client, "q", streaming=streaming, **retry)
    assert first.text == again.text == "answer"
    assert len(server.requests) == 2
    assert await stored(store, "s") == ["U:q", "A:answer"]

    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("once", hold=hold))
    other = turn("s", "alice", request_id="r2")
    clients = [chat(openai_client, store) for _ in range(4)]  # "processes"
    tasks = [asyncio.create_task(ask(c, "q2", streaming=streaming, **other)) for c in clients]
    await asyncio.wait_for(server.wait_for_request(2), 10)
    hold.set()
    assert [r.text for r in await asyncio.gather(*tasks)] == ["once"] * 4
    assert len(server.requests) == 3
    assert await stored(store, "s") == ["U:q", "A:answer", "U:q2", "A:once"]


async def test_concurrent_turns_on_one_session_lose_nothing(
    store: DefaultSessionService, openai_client: openai.AsyncOpenAI
) -> None:
    """Thirty turns at once: every question is stored, right before its own reply (a turn
    whose commit finds another turn stored first is stored after it, whole)."""

    def answer(request: RecordedRequest) -> ScriptedReply:
        return ScriptedReply.text(f"re {request.messages[-1]['content']}")

    async with (
        ScriptedOpenAIServer(responder=answer) as server,
        server.client() as client,
    ):
        await store.create(CreateSessionRequest(id="s", user_id="alice"))
        chat_client = chat(client, store)
        questions = [f"q{i}" for i in range(30)]
        await asyncio.gather(*(chat_client.call(q, **turn("s", "alice")) for q in questions))
    labels = await stored(store, "s")
    assert len(labels) == 60
    pairs = list(zip(labels[::2], labels[1::2], strict=True))
    assert sorted(pairs) == sorted((f"U:{q}", f"A:re {q}") for q in questions)
