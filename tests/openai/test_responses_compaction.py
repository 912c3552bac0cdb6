"""``ResponsesCompactionStrategy``: ``responses.compact`` as a compare-and-swap compaction."""

from __future__ import annotations

import asyncio
from typing import Any

import openai
import pytest
from chat_support import session_with_turns
from openai.types.responses import ResponseCompactionCompactingEvent

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    SystemMessage,
    UserMessage,
)
from asyncsession._responses_items import messages_to_items
from asyncsession.compaction import CompactionRequest, TurnCountTrigger
from asyncsession.events import COMPACTION_SOURCE
from asyncsession.openai import ResponsesClient, ResponsesCompactionStrategy
from asyncsession.openai._responses_compaction import (
    COMPACTION_USAGE_KEY,
    RESPONSES_COMPACT_SOURCE,
)
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply
from asyncsession.testing._openai_server.script import json_objects
from asyncsession.testing._openai_server.wire import covered_items

MODEL = "gpt-test"
COMPACT = ScriptedReply.text("")
"""A compact request takes a scripted reply for its timing and errors; its text is ignored."""


def _texts(messages: list[Any]) -> list[str | None]:
    return [m.text for m in messages]


def _text(item: dict[str, Any]) -> str:
    """The text of an input item, whether its content is a string or a list of parts."""
    content: object = item.get("content")
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in json_objects(content))


