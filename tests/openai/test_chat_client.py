"""ChatClient on the call path: prompts, options, keywords and contexts, and errors mapped to
ours."""

from __future__ import annotations

import asyncio

import httpx2
import openai
import pytest
from chat_support import MODEL, PATHS, ask, sent, stored, turn

from asyncsession import DefaultSessionService, SystemMessage, UserMessage
from asyncsession.advisors import (
    SESSION_ID_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    IdempotentSessionEventIdGenerator,
)
from asyncsession.chat import ChatOptions, Usage
from asyncsession.exceptions import ChatError, ChatTimeout, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


async def test_a_call_returns_the_reply_with_its_metadata(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Text, finish reason, usage, model and id come back; the model and prompt went out."""
    server.enqueue(ScriptedReply.text("Hi!", prompt_tokens=7, completion_tokens=2))
    client = ChatClient(openai_client, model=MODEL)

    response = await client.call("Hello")

    assert response.text == "Hi!"
    assert response.finish_reason == "stop"
    assert response.usage == Usage(prompt_tokens=7, completion_tokens=2, total_tokens=9)
    assert response.model == MODEL
    assert response.id is not None
    assert response.id.startswith("chatcmpl-")
    assert server.requests[0].model == MODEL
    assert server.requests[0].messages == [{"role": "user", "content": "Hello"}]


async def test_defaults_and_call_options_are_merged_and_sent(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Default messages lead every prompt; call options override the defaults field by field."""
    server.enqueue(ScriptedReply.text("ok"))
    client = ChatClient(
        openai_client,
        model=MODEL,
        default_messages=[SystemMessage(text="Be terse.")],
        default_options=ChatOptions(temperature=0.1, seed=7, extra_body={"a": 1}),
    )

    await client.call(
        "Hi",
        options=ChatOptions(
            model="other-model",
            temperature=0.9,
            max_completion_tokens=50,
            stop=("END",),
            tool_choice="none",
            response_format={"type": "json_object"},
            extra_body={"b": 2},
        ),
    )

    body = server.requests[0].body
    assert body["model"] == "other-model"
    assert sent(server.requests[0].messages) == ["S:Be terse.", "U:Hi"]
    assert (body["temperature"], body["seed"], body["max_completion_tokens"]) == (0.9, 7, 50)
    assert body["stop"] == ["END"]
    assert body["tool_choice"] == "none"
    assert body["response_format"] == {"type": "json_object"}
    assert (body["a"], body["b"]) == (1, 2)


async def test_openai_message_dicts_are_accepted(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Messages may be given as OpenAI dicts; the user argument is appended to them."""
    server.enqueue(ScriptedReply.text("ok"))
    client = ChatClient(openai_client, model=MODEL)

    await client.call("and now?", messages=[{"role": "developer", "content": "Rules."}])

    assert server.requests[0].messages == [
        {"role": "developer", "content": "Rules."},
        {"role": "user", "content": "and now?"},
    ]


async def test_a_call_needs_a_prompt_of_one_kind(openai_client: openai.AsyncOpenAI) -> None:
    """No user message, or ours mixed with dicts, is a usage error."""
    client = ChatClient(openai_client, model=MODEL, default_messages=[SystemMessage(text="x")])

    with pytest.raises(UsageError, match="needs a message"):
        await client.call()
    with pytest.raises(UsageError, match="not a mix"):
        await client.call(messages=[UserMessage(text="a"), {"role": "user", "content": "b"}])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="model"):
        ChatClient(openai_client, model="")


async def test_the_references_context_keys_stand_in_for_the_keywords(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """``context={SESSION_ID_CONTEXT_KEY: ...}`` routes a call as ``session_id=`` does; a
    keyword wins over its key, and the context comes back on the response."""
    server.enqueue(ScriptedReply.text("ok"), ScriptedReply.text("again"))
    client = ChatClient(openai_client, model=MODEL, sessions=service)

    response = await client.call(
        "hi", context={SESSION_ID_CONTEXT_KEY: "mine", USER_ID_CONTEXT_KEY: "ann", "tenant": "acme"}
    )
    await client.call("again", session_id="mine", context={SESSION_ID_CONTEXT_KEY: "other"})

    assert response.context["tenant"] == "acme"
    assert await stored(service, "mine") == ["U:hi", "A:ok", "U:again", "A:again"]
    session = await service.find_by_id("mine")
    assert session is not None
    assert session.user_id == "ann"
    assert await service.find_by_id("other") is None


async def test_session_keywords_need_a_client_with_sessions(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A session id or request id without session memory, a session option without
    ``sessions``, and a client with sessions but a call without a session id are refused."""
    plain = ChatClient(openai_client, model=MODEL)
    with pytest.raises(UsageError, match="session memory"):
        await plain.call("hi", session_id="s")
    with pytest.raises(UsageError, match="session memory"):
        await plain.call("hi", request_id="r")
    with pytest.raises(UsageError, match="needs a client with sessions"):
        ChatClient(openai_client, model=MODEL, event_ids=IdempotentSessionEventIdGenerator())
    with pytest.raises(UsageError, match="session_id"):
        await ChatClient(openai_client, model=MODEL, sessions=service).call("hi")
    with pytest.raises(UsageError, match="store_question"):
        ChatClient(openai_client, model=MODEL, sessions=service, store_question="later")  # type: ignore[arg-type]


async def test_the_borrowed_openai_client_stays_open(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """ChatClient never closes the AsyncOpenAI it was given."""
    server.enqueue(ScriptedReply.text("ok"))

    await ChatClient(openai_client, model=MODEL).call("hi")

    assert not openai_client.is_closed()


@pytest.mark.parametrize("streaming", PATHS)
@pytest.mark.parametrize("status", [400, 429, 500, 503])
async def test_an_http_error_is_a_chat_error_with_its_status(
    status: int,
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A 4xx/5xx becomes ChatError with ``status_code``, chained to the SDK's error; the stored
    user message stays."""
    server.enqueue(ScriptedReply.error(status, "nope"))
    client = ChatClient(openai_client, model=MODEL, sessions=service)

    with pytest.raises(ChatError, match=f"HTTP {status}: nope") as raised:
        await ask(client, "hi", streaming=streaming, **turn("s"))

    assert raised.value.status_code == status
    assert isinstance(raised.value.__cause__, openai.APIStatusError)
    assert await stored(service, "s") == ["U:hi"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_timeout_is_a_chat_timeout(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A model that does not answer in time raises ChatTimeout; the user message stays stored."""
    never = asyncio.Event()
    server.enqueue(ScriptedReply.text("too late", hold=never))
    client = ChatClient(openai_client, model=MODEL, sessions=service)

    with pytest.raises(ChatTimeout) as raised:
        await ask(
            client,
            "hi",
            streaming=streaming,
            **turn("s"),
            options=ChatOptions(timeout=0.2),
        )

    assert isinstance(raised.value.__cause__, openai.APITimeoutError)
    assert raised.value.status_code is None
    assert await stored(service, "s") == ["U:hi"]
    never.set()


async def test_an_unreachable_server_is_a_chat_error(service: DefaultSessionService) -> None:
    """A connection that cannot be made becomes ChatError without a status."""
    async with ScriptedOpenAIServer() as server:
        transport = server.transport
    http = httpx2.AsyncClient(transport=transport)
    async with openai.AsyncOpenAI(api_key="t", max_retries=0, http_client=http) as gone:
        client = ChatClient(gone, model=MODEL)
        with pytest.raises(ChatError, match="Could not reach the model") as raised:
            await client.call("hi")
    assert raised.value.status_code is None
    assert isinstance(raised.value.__cause__, openai.APIConnectionError)


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_retry_after_a_model_error_stores_nothing_twice(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """With idempotent ids, retrying a failed request stores the user message once."""
    client = ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        event_ids=IdempotentSessionEventIdGenerator(),
    )
    server.enqueue(ScriptedReply.error(500, "overloaded"), ScriptedReply.text("fine"))

    with pytest.raises(ChatError):
        await ask(client, "hi", streaming=streaming, **turn("s"))
    response = await ask(client, "hi", streaming=streaming, **turn("s"))

    assert response.text == "fine"
    assert await stored(service, "s") == ["U:hi", "A:fine"]
    assert sent(server.requests[1].messages) == ["U:hi"]
