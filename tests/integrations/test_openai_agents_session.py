"""What ``AgentsSession`` adds to the protocol: real message events, archive-only pops and
clears, retries that store nothing twice, concurrency, cancellation, turn-aware windows."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any, cast

import pytest
from agents import TResponseInputItem
from losing_service import LosingService
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    DefaultSessionService,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionEvent,
)
from asyncsession.compaction import TurnCountTrigger
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.exceptions import StorageError, UsageError
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.messages import AssistantMessage, ToolResponseMessage
from asyncsession.repository import Lease
from asyncsession.service import SessionService

Items = list[TResponseInputItem]

TOOL_ROUND: Any = [
    {"role": "user", "content": "Weather in Paris and Rome?"},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAA-opaque"},
    {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "c1",
        "name": "weather",
        "arguments": '{"city":"Paris"}',
    },
    {
        "type": "function_call",
        "id": "fc_2",
        "call_id": "c2",
        "name": "weather",
        "arguments": '{"city":"Rome"}',
    },
    {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
    {"type": "function_call_output", "call_id": "c2", "output": "rainy"},
    {
        "type": "message",
        "id": "msg_1",
        "role": "assistant",
        "status": "completed",
        "content": [
            {"type": "output_text", "text": "Paris is sunny, Rome rainy.", "annotations": []}
        ],
    },
]

ODD_ITEMS: Any = [
    {
        "role": "user",
        "content": [
            {"type": "input_text", "text": "Look"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            {"type": "input_file", "file_id": "file_1"},
        ],
    },
    {"type": "web_search_call", "id": "ws_1", "status": "completed", "action": {"type": "search"}},
    {"type": "custom_tool_call", "call_id": "ct1", "name": "grammar", "input": "free text"},
    {"type": "custom_tool_call_output", "call_id": "ct1", "output": "ok"},
    {"type": "item_reference", "id": "msg_0"},
    {"type": "compaction", "id": "cmp_1", "encrypted_content": "opaque"},
    {"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "No."}]},
    {"role": "developer", "content": "Be brief", "x_unknown": {"nested": [1, 2]}},
    {"type": "mcp_call", "id": "mcp_1", "name": "t", "arguments": "{}", "server_label": "s"},
]


async def test_items_are_stored_as_message_events(service: SessionService) -> None:
    """A tool round is a user, an assistant (reasoning and both calls), a tool and an assistant
    event, and every item comes back exactly as given."""
    session = AgentsSession("events", service)
    await session.add_items(TOOL_ROUND)
    events = await service.get_events("events")
    assert [event.type for event in events] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.ASSISTANT,
    ]
    call = events[1].message
    assert isinstance(call, AssistantMessage)
    assert [(c.id, c.name) for c in call.tool_calls] == [("c1", "weather"), ("c2", "weather")]
    assert call.reasoning[0]["encrypted_content"] == "gAAA-opaque"
    results = events[2].message
    assert isinstance(results, ToolResponseMessage)
    assert [(r.id, r.name, r.data) for r in results.responses] == [
        ("c1", "weather", "sunny"),
        ("c2", "weather", "rainy"),
    ]
    assert events[3].text == "Paris is sunny, Rome rainy."
    assert await session.get_items() == TOOL_ROUND


async def test_items_the_conversion_does_not_interpret_round_trip(service: SessionService) -> None:
    """Media parts, hosted-tool items, custom tools, references, refusals and unknown keys come
    back exactly as given."""
    session = AgentsSession("odd", service)
    for item in ODD_ITEMS:
        await session.add_items([item])
    assert await session.get_items() == ODD_ITEMS
    await session.add_items(ODD_ITEMS)
    assert await session.get_items() == ODD_ITEMS + ODD_ITEMS
    assert await session.get_items(limit=3) == ODD_ITEMS[-3:]


async def test_recall_search_finds_agent_text(service: SessionService) -> None:
    """A keyword search over the session's events finds what the agent said."""
    session = AgentsSession("recall", service)
    await session.add_items(TOOL_ROUND)
    found = await service.get_events("recall", EventFilter(keyword="rome rainy"))
    assert [event.type for event in found] == [EventType.ASSISTANT]


async def test_session_is_created_on_first_write(service: SessionService) -> None:
    """The first write creates the session with the given owner and metadata."""
    session = AgentsSession("created", service, user_id="alice", metadata={"app": "demo"})
    assert await service.find_by_id("created") is None
    await session.add_items(cast(Items, [{"role": "user", "content": "hi"}]))
    created = await service.find_by_id("created")
    assert created is not None
    assert (created.user_id, created.metadata) == ("alice", {"app": "demo"})
    assert AgentsSession("other", service).user_id == "other"


