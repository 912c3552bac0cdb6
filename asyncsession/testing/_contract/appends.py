"""The contract kit: appends and versions.

Order, idempotent replays, event-id conflicts, versioned appends and lossless round trips.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ...events import EventType, SessionEvent, utc_now
from ...exceptions import EventIdConflict, SessionNotFound
from ...filters import EventFilter
from ...messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ...service import DefaultSessionService
from ._support import (
    ContractBase,
    assistant,
    event,
    labels,
    new_id,
    user,
)

__all__ = ["AppendsContract"]


class AppendsContract(ContractBase):
    """Contract tests for appends and event versions."""

    async def test_appended_events_are_returned_in_append_order(self) -> None:
        """Events come back in the order they were appended, whatever their timestamps."""
        session = await self.new_session()
        base = utc_now()
        for i, offset in enumerate([5, 1, 4, 2, 3]):
            await self.repo.append_event(
                user(session.id, f"msg-{i + 1}", timestamp=base - timedelta(seconds=offset))
            )
        assert await self.texts(session.id, EventFilter.all()) == [f"msg-{i}" for i in range(1, 6)]

    async def test_append_of_the_same_event_id_is_an_idempotent_replay(self) -> None:
        """Appending an id the session has changes nothing, the version included."""
        session = await self.new_session()
        e = user(session.id, "once")
        await self.repo.append_event(e)
        version = await self.repo.get_event_version(session.id)
        await self.repo.append_event(e)
        await self.repo.append_event(e.model_copy(update={"message": UserMessage(text="changed")}))
        assert await self.texts(session.id, EventFilter.all()) == ["once"]
        assert await self.repo.get_event_version(session.id) == version

    async def test_append_with_an_event_id_of_another_session_is_rejected(self) -> None:
        """An event id used by another session raises and is never silently dropped."""
        a = await self.new_session()
        b = await self.new_session()
        e = user(a.id, "in a")
        await self.repo.append_event(e)
        with pytest.raises(EventIdConflict) as info:
            await self.repo.append_event(e.model_copy(update={"session_id": b.id}))
        assert info.value.owner_session_id == a.id
        assert await self.repo.find_events(b.id, EventFilter.all()) == []
        assert await self.repo.get_event_version(b.id) == 0
        assert await self.texts(a.id, EventFilter.all()) == ["in a"]

    @pytest.mark.parametrize("later", [0, 150], ids=["newest", "long since appended"])
    async def test_an_id_the_service_drew_is_still_refused_in_another_session(
        self, later: int
    ) -> None:
        """An event the service appended with an id of its own drawing (a store may commit such
        an id without checking it), copied into another session, raises, whether it is the
        newest event or ``later`` events have followed it; the other session stays empty."""
        service = DefaultSessionService(self.repo)
        a = await self.new_session()
        b = await self.new_session()
        e = await service.append_message(a.id, UserMessage(text="in a"))
        for i in range(later):
            await service.append_message(a.id, AssistantMessage(text=f"later {i}"))
        version = await self.repo.get_event_version(b.id)
        copy = e.model_copy(update={"session_id": b.id})
        with pytest.raises(EventIdConflict) as info:
            await self.repo.append_event(copy)
        assert info.value.owner_session_id == a.id
        with pytest.raises(EventIdConflict) as info:
            await service.append_events(b.id, [copy])
        assert info.value.owner_session_id == a.id
        assert await self.repo.find_events(b.id, EventFilter.all()) == []
        assert await self.repo.get_event_version(b.id) == version
        texts = await self.texts(a.id, EventFilter.all())
        assert texts[:1] == ["in a"]
        assert len(texts) == 1 + later

    async def test_a_conflicting_id_in_a_batch_writes_nothing(self) -> None:
        """A batch with one event id of another session writes none of its events."""
        a = await self.new_session()
        b = await self.new_session()
        taken = user(a.id, "taken")
        await self.repo.append_event(taken)
        batch = [user(b.id, "fresh"), taken.model_copy(update={"session_id": b.id})]
        with pytest.raises(EventIdConflict):
            await self.repo.append_events(b.id, batch)
        assert await self.repo.find_events(b.id, EventFilter.all()) == []

    async def test_append_to_an_unknown_session_is_rejected(self) -> None:
        """Appending to a session that does not exist raises ``SessionNotFound``."""
        with pytest.raises(SessionNotFound):
            await self.repo.append_event(user(new_id(), "lost"))

    async def test_event_version_starts_at_zero_and_increments_per_new_event(self) -> None:
        """The version is 0 for a new session and moves by one per append."""
        session = await self.new_session()
        assert await self.repo.get_event_version(session.id) == 0
        await self.append(session.id, "one")
        assert await self.repo.get_event_version(session.id) == 1
        await self.append(session.id, "two")
        assert await self.repo.get_event_version(session.id) == 2

    async def test_event_version_of_an_unknown_session_is_zero(self) -> None:
        """An unknown session has version 0."""
        assert await self.repo.get_event_version(new_id()) == 0

    async def test_a_batch_is_one_version_in_order(self) -> None:
        """``append_events`` appends a batch in order and moves the version once."""
        session = await self.new_session()
        batch = [user(session.id, "u"), assistant(session.id, "a"), user(session.id, "u2")]
        assert await self.repo.append_events(session.id, batch)
        assert await self.texts(session.id, EventFilter.all()) == ["u", "a", "u2"]
        assert await self.repo.get_event_version(session.id) == 1

    async def test_a_versioned_append_with_a_stale_version_writes_nothing(self) -> None:
        """A batch whose expected version is stale returns ``False`` and changes nothing."""
        session = await self.new_session()
        await self.append(session.id, "first")
        assert not await self.repo.append_events(session.id, [user(session.id, "late")], 0)
        assert await self.texts(session.id, EventFilter.all()) == ["first"]
        assert await self.repo.get_event_version(session.id) == 1
        assert await self.repo.append_events(session.id, [user(session.id, "now")], 1)
        assert await self.repo.get_event_version(session.id) == 2

    async def test_idempotent_replay_through_append_events(self) -> None:
        """A retried batch (versioned or not) whose events are stored is a no-op that succeeds."""
        session = await self.new_session()
        batch = [user(session.id, "q"), assistant(session.id, "a")]
        assert await self.repo.append_events(session.id, batch, 0)
        assert await self.repo.append_events(session.id, batch, 0)
        assert await self.repo.append_events(session.id, batch)
        assert await self.texts(session.id, EventFilter.all()) == ["q", "a"]
        assert await self.repo.get_event_version(session.id) == 1

    async def test_a_partly_replayed_batch_appends_only_the_new_events(self) -> None:
        """Events of a batch that are stored already are skipped; the rest are appended."""
        session = await self.new_session()
        q = user(session.id, "q")
        await self.repo.append_event(q)
        assert await self.repo.append_events(session.id, [q, assistant(session.id, "a")], 1)
        assert await self.texts(session.id, EventFilter.all()) == ["q", "a"]
        assert await self.repo.get_event_version(session.id) == 2

    async def test_messages_round_trip_losslessly(self) -> None:
        """Every message shape, metadata and timestamps come back exactly as appended."""
        session = await self.new_session()
        stamp = datetime(2026, 6, 1, 12, 30, 15, 250000, tzinfo=UTC)
        events = [
            event(session.id, SystemMessage(text="be brief", role="developer"), timestamp=stamp),
            event(
                session.id,
                UserMessage(
                    text="look",
                    parts=(
                        {"type": "text", "text": "look"},
                        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
                    ),
                    extra={"name": "alice"},
                ),
                metadata={"client": {"ip": "127.0.0.1"}, "n": 1.5},
            ),
            event(
                session.id,
                AssistantMessage(
                    tool_calls=(
                        ToolCall(id="call_1", name="weather", arguments='{"city": "Paris"}'),
                        ToolCall(id="call_2", name="time", arguments="{}"),
                    )
                ),
            ),
            event(
                session.id,
                ToolResponseMessage(
                    responses=(
                        ToolResponse(id="call_1", name="weather", data="sunny"),
                        ToolResponse(id="call_2", name="time", data="noon"),
                    )
                ),
            ),
            event(session.id, AssistantMessage(text="Sunny at noon.", extra={"refusal": None})),
            SessionEvent(
                session_id=session.id,
                type=EventType.of("ACME.AUDIT"),
                payload={"a": [1, {"b": True}]},
            ),
        ]
        assert await self.repo.append_events(session.id, events)
        assert await self.repo.find_events(session.id, EventFilter.all()) == events

    async def test_custom_event_type_with_the_longest_name_round_trips(self) -> None:
        """An event of a custom type whose name has 64 characters comes back with its payload."""
        name = "ACME." + "X" * 59
        assert len(name) == 64
        session = await self.new_session()
        e = SessionEvent(
            session_id=session.id, type=EventType.of(name), payload={"action": "exported"}
        )
        await self.repo.append_event(e)
        stored = await self.repo.find_events(session.id, EventFilter.all())
        assert stored == [e]
        assert stored[0].type == EventType.of(name)
        assert not stored[0].is_message

    async def test_a_read_by_event_type_returns_the_events_of_that_type(self) -> None:
        """``event_types`` selects events of those types, message types included."""
        audit, other = EventType.of("ACME.AUDIT"), EventType.of("ACME.OTHER")
        session = await self.new_session()
        await self.append(session.id, "hello")
        for i in range(3):
            await self.repo.append_event(
                SessionEvent(session_id=session.id, type=audit, payload={"i": i})
            )
            await self.repo.append_event(
                SessionEvent(session_id=session.id, type=other, payload={})
            )
        found = await self.repo.find_events(session.id, EventFilter(event_types=[audit]))
        assert [e.payload for e in found] == [{"i": 0}, {"i": 1}, {"i": 2}]
        newest = await self.repo.find_events(session.id, EventFilter(event_types=[audit], last_n=1))
        assert [e.payload for e in newest] == [{"i": 2}]
        users = await self.repo.find_events(session.id, EventFilter(event_types=[EventType.USER]))
        assert labels(users) == ["hello"]
