"""ChatClient on the call path: prompts, options, contexts, and errors mapped to ours."""

from __future__ import annotations

import asyncio

import openai
import pytest
from chat_support import MODEL, PATHS, ask, context, sent, stored

from asyncsession import DefaultSessionService, SystemMessage, UserMessage
from asyncsession.advisors import (
    IdempotentSessionEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.chat import ChatOptions, Usage
from asyncsession.exceptions import ChatError, ChatTimeout, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedUsage


async def test_a_call_returns_the_reply_with_its_metadata(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Text, finish reason, usage, model and id come back; the model and prompt went out."""
    server.enqueue(
        ScriptedReply.text("Hi!", usage=ScriptedUsage(prompt_tokens=7, completion_tokens=2))
    )
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

    with pytest.raises(UsageError, match="needs a user message"):
        await client.call()
    with pytest.raises(UsageError, match="not a mix"):
        await client.call(messages=[UserMessage(text="a"), {"role": "user", "content": "b"}])  # type: ignore[list-item]
    with pytest.raises(UsageError, match="model"):
        ChatClient(openai_client, model="")


async def test_the_call_context_overlays_the_default_context(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """``default_context`` applies to every call; a call's context wins key by key."""
    server.enqueue(ScriptedReply.text("ok"))
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[SessionMemoryAdvisor(service)],
        default_context={**context("default-session"), "tenant": "acme"},
    )

    response = await client.call("hi", context=context("mine"))

    assert response.context["tenant"] == "acme"
    assert await stored(service, "mine") == ["U:hi", "A:ok"]
    assert await service.find_by_id("default-session") is None


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
    client = ChatClient(openai_client, model=MODEL, advisors=[SessionMemoryAdvisor(service)])

    with pytest.raises(ChatError, match=f"HTTP {status}: nope") as raised:
        await ask(client, "hi", streaming=streaming, context=context("s"))

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
    client = ChatClient(openai_client, model=MODEL, advisors=[SessionMemoryAdvisor(service)])

    with pytest.raises(ChatTimeout) as raised:
        await ask(
            client,
            "hi",
            streaming=streaming,
            context=context("s"),
            options=ChatOptions(timeout=0.2),
        )

    assert isinstance(raised.value.__cause__, openai.APITimeoutError)
    assert raised.value.status_code is None
    assert await stored(service, "s") == ["U:hi"]
    never.set()


async def test_an_unreachable_server_is_a_chat_error(service: DefaultSessionService) -> None:
    """A connection that cannot be made becomes ChatError without a status."""
    async with ScriptedOpenAIServer() as server:
        base_url = server.base_url
    async with openai.AsyncOpenAI(base_url=base_url, api_key="test", max_retries=0) as gone:
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
    ids = IdempotentSessionEventIdGenerator()
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            SessionTurnAdvisor(service),
            SessionMemoryAdvisor(
                service, request_event_id_generator=ids, response_event_id_generator=ids
            ),
        ],
    )
    server.enqueue(ScriptedReply.error(500, "overloaded"), ScriptedReply.text("fine"))

    with pytest.raises(ChatError):
        await ask(client, "hi", streaming=streaming, context=context("s"))
    response = await ask(client, "hi", streaming=streaming, context=context("s"))

    assert response.text == "fine"
    assert await stored(service, "s") == ["U:hi", "A:fine"]
    assert sent(server.requests[1].messages) == ["U:hi"]
