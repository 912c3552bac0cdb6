"""A request id names one request: sent again with another message, it is refused."""

from __future__ import annotations

import openai
import pytest
from chat_support import PATHS, ask

from asyncsession import DefaultSessionService, RequestIdReused, UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

REQUEST = {"session_id": "s1", "request_id": "req-1"}


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
    chat = ChatClient(openai_client, model="gpt-test", sessions=store)
    first = await ask(chat, "Capital of France?", streaming=streaming, **REQUEST)
    again = await ask(chat, "Capital of France?", streaming=streaming, **REQUEST)
    assert first.text == again.text == "Paris."

    with pytest.raises(RequestIdReused, match="req-1") as raised:
        await ask(chat, "Capital of Spain?", streaming=streaming, **REQUEST)
    assert isinstance(raised.value, UsageError)

    assert [e.text for e in await store.get_events("s1")] == ["Capital of France?", "Paris."]
    assert len(server.requests) == 1
    server.assert_done()