async def test_pop_archives_and_never_deletes(service: SessionService) -> None:
    """A popped item's event stays in the log, archived; the pop leaves a compaction record,
    which a later pop never pops."""
    session = AgentsSession("pop-archive", service)
    await session.add_items(cast(Items, [{"role": "user", "content": "keep"}]))
    await session.add_items(cast(Items, [{"role": "user", "content": "oops"}]))
    assert await session.pop_item() == {"role": "user", "content": "oops"}
    events = await service.get_events("pop-archive")
    messages = [event for event in events if event.is_message]
    assert [(event.text, event.archived) for event in messages] == [("keep", False), ("oops", True)]
    (record,) = [event for event in events if not event.is_message]
    assert CompactionRecord.from_event(record).covered == (messages[1].id,)
    assert await session.pop_item() == {"role": "user", "content": "keep"}
    assert await session.pop_item() is None
    events = await service.get_events("pop-archive")
    assert [e.type for e in events if not e.is_message] == [EventType.COMPACTION] * 2
    assert not any(e.archived for e in events if not e.is_message)


async def test_clear_archives_everything(service: SessionService) -> None:
    """``clear_session`` archives every event; the log keeps them all."""
    session = AgentsSession("clear-archive", service)
    await session.add_items(TOOL_ROUND)
    await session.clear_session()
    events = await service.get_events("clear-archive")
    messages = [event for event in events if event.is_message]
    assert len(messages) == 4
    assert all(event.archived for event in messages)
    (record,) = [event for event in events if not event.is_message]
    assert CompactionRecord.from_event(record).covered == tuple(e.id for e in messages)
    assert await session.get_items() == []


@pytest.mark.parametrize(
    ("limit", "expected"),
    [
        pytest.param(2, TOOL_ROUND, id="cut-in-turn"),
        pytest.param(7, TOOL_ROUND, id="whole"),
    ],
)
async def test_whole_turns_extends_the_window(
    service: SessionService, limit: int, expected: list[Any]
) -> None:
    """With ``whole_turns``, a limited window starts at the user item of its turn."""
    session = AgentsSession("turns", service, whole_turns=True)
    await session.add_items(cast(Items, [{"role": "user", "content": "before"}]))
    await session.add_items(TOOL_ROUND)
    assert await session.get_items(limit=limit) == expected
    plain = AgentsSession("turns", service)
    assert await plain.get_items(limit=limit) == TOOL_ROUND[-limit:]


async def test_system_items_need_a_service_that_stores_them() -> None:
    """A developer item is refused by a service that stores no system messages."""
    session = AgentsSession("no-system", DefaultSessionService(InMemorySessionRepository()))
    with pytest.raises(UsageError, match="allow_system_messages"):
        await session.add_items(cast(Items, [{"role": "developer", "content": "Be brief"}]))


