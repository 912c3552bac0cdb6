"""DefaultSessionService, and a decorator that subclasses it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import cast

import pytest

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    SessionExists,
    SessionNotFound,
    SessionService,
    SystemMessage,
    UsageError,
    UserMessage,
)
from asyncsession.compaction import CompactionRequest, CompactionResult
from asyncsession.testing import FakeClock
from asyncsession.testing._contract._support import boundary, system, user


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(datetime(2026, 3, 1, tzinfo=UTC))


@pytest.fixture
def service(clock: FakeClock) -> DefaultSessionService:
    return DefaultSessionService(InMemorySessionRepository(), clock=clock)


async def test_create_uses_the_clock_and_the_default_time_to_live(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """A new session is stamped by the clock and lives 60 days unless told otherwise."""
    session = await service.create(CreateSessionRequest(user_id="alice", metadata={"a": 1}))
    assert session.created_at == clock.now
    assert session.expires_at == clock.now + timedelta(days=60)
    assert session.metadata == {"a": 1}
    short = await service.create(CreateSessionRequest(user_id="a", time_to_live=timedelta(hours=2)))
    assert short.expires_at == clock.now + timedelta(hours=2)
    assert await service.find_by_id(session.id) == session


@pytest.mark.parametrize(
    "ttl",
    [
        pytest.param(timedelta(0), id="zero"),
        pytest.param(timedelta(seconds=-60), id="negative"),
    ],
)
async def test_a_non_positive_time_to_live_creates_an_already_expired_session(
    service: DefaultSessionService, clock: FakeClock, ttl: timedelta
) -> None:
    """As in the reference: ``expires_at = now + ttl``, so the session is expired at once and
    the next sweep after it removes it with its events."""
    session = await service.create(CreateSessionRequest(id="e", user_id="u", time_to_live=ttl))
    assert session.expires_at == clock.now + ttl
    assert session.expires_at != clock.now + timedelta(days=60)  # not the default
    await service.append_message("e", UserMessage(text="gone soon"))
    kept = await service.create(CreateSessionRequest(id="k", user_id="u"))

    clock.advance(timedelta(seconds=1))
    assert await service.delete_expired_sessions() == 1

    assert await service.find_by_id("e") is None
    assert await service.get_events("e") == []
    assert await service.find_by_id("k") == kept


async def test_a_time_to_live_past_the_calendar_is_a_usage_error(
    service: DefaultSessionService,
) -> None:
    """A time to live that overflows the datetime range is our typed error, not OverflowError."""
    with pytest.raises(UsageError, match="time_to_live"):
        await service.create(CreateSessionRequest(user_id="u", time_to_live=timedelta.max))


async def test_create_refuses_an_existing_id(service: DefaultSessionService) -> None:
    """Creating a session whose id exists raises SessionExists and keeps the first."""
    await service.create(CreateSessionRequest(id="s1", user_id="alice"))
    with pytest.raises(SessionExists):
        await service.create(CreateSessionRequest(id="s1", user_id="bob"))
    found = await service.find_by_id("s1")
    assert found is not None
    assert found.user_id == "alice"


async def test_find_or_create_has_one_winner_under_concurrency(
    service: DefaultSessionService,
) -> None:
    """Concurrent find_or_create calls for one id all return the same stored session."""
    sessions = await asyncio.gather(
        *(service.find_or_create(CreateSessionRequest(id="s", user_id=f"u{i}")) for i in range(40))
    )
    assert len({(s.id, s.user_id, s.created_at) for s in sessions}) == 1


async def test_system_messages_are_refused_unless_allowed(clock: FakeClock) -> None:
    """Storing a system message is opt-in, with an explanation when refused."""
    repo = InMemorySessionRepository()
    strict = DefaultSessionService(repo, clock=clock)
    session = await strict.create(CreateSessionRequest(user_id="u"))
    with pytest.raises(UsageError, match="allow_system_messages=True"):
        await strict.append_message(session.id, SystemMessage(text="be brief"))
    with pytest.raises(UsageError):
        await strict.append_events(session.id, [system(session.id, "x")])
    assert await strict.get_events(session.id) == []
    relaxed = DefaultSessionService(repo, clock=clock, allow_system_messages=True)
    await relaxed.append_message(session.id, SystemMessage(text="be brief"))
    assert [m.text for m in await relaxed.get_messages(session.id)] == ["be brief"]


async def test_append_message_wraps_and_returns_the_event(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """append_message stamps the event by the clock, keeps a given id, and is idempotent."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    event = await service.append_message(
        session.id, UserMessage(text="hi"), event_id="e-1", metadata={"k": "v"}
    )
    assert (event.id, event.timestamp, event.metadata) == ("e-1", clock.now, {"k": "v"})
    await service.append_message(session.id, UserMessage(text="hi"), event_id="e-1")
    assert await service.get_events(session.id) == [event]
    assert await service.get_event_version(session.id) == 1


