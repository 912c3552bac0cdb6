"""A request id names one request: sent again with another message, it is refused."""

from __future__ import annotations

import openai
import pytest
from chat_support import PATHS, ask

from asyncsession import DefaultSessionService, UsageError
from asyncsession.advisors import (
    REQUEST_ID_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_same_request_id_with_another_message_is_refused(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A retry of a completed request gets its reply; the same request id with a different
    message is a usage error naming the request id, calls no model and stores nothing."""
    server.enqueue(ScriptedReply.text("Paris."))
    chat = ChatClient(
        openai_client,
        model="gpt-test",
        advisors=[
            IdempotentTurnAdvisor(store),
            SessionTurnAdvisor(store),
            SessionMemoryAdvisor(store, request_event_id_generator=RequestIdEventIdGenerator()),
        ],
    )
    context = {SESSION_ID_CONTEXT_KEY: "s1", REQUEST_ID_CONTEXT_KEY: "req-1"}
    first = await ask(chat, "Capital of France?", streaming=streaming, context=context)
    again = await ask(chat, "Capital of France?", streaming=streaming, context=context)
    assert first.text == again.text == "Paris."

    with pytest.raises(UsageError, match="req-1"):
        await ask(chat, "Capital of Spain?", streaming=streaming, context=context)

    assert [e.text for e in await store.get_events("s1")] == ["Capital of France?", "Paris."]
    assert len(server.requests) == 1
    server.assert_done()