@pytest.mark.parametrize(
    "options",
    [
        pytest.param({"trigger": TurnCountTrigger(1)}, id="trigger-only"),
        pytest.param({"session_id": " "}, id="blank-id"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any]) -> None:
    """Inline compaction needs a trigger and a strategy; a session id must not be blank."""
    values: dict[str, Any] = {"session_id": "s", **options}
    with pytest.raises(UsageError):
        AgentsSession(service=DefaultSessionService(InMemorySessionRepository()), **values)


@pytest.mark.parametrize("after_write", [True, False], ids=["ack-lost", "not-written"])
@pytest.mark.parametrize(
    "batch",
    [
        pytest.param(TOOL_ROUND[:1], id="turn-start"),
        pytest.param(TOOL_ROUND[1:], id="tool-round"),
        pytest.param(TOOL_ROUND[-1:], id="one-event-reply"),
    ],
)
async def test_retry_after_a_failed_write_stores_once(
    service: SessionService, after_write: bool, batch: list[Any]
) -> None:
    """Retrying a batch whose write failed stores it exactly once, written or not, whichever
    way it was written (a lone question, a tool round, a one-event reply)."""
    losing = LosingService(service, fail=0, after_write=after_write)
    session = AgentsSession("retry", losing)
    await session.add_items(TOOL_ROUND[:1])
    losing.fail = 2
    for _ in range(2):
        with pytest.raises(StorageError):
            await session.add_items(batch)
    await session.add_items(batch)
    assert await session.get_items() == TOOL_ROUND[:1] + batch
    await session.add_items(batch)  # a success clears the memory: this is new
    assert await session.get_items() == TOOL_ROUND[:1] + batch + batch


async def test_concurrent_adds_keep_every_batch_once_and_whole(service: SessionService) -> None:
    """Forty concurrent ``add_items`` from ten session objects store every batch exactly once,
    each batch contiguous, identical batches included."""
    sessions = [AgentsSession("busy", service) for _ in range(10)]
    batches: list[Any] = [
        [{"role": "user", "content": f"q{n % 20}"}, {"role": "assistant", "content": f"a{n % 20}"}]
        for n in range(40)
    ]
    await asyncio.gather(*(sessions[n % 10].add_items(batch) for n, batch in enumerate(batches)))
    stored: list[Any] = await sessions[0].get_items()
    assert len(stored) == 80
    pairs = [(stored[k]["content"], stored[k + 1]["content"]) for k in range(0, 80, 2)]
    expected = [(b[0]["content"], b[1]["content"]) for b in batches]
    assert sorted(pairs) == sorted(expected)


async def test_concurrent_pops_and_adds_lose_nothing(service: SessionService) -> None:
    """Pops racing with adds each claim a distinct item, and every added item is either popped
    or still there."""
    session = AgentsSession("race", service)
    await session.add_items(
        cast(Items, [{"role": "user", "content": f"old{n}"} for n in range(10)])
    )
    adds = [
        session.add_items(cast(Items, [{"role": "user", "content": f"new{n}"}])) for n in range(10)
    ]
    pops = [session.pop_item() for _ in range(10)]
    results = await asyncio.gather(*adds, *pops)
    popped = [cast(Any, item)["content"] for item in results[10:] if item is not None]
    left = [cast(Any, item)["content"] for item in await session.get_items()]
    assert len(popped) == len(set(popped)) == 10
    assert sorted(popped + left) == sorted(
        [f"old{n}" for n in range(10)] + [f"new{n}" for n in range(10)]
    )


class GatedService(DefaultSessionService):
    """Holds every append at a gate, telling the test when one has arrived (on the store of
    ``service``, a `DefaultSessionService`)."""

    def __init__(self, service: SessionService) -> None:
        assert isinstance(service, DefaultSessionService)
        super().__init__(service.repository)
        self.arrived = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        self.arrived.set()
        await self.gate.wait()
        return await super().append_events(session_id, events, expected_version, lease=lease)


async def test_cancelled_add_finishes_its_write(service: SessionService) -> None:
    """A caller cancelled during ``add_items`` gets its cancellation after the write is done."""
    gated = GatedService(service)
    session = AgentsSession("cancel", gated)
    task = asyncio.create_task(session.add_items(TOOL_ROUND))
    await gated.arrived.wait()
    task.cancel()
    gated.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await session.get_items() == TOOL_ROUND


def test_it_is_an_sdk_session() -> None:
    """The SDK recognises it as a ``Session`` with the compaction hook its Runner calls."""
    from agents.memory import Session
    from agents.memory.session import is_openai_responses_compaction_aware_session

    session = AgentsSession("typed", DefaultSessionService(InMemorySessionRepository()))
    assert isinstance(session, Session)
    assert is_openai_responses_compaction_aware_session(session)
    assert repr(session) == "AgentsSession(session_id='typed')"


async def test_items_that_are_not_items_are_refused(service: SessionService) -> None:
    """Something that is not a JSON item is a ``UsageError`` and stores nothing."""
    session = AgentsSession("bad", service)
    with pytest.raises(UsageError, match="cannot store"):
        await session.add_items(cast(Items, [{"role": "user", "content": object()}]))
    assert await service.find_by_id("bad") is None


@pytest.mark.mongodb
async def test_on_mongodb_a_failed_write_retried_stores_its_items_once(
    mongo_db: AsyncDatabase[dict[str, Any]],
) -> None:
    """On MongoDB, a write whose acknowledgement was lost and that is retried stores its batch
    once, among many turns."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    losing = LosingService(DefaultSessionService(repository), fail=0, after_write=True)
    session = AgentsSession("long", losing)
    for turn in range(60):
        await session.add_items([{"role": "user", "content": f"q{turn}"}])
        if turn == 30:
            losing.fail = 1
            with pytest.raises(StorageError):
                await session.add_items([{"role": "assistant", "content": f"a{turn}"}])
        await session.add_items([{"role": "assistant", "content": f"a{turn}"}])
    assert [m.text for m in await losing.get_messages("long")] == [
        text for turn in range(60) for text in (f"q{turn}", f"a{turn}")
    ]
