"""The scripted server's compaction: ``context_management`` on ``/v1/responses``, JSON and SSE."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest
from openai.types.responses import (
    ResponseCompactionCompactingEvent,
    ResponseCompactionItem,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseOutputMessage,
)
from openai.types.responses.response_create_params import ContextManagement
from openai.types.responses.response_input_item_param import ResponseInputItemParam

from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply
from asyncsession.testing._openai_server.wire import covered_items

MODEL = "gpt-test"
INPUT: list[ResponseInputItemParam] = [{"role": "user", "content": "x" * 400}]
COMPACTING: list[ContextManagement] = [{"type": "compaction", "compact_threshold": 50}]


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as client:
        yield client


async def test_a_request_over_the_threshold_gets_a_compaction_item_first(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The output starts with a compaction item standing for the whole input."""
    server.enqueue(ScriptedReply.text("done"))

    response = await client.responses.create(
        model=MODEL,
        input=INPUT,
        context_management=COMPACTING,
    )

    compaction, message = response.output
    assert isinstance(compaction, ResponseCompactionItem)
    assert covered_items(compaction.to_dict()) == INPUT
    assert isinstance(message, ResponseOutputMessage)
    assert response.output_text == "done"


async def test_under_the_threshold_or_without_context_management_nothing_is_compacted(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Only a request at or over ``compact_threshold`` is compacted."""
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))
    small: list[ContextManagement] = [{"type": "compaction", "compact_threshold": 10_000}]

    under = await client.responses.create(
        model=MODEL,
        input=INPUT,
        context_management=small,
    )
    plain = await client.responses.create(model=MODEL, input=INPUT)

    assert [item.type for item in under.output] == ["message"]
    assert [item.type for item in plain.output] == ["message"]


async def test_a_streamed_compaction_is_announced_by_its_compacting_event(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """Added, ``response.compaction.compacting``, done: then the message streams."""
    server.enqueue(ScriptedReply.text("done"))

    stream = await client.responses.create(
        model=MODEL,
        input=INPUT,
        context_management=COMPACTING,
        stream=True,
    )
    events = [event async for event in stream]

    added, compacting, done = events[2:5]
    assert isinstance(added, ResponseOutputItemAddedEvent)
    assert added.item.type == "compaction"
    assert isinstance(compacting, ResponseCompactionCompactingEvent)
    assert compacting.item_id == added.item.id
    assert compacting.output_index == 0
    assert isinstance(done, ResponseOutputItemDoneEvent)
    assert isinstance(done.item, ResponseCompactionItem)
    assert covered_items(done.item.to_dict()) == INPUT
    assert events[-1].type == "response.completed"
    final = events[-1].response  # type: ignore[union-attr]
    assert [item.type for item in final.output] == ["compaction", "message"]
