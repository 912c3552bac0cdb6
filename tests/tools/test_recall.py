"""Recall tools: conversation_search and cross_session_search."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    UsageError,
    UserMessage,
)
from asyncsession.testing import FakeClock
from asyncsession.testing._contract._support import boundary, summary_turn
from asyncsession.tools import Tool, conversation_search, cross_session_search
from asyncsession.tools._recall import NO_RESULTS


async def _ask(tool: Tool, **arguments: object) -> str:
    """The tool's answer to the model's JSON arguments (``inner_thought`` filled in)."""
    return await tool.invoke(json.dumps({"inner_thought": "recall", **arguments}))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 4, 1, tzinfo=UTC))


@pytest.fixture
def service(clock: FakeClock) -> DefaultSessionService:
    return DefaultSessionService(InMemorySessionRepository(), clock=clock)


async def _conversation(
    service: DefaultSessionService, clock: FakeClock, user: str, *texts: str
) -> str:
    session = await service.create(CreateSessionRequest(user_id=user))
    for i, text in enumerate(texts):
        message = UserMessage(text=text) if i % 2 == 0 else AssistantMessage(text=text)
        await service.append_message(session.id, message)
        clock.advance(timedelta(minutes=1))
    return session.id


async def test_conversation_search_finds_archived_text(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """After compaction archives a turn, conversation_search still finds its text."""
    sid = await _conversation(
        service, clock, "alice", "My cat is named Miso", "Nice name!", "What's 2+2?", "4"
    )
    events = await service.get_events(sid)
    version = await service.get_event_version(sid)
    edge = boundary(sid, events[2:], events[:2])
    assert await service.repository.append_events(sid, [edge], version)
    assert "Miso" not in [m.text for m in await service.get_active_messages(sid)]
    found = json.loads(await _ask(conversation_search(service, sid), query="MISO"))
    assert found == [
        {"timestamp": "2026-04-01T00:00:00Z", "type": "user", "text": "My cat is named Miso"}
    ]


async def test_conversation_search_pages_and_refuses_blank_queries(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """Results come a page at a time; a blank query is an error, not "everything"."""
    sid = await _conversation(service, clock, "alice", *(f"note {i}" for i in range(5)))
    tool = conversation_search(service, sid, page_size=2)
    pages = [json.loads(await _ask(tool, query="note", page=p)) for p in (0, 1)]
    assert [[row["text"] for row in page] for page in pages] == [
        ["note 0", "note 1"],
        ["note 2", "note 3"],
    ]
    assert await _ask(tool, query="note", page=3) == NO_RESULTS
    assert json.loads(await _ask(tool, query="note", page=-4))[0]["text"] == "note 0"
    assert json.loads(await _ask(tool, query="note", page=None))[0]["text"] == "note 0"
    assert (await _ask(tool, query="  ")).startswith("Error: Invalid arguments")
    assert (await _ask(tool, query="x", page="2")).startswith("Error: Invalid arguments")
    assert (await _ask(tool, query="x", page=True)).startswith("Error: Invalid arguments")


async def test_search_terms_are_literal_never_a_regex(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """Regex metacharacters in a query match literally."""
    sid = await _conversation(service, clock, "alice", "price is $5 (approx.)", "cheap", "p.i")
    tool = conversation_search(service, sid)
    rows = json.loads(await _ask(tool, query="$5 (approx.)"))
    assert [row["text"] for row in rows] == ["price is $5 (approx.)"]
    assert await _ask(tool, query=".*") == NO_RESULTS


async def test_cross_session_search_spans_one_users_sessions_only(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """Terms are searched across every session of the bound user and nobody else's."""
    first = await _conversation(service, clock, "alice", "trip to Lisbon", "sounds fun")
    second = await _conversation(service, clock, "alice", "Lisbon hotel booked", "great")
    await _conversation(service, clock, "bob", "Lisbon is mine", "ok")
    tool = cross_session_search(service, "alice")
    rows = json.loads(await _ask(tool, query="lisbon"))
    assert [(row["sessionId"], row["text"]) for row in rows] == [
        (first, "trip to Lisbon"),
        (second, "Lisbon hotel booked"),
    ]
    both = json.loads(await _ask(tool, query="lisbon, hotel", match_mode="ALL"))
    assert [row["text"] for row in both] == ["Lisbon hotel booked"]
    any_ = json.loads(await _ask(tool, query="trip,hotel"))
    assert len(any_) == 2