async def test_the_scripted_server_answers_compact_with_user_messages_and_one_compaction_item(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """``CompactedResponse``: every user message in order, then one opaque compaction item."""
    server.enqueue(COMPACT)
    given = messages_to_items(
        [UserMessage(text="a"), AssistantMessage(text="b"), UserMessage(text="c")]
    )

    compacted = await openai_client.responses.compact(model=MODEL, input=given)  # type: ignore[arg-type]

    assert compacted.object == "response.compaction"
    *users, item = compacted.output
    assert [_text(u.to_dict(warnings=False)) for u in users] == ["a", "c"]
    assert item.type == "compaction"
    covered = covered_items(item.to_dict())
    assert covered is not None
    assert [_text(i) for i in covered] == ["b"]
    assert compacted.usage.input_tokens > 0
    assert server.requests[0].path == "/v1/responses/compact"
    server.assert_done()


async def test_compaction_replaces_old_turns_and_the_next_request_starts_from_the_item(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """The old turns are archived; the Responses API gets the item in place of what it covers."""
    session_id = await session_with_turns(store, 6)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    server.enqueue(COMPACT)

    result = await store.compact(session_id, TurnCountTrigger(1), strategy)

    assert result.applied
    assert result.error is None
    assert result.archived_event_count == 8
    sent = server.requests[0].input
    assert [_text(i) for i in sent] == [
        f"{kind} {n}" for n in range(4) for kind in ("question", "answer")
    ]
    active = await store.get_active_messages(session_id)
    assert _texts(active) == [
        *(f"question {n}" for n in range(4)),
        None,
        "question 4",
        "answer 4",
        "question 5",
        "answer 5",
    ]
    compaction = active[4]
    assert isinstance(compaction, AssistantMessage)
    assert [item["type"] for item in compaction.items] == ["compaction"]
    events = await store.get_events(session_id)
    synthetic = [e for e in events if e.is_synthetic and not e.archived]
    assert {str(e.metadata[COMPACTION_SOURCE]) for e in synthetic} == {RESPONSES_COMPACT_SOURCE}
    usage = synthetic[-1].metadata[COMPACTION_USAGE_KEY]
    assert isinstance(usage, dict)
    assert isinstance(usage["input_tokens"], int)
    assert usage["input_tokens"] > 0

    chat = ResponsesClient(openai_client, model=MODEL, sessions=store)
    server.enqueue(ScriptedReply.text("answer 6"))
    await chat.call("question 6", session_id=session_id)

    replayed = server.requests[1].input
    kinds = [i.get("type") for i in replayed]
    assert kinds.count("compaction") == 1
    texts = [_text(i) for i in replayed if i.get("type") != "compaction"]
    assert texts[:4] == [f"question {n}" for n in range(4)]
    assert "answer 0" not in texts
    assert "answer 3" not in texts
    assert texts[-1] == "question 6"
    server.assert_done()


async def test_a_second_pass_folds_the_previous_compaction_item_in(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """The next pass sends the previous compaction turn first and archives it."""
    session_id = await session_with_turns(store, 6)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    server.enqueue(COMPACT, COMPACT)
    await store.compact(session_id, TurnCountTrigger(1), strategy)
    for n in range(6, 8):
        await store.append_message(session_id, UserMessage(text=f"question {n}"))
        await store.append_message(session_id, AssistantMessage(text=f"answer {n}"))

    result = await store.compact(session_id, TurnCountTrigger(1), strategy)

    assert result.applied
    sent = server.requests[1].input
    assert [i.get("type") for i in sent].count("compaction") == 1
    active = await store.get_active_messages(session_id)
    items = [i for m in active if isinstance(m, AssistantMessage) for i in m.items]
    assert [i["type"] for i in items] == ["compaction"]
    assert _texts(active)[-4:] == ["question 6", "answer 6", "question 7", "answer 7"]


async def test_a_failed_compact_call_changes_nothing_and_says_why(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """An API error leaves the log as it was; the result carries the error."""
    session_id = await session_with_turns(store, 6)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    server.enqueue(ScriptedReply.error(500, "boom"))
    before = await store.get_active_messages(session_id)

    result = await store.compact(session_id, TurnCountTrigger(1), strategy)

    assert result.error is not None
    assert "responses.compact failed" in result.error
    assert await store.get_active_messages(session_id) == before


async def test_appends_during_the_compact_call_make_the_plan_lose_and_are_all_kept(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Forty appends land while ``responses.compact`` is held: the plan loses, no write is lost."""
    session_id = await session_with_turns(store, 6)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("", hold=hold))
    compaction = asyncio.create_task(store.compact(session_id, TurnCountTrigger(1), strategy))
    await asyncio.wait_for(server.wait_for_request(0), 10)

    await asyncio.gather(
        *(store.append_message(session_id, UserMessage(text=f"late {n}")) for n in range(40))
    )
    hold.set()
    result = await compaction

    assert not result.applied
    texts = _texts(await store.get_active_messages(session_id))
    assert sorted(t for t in texts if t and t.startswith("late")) == sorted(
        f"late {n}" for n in range(40)
    )
    assert len(texts) == 12 + 40

    server.enqueue(COMPACT)
    again = await store.compact(session_id, TurnCountTrigger(1), strategy)

    assert again.applied
    active = _texts(await store.get_active_messages(session_id))
    assert sum(1 for t in active if t and t.startswith("late")) == 40


async def test_compaction_racing_many_concurrent_appends_never_loses_one(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Passes race eighty appends: every append stays, active or covered by the active item."""
    session_id = await session_with_turns(store, 6)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    server.enqueue(*(COMPACT for _ in range(6)))

    async def appends(worker: int) -> None:
        for n in range(10):
            await store.append_message(
                session_id, UserMessage(text=f"w{worker} {n}"), metadata={"w": worker}
            )

    async def passes() -> list[bool]:
        outcomes: list[bool] = []
        for _ in range(5):
            result = await store.compact(session_id, TurnCountTrigger(1), strategy)
            outcomes.append(result.applied)
        return outcomes

    racing = asyncio.create_task(passes())
    await asyncio.gather(*(appends(w) for w in range(8)))
    outcomes = await racing
    await store.compact(session_id, TurnCountTrigger(1), strategy)

    assert len(outcomes) == 5  # racing passes may lose; the quiet pass after them compacts
    events = await store.get_events(session_id)
    real_active = [e for e in events if e.is_message and not e.archived and not e.is_synthetic]
    assert len(real_active) <= 4
    stored = {e.text for e in events if e.text is not None and e.text.startswith("w")}
    assert stored == {f"w{w} {n}" for w in range(8) for n in range(10)}
    covered_or_active: set[str] = set()
    for event in events:
        message = event.message
        if event.archived or message is None:
            continue
        if message.text is not None:
            covered_or_active.add(message.text)
        if isinstance(message, AssistantMessage):
            for item in message.items:
                covered_or_active.update(_text(i) for i in covered_items(dict(item)) or [])
    assert stored <= covered_or_active


async def test_nothing_to_compact_calls_no_model(
    store: DefaultSessionService, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Within ``max_events_to_keep`` the strategy returns the window unchanged, no request."""
    session_id = await session_with_turns(store, 2)
    strategy = ResponsesCompactionStrategy(openai_client, model=MODEL, max_events_to_keep=4)
    session = await store.find_by_id(session_id)
    assert session is not None
    events = await store.get_events(session_id)

    result = await strategy.compact(CompactionRequest.of(session, events))

    assert result.archived_event_count == 0
    assert server.requests == []


@pytest.mark.parametrize("streaming", [False, True], ids=["call", "stream"])
async def test_server_side_compaction_makes_the_next_request_start_from_its_item(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """``context_management`` is sent; the compacted reply is stored as a compaction covering
    what its request sent; the next input is the active view, starting at its compaction item
    (the system message kept); the compacting event is its own chunk."""
    session_id = await session_with_turns(store, 3)
    management = [{"type": "compaction", "compact_threshold": 10}]
    chat = ResponsesClient(
        openai_client,
        model=MODEL,
        sessions=store,
        default_messages=[SystemMessage(text="Be brief.")],
        context_management=management,
    )
    server.enqueue(ScriptedReply.text("answer 3"), ScriptedReply.text("answer 4"))

    if streaming:
        async with chat.stream("question 3", session_id=session_id) as stream:
            raws = [chunk.raw async for chunk in stream]
        assert sum(isinstance(r, ResponseCompactionCompactingEvent) for r in raws) == 1
    else:
        await chat.call("question 3", session_id=session_id)
    await chat.call("question 4", session_id=session_id)

    assert server.requests[0].body["context_management"] == management
    first = server.requests[0].input
    assert _text(first[1]) == "question 0"  # after the system message: the whole history
    second = server.requests[1].input
    assert second[0].get("role") == "system"
    assert second[1].get("type") == "compaction"
    assert [_text(i) for i in second if i.get("role") == "user"] == ["question 4"]
    # Both replies compacted: each archived what its item covers; the newest alone is active.
    [stored_reply] = await store.get_active_messages(session_id)
    assert isinstance(stored_reply, AssistantMessage)
    assert stored_reply.text == "answer 4"
    assert [item["type"] for item in stored_reply.items] == ["compaction", "message"]
    server.assert_done()