async def test_append_messages_stores_a_whole_turn_as_one_version(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """append_messages wraps each message in an event, appends them as one version in order,
    returns them, and a retry with the same ids is a no-op."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    turn = [UserMessage(text="q"), AssistantMessage(text="a")]
    events = await service.append_messages(session.id, turn, metadata={"k": "v"})
    assert [e.text for e in events] == ["q", "a"]
    assert all(e.timestamp == clock.now and e.metadata == {"k": "v"} for e in events)
    assert len({e.id for e in events}) == 2
    assert await service.get_event_version(session.id) == 1
    assert await service.get_events(session.id) == events
    again = await service.append_messages(session.id, turn, event_ids=[e.id for e in events])
    assert [e.id for e in again] == [e.id for e in events]
    assert await service.get_event_version(session.id) == 1
    assert await service.get_events(session.id) == events
    assert await service.append_messages(session.id, []) == []
    assert await service.get_event_version(session.id) == 1


@pytest.mark.parametrize(
    "event_ids",
    [
        pytest.param(["only-one"], id="too-few"),
        pytest.param(["x", "y", "z"], id="too-many"),
        pytest.param(["x", "x"], id="repeated"),
        pytest.param(["x", " "], id="blank"),
    ],
)
async def test_append_messages_refuses_ids_that_do_not_name_each_message_once(
    service: DefaultSessionService, event_ids: list[str]
) -> None:
    """Bad event_ids are a UsageError, and nothing is stored."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    with pytest.raises(UsageError, match="event_ids"):
        await service.append_messages(
            session.id, [UserMessage(text="q"), AssistantMessage(text="a")], event_ids=event_ids
        )
    assert await service.get_events(session.id) == []


async def test_append_messages_refuses_the_whole_batch_for_one_bad_message(
    service: DefaultSessionService,
) -> None:
    """A system message while they are disabled, or an unknown session, stores nothing."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    with pytest.raises(UsageError):
        await service.append_messages(
            session.id, [UserMessage(text="q"), SystemMessage(text="be brief")]
        )
    assert await service.get_events(session.id) == []
    with pytest.raises(SessionNotFound):
        await service.append_messages("missing", [UserMessage(text="q")])


async def test_reads_and_messages(service: DefaultSessionService) -> None:
    """get_messages includes archived events; get_active_messages does not."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    await service.append_message(session.id, UserMessage(text="q1"))
    await service.append_message(session.id, AssistantMessage(text="a1"))
    await service.append_message(session.id, UserMessage(text="q2"))
    old, *kept = await service.get_events(session.id)
    version = await service.get_event_version(session.id)
    edge = boundary(session.id, kept, [old])
    assert await service.repository.append_events(session.id, [edge], version)
    assert [m.text for m in await service.get_messages(session.id)] == ["q1", "a1", "q2"]
    assert [m.text for m in await service.get_active_messages(session.id)] == ["a1", "q2"]
    snapshot = await service.get_snapshot(
        session.id, EventFilter.active().merge(EventFilter.last_n(1))
    )
    assert snapshot is not None
    assert snapshot.version == version + 1
    assert [e.text for e in snapshot.events] == ["q2"]
    messages = EventFilter(event_types=[EventType.USER, EventType.ASSISTANT])
    assert [e.text for e in await service.find_events_by_user_id("u", messages)] == [
        "q1",
        "a1",
        "q2",
    ]


async def test_expired_sessions_are_swept_by_the_clock(
    service: DefaultSessionService, clock: FakeClock
) -> None:
    """delete_expired_sessions uses the clock when no instant is given."""
    session = await service.create(
        CreateSessionRequest(user_id="u", time_to_live=timedelta(hours=1))
    )
    assert await service.delete_expired_sessions() == 0
    clock.advance(timedelta(hours=2))
    assert await service.delete_expired_sessions() == 1
    assert await service.find_by_id(session.id) is None
    with pytest.raises(UsageError):
        await service.delete_expired_sessions(datetime(2026, 1, 1))  # noqa: DTZ001


@pytest.mark.parametrize("bad", ["", "  "])
async def test_blank_ids_are_usage_errors(service: DefaultSessionService, bad: str) -> None:
    """Blank session or user ids are refused before reaching the store."""
    for call in (
        service.find_by_id(bad),
        service.find_by_user_id(bad),
        service.delete(bad),
        service.get_events(bad),
        service.get_event_version(bad),
        service.find_events_by_user_id(bad),
    ):
        with pytest.raises(UsageError):
            await call
    with pytest.raises(UsageError):
        await service.append_events("s", [], expected_version=-1)
    with pytest.raises(UsageError):
        DefaultSessionService(InMemorySessionRepository(), default_time_to_live=timedelta(0))


async def test_compact_applies_a_plan_and_a_lost_race_is_a_silent_no_op(
    service: DefaultSessionService,
) -> None:
    """compact() archives what the strategy drops; a concurrent write makes it a no-op."""
    session = await service.create(CreateSessionRequest(user_id="u"))
    for text in ("q1", "a1", "q2"):
        await service.append_message(session.id, UserMessage(text=text))

    class DropFirst:
        async def compact(self, request: CompactionRequest) -> CompactionResult:
            return CompactionResult(
                compacted_events=request.events[1:], archived_events=request.events[:1]
            )

    class Racing(DropFirst):
        async def compact(self, request: CompactionRequest) -> CompactionResult:
            await service.append_message(session.id, UserMessage(text="sneaked in"))
            return await super().compact(request)

    assert not (await service.compact(session.id, lambda r: False, DropFirst())).applied
    lost = await service.compact(session.id, lambda r: True, Racing())
    assert not lost.applied
    assert [m.text for m in await service.get_active_messages(session.id)] == [
        "q1",
        "a1",
        "q2",
        "sneaked in",
    ]

    async def fires(request: CompactionRequest) -> bool:
        return request.current_turn_count > 2

    won = await service.compact(session.id, fires, DropFirst())
    assert won.applied
    assert won.archived_event_count == 1
    assert [m.text for m in await service.get_active_messages(session.id)] == [
        "a1",
        "q2",
        "sneaked in",
    ]
    with pytest.raises(SessionNotFound):
        await service.compact("missing", fires, DropFirst())


class CountingService(DefaultSessionService):
    """A decorator that counts appends and inherits the rest."""

    def __init__(self, repository: InMemorySessionRepository) -> None:
        super().__init__(repository)
        self.appends = 0

    async def append_event(self, event):  # type: ignore[no-untyped-def]
        self.appends += 1
        await super().append_event(event)


async def test_a_decorator_overrides_only_what_it_needs(service: DefaultSessionService) -> None:
    """A subclass of DefaultSessionService changes one method and keeps every other."""
    decorated = CountingService(cast(InMemorySessionRepository, service.repository))
    assert isinstance(decorated, SessionService)
    session = await decorated.create(CreateSessionRequest(user_id="u"))
    await decorated.append_event(user(session.id, "hello"))
    assert decorated.appends == 1
    assert [m.text for m in await decorated.get_messages(session.id)] == ["hello"]
    assert await decorated.get_event_version(session.id) == 1
    assert await decorated.append_events(session.id, [user(session.id, "x")], 1)
    assert (
        await decorated.find_or_create(CreateSessionRequest(id=session.id, user_id="u"))
    ).id == session.id
    assert [s.id for s in await decorated.find_by_user_id("u")] == [session.id]
    assert len(await decorated.get_events(session.id, EventFilter.last_n(1))) == 1
    assert len(await decorated.get_active_messages(session.id)) == 2
    assert (await decorated.get_snapshot(session.id, EventFilter.all())) is not None
    assert len(await decorated.find_events_by_user_id("u")) == 2
    event = await decorated.append_message(session.id, UserMessage(text="m"))
    assert event.session_id == session.id
    turn = await decorated.append_messages(session.id, [UserMessage(text="n")], event_ids=["n"])
    assert [e.id for e in turn] == ["n"]
    # append_message stores through append_event, so the override counts it too;
    # append_messages is one commit of its own
    assert decorated.appends == 2
    assert await decorated.find_by_id(session.id) is not None
    assert await decorated.delete_expired_sessions() == 0
    await decorated.delete(session.id)
    assert await decorated.find_by_id(session.id) is None