async def test_cross_session_search_since_and_synthetic(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """``since`` bounds the time; compaction summaries are left out unless asked for."""
    sid = await _conversation(
        service, clock, "alice", "budget is 100", "ok", "budget now 200", "ok"
    )
    for event in summary_turn(sid, "the budget went from 100 to 200"):
        await service.append_event(event)
    tool = cross_session_search(service, "alice")
    rows = json.loads(await _ask(tool, query="budget", since="2026-04-01T00:01:30Z"))
    assert [row["text"] for row in rows] == ["budget now 200"]
    assert len(json.loads(await _ask(tool, query="budget"))) == 2
    unbounded = await _ask(tool, query="budget", since=" ", match_mode=None, page=None)
    assert len(json.loads(unbounded)) == 2
    everything = json.loads(
        await _ask(cross_session_search(service, "alice", include_synthetic=True), query="budget")
    )
    assert len(everything) == 3


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        pytest.param({"query": " "}, "at least one search term", id="blank"),
        pytest.param({"query": ", ,"}, "at least one search term", id="only-commas"),
        pytest.param({"query": ",".join(f"t{i}" for i in range(21))}, "at most 20", id="too-many"),
        pytest.param({"query": "x", "match_mode": "some"}, "match_mode", id="bad-mode"),
        pytest.param({"query": "x", "since": "yesterday"}, "since: Input should", id="bad-since"),
        pytest.param({"query": "x", "since": "2026-01-01T00:00:00"}, "timezone", id="naive-since"),
        pytest.param({"query": "x", "page": 1.5}, "page", id="bad-page"),
    ],
)
async def test_bad_arguments_come_back_as_tool_errors(
    service: DefaultSessionService, arguments: dict[str, object], error: str
) -> None:
    """Bad arguments produce an ``Error:`` answer for the model, never an exception."""
    answer = await _ask(cross_session_search(service, "alice"), **arguments)
    assert answer.startswith("Error: Invalid arguments for tool 'cross_session_search': ")
    assert error in answer


def test_tools_validate_their_configuration(service: DefaultSessionService) -> None:
    """No service, a blank session or user, or a non-positive page size is refused with
    UsageError when the tool is built, not when the model first calls it."""
    with pytest.raises(UsageError, match="session_id"):
        conversation_search(service, " ")
    with pytest.raises(UsageError, match="user_id"):
        cross_session_search(service, " ")
    with pytest.raises(UsageError, match="page_size"):
        conversation_search(service, "s", page_size=0)
    with pytest.raises(UsageError, match="page_size"):
        cross_session_search(service, "a", page_size=0)
    with pytest.raises(UsageError, match="session service"):
        conversation_search(None, "s")  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="session service"):
        cross_session_search(None, "alice")  # type: ignore[arg-type]


def test_schemas_come_from_the_argument_models(service: DefaultSessionService) -> None:
    """The recall schemas are generated: typed, described, closed, inner_thought required."""
    conversation = conversation_search(service, "s").parameters
    assert conversation["required"] == ["inner_thought", "query"]
    assert conversation["additionalProperties"] is False
    assert conversation["properties"]["page"]["type"] == "integer"
    cross = cross_session_search(service, "alice").parameters
    assert list(cross["properties"]) == ["inner_thought", "query", "match_mode", "since", "page"]
    assert cross["properties"]["match_mode"]["enum"] == ["any", "all"]
    assert all(p.get("description") for p in cross["properties"].values())
    json.dumps(cross)
