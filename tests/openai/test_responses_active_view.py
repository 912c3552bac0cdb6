"""With ``context_management`` on the Responses API, every request sends exactly the session's
active view, also when another caller stored a message while a server-compacted reply was in
flight; and a compaction covers only what its request sent."""

from __future__ import annotations

import asyncio

import openai
import pytest
from chat_support import PATHS, ask, session_with_turns

from asyncsession import DefaultSessionService, EventType, SystemMessage, UserMessage
from asyncsession._responses_items import messages_to_items
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.filters import EventFilter
from asyncsession.openai import ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

COMPACTING = [{"type": "compaction", "compact_threshold": 10}]
"""A threshold every request reaches: the server compacts during each reply."""
SYSTEM = SystemMessage(text="Be brief.")


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_message_stored_during_a_compacted_reply_is_sent_with_the_next_request(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Another caller stores a message while the model answers a turn the server compacts: the
    message stays in the active view, the next request sends exactly that view (the message
    included), and the next compaction covers exactly what that request sent."""
    session_id = await session_with_turns(store, 2)
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("answer 2", hold=hold), ScriptedReply.text("answer 3"))
    chat = ResponsesClient(
        openai_client,
        model="gpt-test",
        sessions=store,
        default_messages=[SYSTEM],
        context_management=COMPACTING,
    )
    turn = asyncio.create_task(ask(chat, "question 2", streaming=streaming, session_id=session_id))
    await server.wait_for_request(0)
    racing = await store.append_message(session_id, UserMessage(text="stored meanwhile"))
    hold.set()
    await turn

    view = await store.get_events(session_id, EventFilter.active())
    assert racing.id in [e.id for e in view]
    await ask(chat, "question 3", streaming=streaming, session_id=session_id)

    sent = server.requests[1].input
    expected = [SYSTEM, *(e.message for e in view if e.message), UserMessage(text="question 3")]
    assert sent == messages_to_items(expected)
    log = await store.get_events(session_id)
    records = [CompactionRecord.from_event(e) for e in log if e.type == EventType.COMPACTION]
    assert len(records) == 2
    question = next(e for e in log if e.text == "question 3")
    assert set(records[1].covered) == {e.id for e in view} | {question.id}
    server.assert_done()
