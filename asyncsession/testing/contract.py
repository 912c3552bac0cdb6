"""The repository contract kit: the tests every ``SessionRepository`` must pass.

Subclass :class:`SessionRepositoryContract` in a test module and provide a ``repository``
fixture; pytest collects the subclass (its name starts with ``Test``) and runs every contract
test against your store::

    import pytest
    from asyncsession.testing.contract import SessionRepositoryContract

    class TestMyStore(SessionRepositoryContract):
        @pytest.fixture
        async def repository(self):
            store = MyStore(...)
            yield store
            await store.aclose()

Every test uses fresh random ids, so the fixture may hand out one shared store. The kit needs
``pytest`` and ``pytest-asyncio``; this is the only module of asyncsession that imports pytest.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ..events import COMPACTION_SOURCE, SYNTHETIC, EventType, Session, SessionEvent, utc_now
from ..exceptions import AccessDenied, EventIdConflict, InvalidCompactionPlan, SessionNotFound
from ..filters import EventFilter, MatchMode
from ..messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..plans import CompactionPlan, Insert
from ..repository._protocol import SessionRepository
from ..repository._turn import start_turn

__all__ = [
    "SHADOW_PROMPT",
    "SessionRepositoryContract",
    "assistant",
    "event",
    "label",
    "labels",
    "summary_turn",
    "synthetic",
    "system",
    "user",
]

SHADOW_PROMPT = "Summarize the conversation we had so far."


def _id(prefix: str = "s") -> str:
    return f"{prefix}-{uuid.uuid4()}"


def event(session_id: str, message: Message, **values: Any) -> SessionEvent:
    """A message event of ``session_id``."""
    return SessionEvent(session_id=session_id, message=message, **values)


def user(session_id: str, text: str, **values: Any) -> SessionEvent:
    """A user message event."""
    return event(session_id, UserMessage(text=text), **values)


def assistant(session_id: str, text: str, **values: Any) -> SessionEvent:
    """An assistant message event."""
    return event(session_id, AssistantMessage(text=text), **values)


def system(session_id: str, text: str) -> SessionEvent:
    """A stored system message event."""
    return event(session_id, SystemMessage(text=text))


def synthetic(session_id: str, message: Message, timestamp: datetime | None = None) -> SessionEvent:
    """A synthetic event, as compaction writes it."""
    return SessionEvent(
        session_id=session_id,
        message=message,
        timestamp=timestamp or utc_now(),
        metadata={SYNTHETIC: True, COMPACTION_SOURCE: "recursive-summarization"},
    )


def summary_turn(session_id: str, text: str) -> list[SessionEvent]:
    """A synthetic shadow prompt and summary sharing one timestamp."""
    now = utc_now()
    return [
        synthetic(session_id, UserMessage(text=SHADOW_PROMPT), now),
        synthetic(session_id, AssistantMessage(text=text), now),
    ]


def label(e: SessionEvent) -> str:
    """``Σ?`` for a synthetic user message, ``Σ:<text>`` for other synthetic events, else text."""
    if e.is_synthetic:
        return "Σ?" if e.type == EventType.USER else f"Σ:{e.text}"
    return str(e.text)


def labels(events: Sequence[SessionEvent]) -> list[str]:
    """The labels of events, in order."""
    return [label(e) for e in events]


class SessionRepositoryContract:
    """The contract tests. Subclass with a ``repository`` fixture returning your store."""

    pytestmark = pytest.mark.asyncio

    # --- helpers ---------------------------------------------------------------------------------

    async def new_session(
        self, repo: SessionRepository, user_id: str = "alice", **values: Any
    ) -> Session:
        """Save a session with a random id."""
        session = Session(id=_id(), user_id=user_id, **values)
        await repo.save(session)
        return session

    async def append(
        self, repo: SessionRepository, session_id: str, *texts: str
    ) -> list[SessionEvent]:
        """Append user messages with these texts, one per call."""
        events = [user(session_id, text) for text in texts]
        for e in events:
            await repo.append_event(e)
        return events

    async def texts(
        self, repo: SessionRepository, session_id: str, filter: EventFilter
    ) -> list[str]:
        """The labels of the events a read returns."""
        return labels(await repo.find_events(session_id, filter))

    async def apply(self, repo: SessionRepository, session_id: str, plan: CompactionPlan) -> None:
        """Apply a plan at the current version and require it to succeed."""
        version = await repo.get_event_version(session_id)
        assert await repo.apply_compaction(session_id, plan, version)

    # --- sessions --------------------------------------------------------------------------------

    async def test_save_and_find_by_id_round_trip(self, repository: SessionRepository) -> None:
        """A saved session is found by id with all its fields."""
        session = Session(
            id=_id(),
            user_id="alice",
            created_at=datetime(2026, 1, 1, 12, 0, 0, 123000, tzinfo=UTC),
            expires_at=datetime(2026, 3, 1, tzinfo=UTC),
            metadata={"model": "gpt", "tags": ["a", "b"], "n": 3, "nested": {"x": None}},
        )
        await repository.save(session)
        assert await repository.find_by_id(session.id) == session

    async def test_find_by_id_returns_none_for_an_unknown_session(
        self, repository: SessionRepository
    ) -> None:
        """An unknown id finds nothing."""
        assert await repository.find_by_id(_id()) is None

    async def test_find_by_user_id_returns_only_that_users_sessions(
        self, repository: SessionRepository
    ) -> None:
        """Sessions are found by their owner only."""
        alice, bob = _id("alice"), _id("bob")
        a1 = await self.new_session(repository, alice)
        a2 = await self.new_session(repository, alice)
        b1 = await self.new_session(repository, bob)
        assert {s.id for s in await repository.find_by_user_id(alice)} == {a1.id, a2.id}
        assert [s.id for s in await repository.find_by_user_id(bob)] == [b1.id]

    async def test_save_if_absent_never_overwrites_an_existing_session(
        self, repository: SessionRepository
    ) -> None:
        """A second insert of the same id fails and leaves the first session as it was."""
        session_id = _id()
        assert await repository.save_if_absent(Session(id=session_id, user_id="first"))
        assert not await repository.save_if_absent(Session(id=session_id, user_id="second"))
        stored = await repository.find_by_id(session_id)
        assert stored is not None
        assert stored.user_id == "first"

    async def test_concurrent_save_if_absent_of_the_same_id_has_exactly_one_winner(
        self, repository: SessionRepository
    ) -> None:
        """Of many concurrent creators of one id, exactly one inserts."""
        session_id = _id()
        results = await asyncio.gather(
            *(repository.save_if_absent(Session(id=session_id, user_id=f"u{i}")) for i in range(32))
        )
        assert results.count(True) == 1
        stored = await repository.find_by_id(session_id)
        assert stored is not None
        assert stored.user_id == f"u{results.index(True)}"

    async def test_save_of_an_existing_session_keeps_created_at_events_and_version(
        self, repository: SessionRepository
    ) -> None:
        """An update replaces owner, expiry and metadata; keeps creation time, log, version."""
        created = datetime(2026, 1, 1, tzinfo=UTC)
        session = Session(id=_id(), user_id="alice", created_at=created)
        await repository.save(session)
        await self.append(repository, session.id, "kept")
        expires = datetime(2027, 1, 1, tzinfo=UTC)
        updated = Session(
            id=session.id,
            user_id="bob",
            created_at=created + timedelta(days=5),
            expires_at=expires,
            metadata={"key": "value"},
        )
        returned = await repository.save(updated)
        stored = await repository.find_by_id(session.id)
        for s in (returned, stored):
            assert s is not None
            assert s.created_at == created
            assert (s.user_id, s.expires_at, s.metadata) == ("bob", expires, {"key": "value"})
        assert await self.texts(repository, session.id, EventFilter.all()) == ["kept"]
        assert await repository.get_event_version(session.id) == 1

    async def test_delete_removes_the_session_and_its_events(
        self, repository: SessionRepository
    ) -> None:
        """After delete, neither the session nor its events are found; deleting again is fine."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "a", "b")
        await repository.delete(session.id)
        assert await repository.find_by_id(session.id) is None
        assert await repository.find_events(session.id, EventFilter.all()) == []
        assert await repository.get_event_version(session.id) == 0
        await repository.delete(session.id)

    async def test_a_deleted_sessions_event_ids_can_be_used_again(
        self, repository: SessionRepository
    ) -> None:
        """Deleting a session frees its event ids."""
        first = await self.new_session(repository)
        e = user(first.id, "hello")
        await repository.append_event(e)
        await repository.delete(first.id)
        second = await self.new_session(repository)
        await repository.append_event(e.model_copy(update={"session_id": second.id}))
        assert await self.texts(repository, second.id, EventFilter.all()) == ["hello"]

    async def test_delete_expired_sessions_deletes_only_expired_sessions_and_their_events(
        self, repository: SessionRepository
    ) -> None:
        """Only sessions that expired strictly before the instant go, with their events."""
        now = utc_now()
        expired = await self.new_session(repository, expires_at=now - timedelta(seconds=60))
        extended = await self.new_session(repository, expires_at=now + timedelta(seconds=60))
        default = await self.new_session(repository)
        never = await self.new_session(repository, expires_at=None)
        exactly = await self.new_session(repository, expires_at=now)
        await self.append(repository, expired.id, "old")
        await self.append(repository, extended.id, "new")
        assert await repository.delete_expired_sessions(now) >= 1
        assert await repository.find_by_id(expired.id) is None
        assert await repository.find_events(expired.id, EventFilter.all()) == []
        for kept in (extended, default, never, exactly):
            assert await repository.find_by_id(kept.id) is not None
        assert await self.texts(repository, extended.id, EventFilter.all()) == ["new"]

    async def test_a_ttl_extended_before_the_sweep_wins(
        self, repository: SessionRepository
    ) -> None:
        """A session whose expiry was moved past the sweep's instant is kept."""
        now = utc_now()
        session = await self.new_session(repository, expires_at=now - timedelta(seconds=1))
        await repository.save(session.model_copy(update={"expires_at": now + timedelta(hours=1)}))
        await repository.delete_expired_sessions(now)
        assert await repository.find_by_id(session.id) is not None

    # --- appends ---------------------------------------------------------------------------------

    async def test_appended_events_are_returned_in_append_order(
        self, repository: SessionRepository
    ) -> None:
        """Events come back in the order they were appended, whatever their timestamps."""
        session = await self.new_session(repository)
        base = utc_now()
        for i, offset in enumerate([5, 1, 4, 2, 3]):
            await repository.append_event(
                user(session.id, f"msg-{i + 1}", timestamp=base - timedelta(seconds=offset))
            )
        assert await self.texts(repository, session.id, EventFilter.all()) == [
            f"msg-{i}" for i in range(1, 6)
        ]

    async def test_append_of_the_same_event_id_is_an_idempotent_replay(
        self, repository: SessionRepository
    ) -> None:
        """Appending an id the session has changes nothing, the version included."""
        session = await self.new_session(repository)
        e = user(session.id, "once")
        await repository.append_event(e)
        version = await repository.get_event_version(session.id)
        await repository.append_event(e)
        await repository.append_event(e.model_copy(update={"message": UserMessage(text="changed")}))
        assert await self.texts(repository, session.id, EventFilter.all()) == ["once"]
        assert await repository.get_event_version(session.id) == version

    async def test_append_with_an_event_id_of_another_session_is_rejected(
        self, repository: SessionRepository
    ) -> None:
        """An event id used by another session raises and is never silently dropped."""
        a = await self.new_session(repository)
        b = await self.new_session(repository)
        e = user(a.id, "in a")
        await repository.append_event(e)
        with pytest.raises(EventIdConflict) as info:
            await repository.append_event(e.model_copy(update={"session_id": b.id}))
        assert info.value.owner_session_id == a.id
        assert await repository.find_events(b.id, EventFilter.all()) == []
        assert await repository.get_event_version(b.id) == 0
        assert await self.texts(repository, a.id, EventFilter.all()) == ["in a"]

    async def test_a_conflicting_id_in_a_batch_writes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """A batch with one event id of another session writes none of its events."""
        a = await self.new_session(repository)
        b = await self.new_session(repository)
        taken = user(a.id, "taken")
        await repository.append_event(taken)
        batch = [user(b.id, "fresh"), taken.model_copy(update={"session_id": b.id})]
        with pytest.raises(EventIdConflict):
            await repository.append_events(b.id, batch)
        assert await repository.find_events(b.id, EventFilter.all()) == []

    async def test_append_to_an_unknown_session_is_rejected(
        self, repository: SessionRepository
    ) -> None:
        """Appending to a session that does not exist raises ``SessionNotFound``."""
        with pytest.raises(SessionNotFound):
            await repository.append_event(user(_id(), "lost"))

    async def test_event_version_starts_at_zero_and_increments_per_new_event(
        self, repository: SessionRepository
    ) -> None:
        """The version is 0 for a new session and moves by one per append."""
        session = await self.new_session(repository)
        assert await repository.get_event_version(session.id) == 0
        await self.append(repository, session.id, "one")
        assert await repository.get_event_version(session.id) == 1
        await self.append(repository, session.id, "two")
        assert await repository.get_event_version(session.id) == 2

    async def test_event_version_of_an_unknown_session_is_zero(
        self, repository: SessionRepository
    ) -> None:
        """An unknown session has version 0."""
        assert await repository.get_event_version(_id()) == 0

    async def test_a_batch_is_one_version_in_order(self, repository: SessionRepository) -> None:
        """``append_events`` appends a batch in order and moves the version once."""
        session = await self.new_session(repository)
        batch = [user(session.id, "u"), assistant(session.id, "a"), user(session.id, "u2")]
        assert await repository.append_events(session.id, batch)
        assert await self.texts(repository, session.id, EventFilter.all()) == ["u", "a", "u2"]
        assert await repository.get_event_version(session.id) == 1

    async def test_a_versioned_append_with_a_stale_version_writes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """A batch whose expected version is stale returns ``False`` and changes nothing."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "first")
        assert not await repository.append_events(session.id, [user(session.id, "late")], 0)
        assert await self.texts(repository, session.id, EventFilter.all()) == ["first"]
        assert await repository.get_event_version(session.id) == 1
        assert await repository.append_events(session.id, [user(session.id, "now")], 1)
        assert await repository.get_event_version(session.id) == 2

    async def test_idempotent_replay_through_append_events(
        self, repository: SessionRepository
    ) -> None:
        """A retried batch (versioned or not) whose events are stored is a no-op that succeeds."""
        session = await self.new_session(repository)
        batch = [user(session.id, "q"), assistant(session.id, "a")]
        assert await repository.append_events(session.id, batch, 0)
        assert await repository.append_events(session.id, batch, 0)
        assert await repository.append_events(session.id, batch)
        assert await self.texts(repository, session.id, EventFilter.all()) == ["q", "a"]
        assert await repository.get_event_version(session.id) == 1

    async def test_a_partly_replayed_batch_appends_only_the_new_events(
        self, repository: SessionRepository
    ) -> None:
        """Events of a batch that are stored already are skipped; the rest are appended."""
        session = await self.new_session(repository)
        q = user(session.id, "q")
        await repository.append_event(q)
        assert await repository.append_events(session.id, [q, assistant(session.id, "a")], 1)
        assert await self.texts(repository, session.id, EventFilter.all()) == ["q", "a"]
        assert await repository.get_event_version(session.id) == 2

    async def test_versioned_append_has_exactly_one_concurrent_winner(
        self, repository: SessionRepository
    ) -> None:
        """Of 50 concurrent writers with one expected version, exactly one appends, each round."""
        session = await self.new_session(repository)
        for round_ in range(10):
            version = await repository.get_event_version(session.id)
            results = await asyncio.gather(
                *(
                    repository.append_events(
                        session.id, [user(session.id, f"r{round_}-w{i}")], version
                    )
                    for i in range(50)
                )
            )
            assert results.count(True) == 1
            assert await repository.get_event_version(session.id) == version + 1
        assert len(await repository.find_events(session.id, EventFilter.all())) == 10

    async def test_the_claim_loop_gives_exactly_one_holder(
        self, repository: SessionRepository
    ) -> None:
        """The seed's "state as the newest event" claim loop: of N claimers, exactly one holds."""
        claim = EventType.of("TEST.CLAIM")
        session = await self.new_session(repository)
        newest_claim = EventFilter(event_types=[claim], last_n=1)

        async def try_claim(me: str) -> bool:
            for _ in range(100):
                version = await repository.get_event_version(session.id)
                current = await repository.find_events(session.id, newest_claim)
                if current and current[-1].payload != {"owner": None}:
                    return False
                e = SessionEvent(session_id=session.id, type=claim, payload={"owner": me})
                if await repository.append_events(session.id, [e], version):
                    return True
            raise AssertionError("the log kept changing")

        async def noise() -> None:
            for i in range(20):
                await repository.append_event(user(session.id, f"noise-{i}"))
                await asyncio.sleep(0)

        results = await asyncio.gather(*(try_claim(f"c{i}") for i in range(24)), noise())
        winners = [r for r in results[:-1] if r]
        assert len(winners) == 1
        claims = await repository.find_events(session.id, EventFilter(event_types=[claim]))
        assert len(claims) == 1

    async def test_many_concurrent_appenders_lose_and_duplicate_nothing(
        self, repository: SessionRepository
    ) -> None:
        """32 tasks appending 20 events each: all 640 stored once, each task's in its order."""
        session = await self.new_session(repository)

        async def writer(w: int) -> None:
            for i in range(20):
                await repository.append_event(user(session.id, f"w{w}-{i}"))

        await asyncio.gather(*(writer(w) for w in range(32)))
        texts = await self.texts(repository, session.id, EventFilter.all())
        assert len(texts) == len(set(texts)) == 640
        for w in range(32):
            mine = [t for t in texts if t.startswith(f"w{w}-")]
            assert mine == [f"w{w}-{i}" for i in range(20)]
        assert await repository.get_event_version(session.id) == 640

    async def test_messages_round_trip_losslessly(self, repository: SessionRepository) -> None:
        """Every message shape, metadata and timestamps come back exactly as appended."""
        session = await self.new_session(repository)
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
        assert await repository.append_events(session.id, events)
        assert await repository.find_events(session.id, EventFilter.all()) == events

    async def test_custom_event_type_with_the_longest_name_round_trips(
        self, repository: SessionRepository
    ) -> None:
        """An event of a custom type whose name has 64 characters comes back with its payload."""
        name = "ACME." + "X" * 59
        assert len(name) == 64
        session = await self.new_session(repository)
        e = SessionEvent(
            session_id=session.id, type=EventType.of(name), payload={"action": "exported"}
        )
        await repository.append_event(e)
        stored = await repository.find_events(session.id, EventFilter.all())
        assert stored == [e]
        assert stored[0].type == EventType.of(name)
        assert not stored[0].is_message

    async def test_a_read_by_event_type_returns_the_events_of_that_type(
        self, repository: SessionRepository
    ) -> None:
        """``event_types`` selects events of those types, message types included."""
        audit, other = EventType.of("ACME.AUDIT"), EventType.of("ACME.OTHER")
        session = await self.new_session(repository)
        await self.append(repository, session.id, "hello")
        for i in range(3):
            await repository.append_event(
                SessionEvent(session_id=session.id, type=audit, payload={"i": i})
            )
            await repository.append_event(
                SessionEvent(session_id=session.id, type=other, payload={})
            )
        found = await repository.find_events(session.id, EventFilter(event_types=[audit]))
        assert [e.payload for e in found] == [{"i": 0}, {"i": 1}, {"i": 2}]
        newest = await repository.find_events(
            session.id, EventFilter(event_types=[audit], last_n=1)
        )
        assert [e.payload for e in newest] == [{"i": 2}]
        users = await repository.find_events(session.id, EventFilter(event_types=[EventType.USER]))
        assert labels(users) == ["hello"]

    # --- reads -----------------------------------------------------------------------------------

    async def test_find_events_for_an_unknown_session_returns_an_empty_list(
        self, repository: SessionRepository
    ) -> None:
        """Reading an unknown session returns nothing and does not raise."""
        assert await repository.find_events(_id(), EventFilter.last_n(3)) == []

    async def test_message_types_filter_keeps_only_those_types(
        self, repository: SessionRepository
    ) -> None:
        """``message_types`` selects messages of those roles."""
        session = await self.new_session(repository)
        await repository.append_events(
            session.id, [user(session.id, "q"), assistant(session.id, "a"), user(session.id, "q2")]
        )
        only = EventFilter(message_types=[MessageType.ASSISTANT])
        assert await self.texts(repository, session.id, only) == ["a"]

    async def test_time_range_filter_is_inclusive(self, repository: SessionRepository) -> None:
        """``from_`` and ``to`` include events exactly at their instants."""
        session = await self.new_session(repository)
        base = datetime(2026, 5, 1, tzinfo=UTC)
        for i in range(4):
            await repository.append_event(
                user(session.id, f"t{i}", timestamp=base + timedelta(seconds=60 * i))
            )
        window = EventFilter(from_=base + timedelta(seconds=60), to=base + timedelta(seconds=120))
        assert await self.texts(repository, session.id, window) == ["t1", "t2"]

    async def test_exclude_synthetic_hides_summary_events(
        self, repository: SessionRepository
    ) -> None:
        """``real_only`` leaves out synthetic events; ``all`` keeps them."""
        session = await self.new_session(repository)
        await repository.append_event(user(session.id, "real"))
        await repository.append_event(synthetic(session.id, AssistantMessage(text="summary")))
        assert await self.texts(repository, session.id, EventFilter.real_only()) == ["real"]
        assert await self.texts(repository, session.id, EventFilter.all()) == ["real", "Σ:summary"]

    async def test_exclude_archived_hides_archived_events(
        self, repository: SessionRepository
    ) -> None:
        """Archived events are hidden from the active view and kept in the whole log."""
        session = await self.new_session(repository)
        old, _new = await self.append(repository, session.id, "old", "new")
        await self.apply(repository, session.id, CompactionPlan(archive_ids=frozenset({old.id})))
        assert await self.texts(repository, session.id, EventFilter.active()) == ["new"]
        assert await self.texts(repository, session.id, EventFilter(exclude_archived=True)) == [
            "new"
        ]
        assert await self.texts(repository, session.id, EventFilter.all()) == ["old", "new"]

    async def test_keyword_search_is_case_insensitive_and_matches_wildcard_characters_literally(
        self, repository: SessionRepository
    ) -> None:
        """Keywords match literally and in any case; regex and LIKE metacharacters mean nothing."""
        session = await self.new_session(repository)
        await self.append(
            repository,
            session.id,
            "100% done",
            "1000 done",
            "snake_case",
            "snakeXcase",
            "a!b",
            "ab",
            "Hello World",
            "a.c",
            "abc",
            "x+y",
            "(paren)",
            "[br]",
            "a*",
            "back\\slash",
            "$dollar",
            "^caret",
        )
        cases = {
            "100%": ["100% done"],
            "_case": ["snake_case"],
            "a!b": ["a!b"],
            "hello": ["Hello World"],
            "a.c": ["a.c"],
            "x+y": ["x+y"],
            "(paren)": ["(paren)"],
            "[br]": ["[br]"],
            "a*": ["a*"],
            "k\\s": ["back\\slash"],
            "$d": ["$dollar"],
            "^c": ["^caret"],
            "WORLD": ["Hello World"],
        }
        for keyword, expected in cases.items():
            assert (
                await self.texts(repository, session.id, EventFilter(keyword=keyword)) == expected
            ), keyword

    async def test_keywords_search_combines_terms_with_any_or_all(
        self, repository: SessionRepository
    ) -> None:
        """Several keywords match any or all of the terms, literally."""
        session = await self.new_session(repository)
        await self.append(
            repository, session.id, "100% done", "snake_case", "100% snake_case", "other"
        )
        any_ = EventFilter.keywords_search(["0%", "e_c"], MatchMode.ANY)
        all_ = EventFilter.keywords_search(["0%", "E_C"], MatchMode.ALL)
        assert await self.texts(repository, session.id, any_) == [
            "100% done",
            "snake_case",
            "100% snake_case",
        ]
        assert await self.texts(repository, session.id, all_) == ["100% snake_case"]

    async def test_pattern_search_matches_with_the_regex(
        self, repository: SessionRepository
    ) -> None:
        """``pattern`` is a Python regex searched in the text."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "msg-1", "msg-2", "msg-13")
        found = await self.texts(repository, session.id, EventFilter.pattern_search(r"^msg-1\d?$"))
        assert found == ["msg-1", "msg-13"]

    async def test_text_searches_skip_events_without_text(
        self, repository: SessionRepository
    ) -> None:
        """Tool results and custom events have no text, so searches never return them."""
        session = await self.new_session(repository)
        await repository.append_events(
            session.id,
            [
                event(
                    session.id,
                    ToolResponseMessage(responses=(ToolResponse(id="c", name="t", data="needle"),)),
                ),
                SessionEvent(
                    session_id=session.id, type=EventType.of("ACME.X"), payload={"t": "needle"}
                ),
                user(session.id, "a needle"),
            ],
        )
        assert await self.texts(repository, session.id, EventFilter(keyword="needle")) == [
            "a needle"
        ]

    async def test_last_n_returns_the_newest_events_in_chronological_order(
        self, repository: SessionRepository
    ) -> None:
        """``last_n`` returns the newest events, oldest first."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, *(f"msg-{i}" for i in range(1, 6)))
        assert await self.texts(repository, session.id, EventFilter.last_n(2)) == ["msg-4", "msg-5"]
        assert await self.texts(repository, session.id, EventFilter.last_n(10)) == [
            f"msg-{i}" for i in range(1, 6)
        ]

    async def test_last_n_is_extended_to_the_start_of_its_turn(
        self, repository: SessionRepository
    ) -> None:
        """A window that would start mid-turn reaches back to the turn's user message."""
        s = (await self.new_session(repository)).id
        call = AssistantMessage(tool_calls=(ToolCall(id="c1", name="t"),))
        result = ToolResponseMessage(responses=(ToolResponse(id="c1", name="t", data="r"),))
        await repository.append_events(
            s,
            [
                user(s, "U1"),
                assistant(s, "A1"),
                user(s, "U2"),
                event(s, call),
                event(s, result),
                assistant(s, "A2'"),
            ],
        )
        window = await repository.find_events(s, EventFilter.last_n(2))
        assert [e.type for e in window] == [
            EventType.USER,
            EventType.ASSISTANT,
            EventType.TOOL,
            EventType.ASSISTANT,
        ]
        assert labels(window)[0] == "U2"
        assert await self.texts(repository, s, EventFilter.last_n(4)) == [
            "U2",
            "None",
            "None",
            "A2'",
        ]
        assert await self.texts(repository, s, EventFilter.last_n(5)) == [
            "U1",
            "A1",
            "U2",
            "None",
            "None",
            "A2'",
        ]

    async def test_last_n_is_not_extended_for_text_searches_pages_or_without_a_user_message(
        self, repository: SessionRepository
    ) -> None:
        """Text searches, pages, and windows with no earlier user message stay plain."""
        s = (await self.new_session(repository)).id
        await repository.append_events(
            s, [user(s, "U1 x"), assistant(s, "A1 x"), assistant(s, "A2 x"), assistant(s, "A3 x")]
        )
        assert await self.texts(repository, s, EventFilter(keyword="x", last_n=1)) == ["A3 x"]
        assert await self.texts(repository, s, EventFilter(page=1, page_size=2)) == ["A2 x", "A3 x"]
        only_assistant = EventFilter(message_types=[MessageType.ASSISTANT], last_n=2)
        assert await self.texts(repository, s, only_assistant) == ["A2 x", "A3 x"]
        t = (await self.new_session(repository)).id
        await repository.append_events(
            t, [system(t, "sys"), assistant(t, "A1"), assistant(t, "A2")]
        )
        assert await self.texts(repository, t, EventFilter.last_n(1)) == ["A2"]

    async def test_a_turn_aware_window_respects_the_other_criteria(
        self, repository: SessionRepository
    ) -> None:
        """The extension reaches back only over events that match the filter."""
        s = (await self.new_session(repository)).id
        await repository.append_events(
            s,
            [
                user(s, "U1"),
                assistant(s, "A1"),
                user(s, "U2"),
                assistant(s, "A2a"),
                assistant(s, "A2b"),
            ],
        )
        old = (await repository.find_events(s, EventFilter.all()))[2]
        await self.apply(repository, s, CompactionPlan(archive_ids=frozenset({old.id})))
        assert await self.texts(repository, s, EventFilter(exclude_archived=True, last_n=2)) == [
            "U1",
            "A1",
            "A2a",
            "A2b",
        ]

    async def test_pages_are_zero_indexed_in_chronological_order(
        self, repository: SessionRepository
    ) -> None:
        """Pages cut the matching events in order, from page 0."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, *(f"msg-{i}" for i in range(1, 6)))
        pages = [
            await self.texts(repository, session.id, EventFilter(page=p, page_size=2))
            for p in range(4)
        ]
        assert pages == [["msg-1", "msg-2"], ["msg-3", "msg-4"], ["msg-5"], []]
        assert await self.texts(repository, session.id, EventFilter(page_size=3)) == [
            "msg-1",
            "msg-2",
            "msg-3",
        ]

    async def test_a_huge_page_number_returns_an_empty_page(
        self, repository: SessionRepository
    ) -> None:
        """A page far past the end is empty, with no overflow."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "only")
        assert (
            await repository.find_events(session.id, EventFilter(page=2**31 - 1, page_size=10))
            == []
        )
        assert (
            await repository.find_events(session.id, EventFilter(page=2**62, page_size=2**31)) == []
        )

    async def test_find_events_by_user_id_orders_by_timestamp_across_sessions_and_pages(
        self, repository: SessionRepository
    ) -> None:
        """A user's events from all sessions come ordered by time, windowed plainly."""
        owner, other = _id("u"), _id("u")
        first = await self.new_session(repository, owner)
        second = await self.new_session(repository, owner)
        third = await self.new_session(repository, other)
        base = datetime(2026, 2, 1, tzinfo=UTC)
        for session, text, minute in [
            (first, "first-1", 0),
            (second, "second-1", 1),
            (first, "first-2", 2),
            (second, "second-2", 3),
            (third, "other", 1),
        ]:
            await repository.append_event(
                user(session.id, text, timestamp=base + timedelta(minutes=minute))
            )
        all_ = await repository.find_events_by_user_id(owner, EventFilter.all())
        assert labels(all_) == ["first-1", "second-1", "first-2", "second-2"]
        page = await repository.find_events_by_user_id(owner, EventFilter(page=1, page_size=3))
        assert labels(page) == ["second-2"]
        found = await repository.find_events_by_user_id(owner, EventFilter.keyword_search("SECOND"))
        assert labels(found) == ["second-1", "second-2"]
        newest = await repository.find_events_by_user_id(owner, EventFilter.last_n(2))
        assert labels(newest) == ["first-2", "second-2"]
        assert await repository.find_events_by_user_id(_id("nobody"), EventFilter.all()) == []

    async def test_the_active_view_leaves_out_custom_events_unless_asked(
        self, repository: SessionRepository
    ) -> None:
        """The active view holds message events; custom ones only if asked, after compaction."""
        audit = EventType.of("ACME.AUDIT")
        s = (await self.new_session(repository)).id
        u1, a1 = user(s, "u1"), assistant(s, "a1")
        await repository.append_events(
            s, [u1, SessionEvent(session_id=s, type=audit, payload={"n": 1}), a1]
        )
        await repository.append_events(s, [user(s, "u2"), assistant(s, "a2")])
        assert await self.texts(repository, s, EventFilter.active()) == ["u1", "a1", "u2", "a2"]
        asked = EventFilter.active().merge(EventFilter(event_types=[audit]))
        assert [e.payload for e in await repository.find_events(s, asked)] == [{"n": 1}]
        await self.apply(repository, s, CompactionPlan(archive_ids=frozenset({u1.id, a1.id})))
        assert await repository.find_events(s, asked) == []
        await repository.append_event(SessionEvent(session_id=s, type=audit, payload={"n": 2}))
        assert [e.payload for e in await repository.find_events(s, asked)] == [{"n": 2}]
        assert len(await repository.find_events(s, EventFilter(event_types=[audit]))) == 2

    async def test_a_snapshot_reads_the_session_its_version_and_events(
        self, repository: SessionRepository
    ) -> None:
        """``read_snapshot`` returns session, version and window; ``None`` if unknown."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "a", "b", "c")
        snapshot = await repository.read_snapshot(session.id, EventFilter.last_n(2))
        assert snapshot is not None
        assert snapshot.session == session
        assert snapshot.version == 3
        assert labels(snapshot.events) == ["b", "c"]
        assert await repository.read_snapshot(_id(), EventFilter.all()) is None

    # --- starting a turn ---------------------------------------------------------------------
    # Through ``asyncsession.repository.start_turn``: a store's own ``start_turn`` if it has one
    # (``TurnRepository``), else the fallback over the protocol. Either must behave the same.

    async def test_a_turn_stores_its_events_and_returns_the_window_before_them(
        self, repository: SessionRepository
    ) -> None:
        """The window excludes the turn's events; the version is the one after the append; a
        replay appends nothing and returns the same window."""
        session = await self.new_session(repository)
        s = session.id
        await self.append(repository, s, "a", "b")
        question = user(s, "q")
        snapshot = await start_turn(repository, s, [question], EventFilter.last_n(5))
        assert snapshot.session == session
        assert labels(snapshot.events) == ["a", "b"]
        assert snapshot.version == 3
        again = await start_turn(repository, s, [question], EventFilter.last_n(5))
        assert labels(again.events) == ["a", "b"]
        assert again.version == 3
        assert await self.texts(repository, s, EventFilter.all()) == ["a", "b", "q"]

    async def test_a_turn_creates_a_missing_session_with_its_events(
        self, repository: SessionRepository
    ) -> None:
        """With ``create``, a missing session is made holding the turn's events (empty window,
        version 1); an existing one is used as it is."""
        new = Session(id=_id(), user_id="alice", metadata={"topic": "x"})
        first = user(new.id, "first")
        snapshot = await start_turn(repository, new.id, [first], EventFilter.all(), create=new)
        assert snapshot.session == new
        assert snapshot.events == ()
        assert snapshot.version == 1
        assert await repository.find_by_id(new.id) == new
        other = Session(id=new.id, user_id="alice", metadata={"topic": "other"})
        snapshot = await start_turn(
            repository, new.id, [user(new.id, "second")], EventFilter.all(), create=other
        )
        assert snapshot.session == new
        assert labels(snapshot.events) == ["first"]
        assert await self.texts(repository, new.id, EventFilter.all()) == ["first", "second"]

    async def test_a_refused_turn_writes_nothing(self, repository: SessionRepository) -> None:
        """Another owner, an unknown session without ``create``, or an id of another session:
        an error, and nothing stored (no session created either)."""
        session = await self.new_session(repository, user_id="alice")
        s = session.id
        with pytest.raises(AccessDenied):
            await start_turn(repository, s, [user(s, "x")], EventFilter.all(), user_id="bob")
        missing = _id()
        with pytest.raises(SessionNotFound):
            await start_turn(repository, missing, [user(missing, "x")], EventFilter.all())
        taken = user(s, "taken")
        await repository.append_event(taken)
        new = Session(id=_id(), user_id="alice")
        stolen = taken.model_copy(update={"session_id": new.id})
        with pytest.raises(EventIdConflict):
            await start_turn(repository, new.id, [stolen], EventFilter.all(), create=new)
        assert await self.texts(repository, s, EventFilter.all()) == ["taken"]
        assert await repository.find_by_id(missing) is None
        assert await repository.find_by_id(new.id) is None

    async def test_concurrent_first_turns_create_one_session_and_lose_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Twenty first turns racing on one new session id: one session, every message once."""
        s = _id()

        async def turn(i: int) -> None:
            create = Session(id=s, user_id="alice")
            await start_turn(
                repository, s, [user(s, f"q{i}")], EventFilter.last_n(3), create=create
            )

        await asyncio.gather(*(turn(i) for i in range(20)))
        assert sorted(await self.texts(repository, s, EventFilter.all())) == sorted(
            f"q{i}" for i in range(20)
        )
        assert await repository.get_event_version(s) == 20

    # --- compaction ------------------------------------------------------------------------------

    async def test_archiving_flags_events_in_place_and_increments_the_version(
        self, repository: SessionRepository
    ) -> None:
        """Archived events keep their place; the version moves by one."""
        s = (await self.new_session(repository)).id
        u1, a1, _u2, _a2 = await self.append(repository, s, "u1", "a1", "u2", "a2")
        version = await repository.get_event_version(s)
        assert await repository.apply_compaction(
            s, CompactionPlan(archive_ids=frozenset({u1.id, a1.id})), version
        )
        assert await repository.get_event_version(s) == version + 1
        log = await repository.find_events(s, EventFilter.all())
        assert [(e.text, e.archived) for e in log] == [
            ("u1", True),
            ("a1", True),
            ("u2", False),
            ("a2", False),
        ]
        assert await self.texts(repository, s, EventFilter.active()) == ["u2", "a2"]

    async def test_a_replaced_summary_is_archived_in_place_not_removed(
        self, repository: SessionRepository
    ) -> None:
        """Archiving a synthetic summary keeps it in the log and hides it from the active view."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, "u1")
        summary = synthetic(s, AssistantMessage(text="old summary"))
        await repository.append_event(summary)
        await self.append(repository, s, "u2")
        await self.apply(repository, s, CompactionPlan(archive_ids=frozenset({summary.id})))
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "Σ:old summary", "u2"]
        assert await self.texts(repository, s, EventFilter.active()) == ["u1", "u2"]

    async def test_an_insert_goes_immediately_before_its_anchor(
        self, repository: SessionRepository
    ) -> None:
        """New events land right before their anchor event."""
        s = (await self.new_session(repository)).id
        u1, a1, u2, _a2 = await self.append(repository, s, "u1", "a1", "u2", "a2")
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id, a1.id}),
            inserts=(Insert.before(u2.id, [synthetic(s, AssistantMessage(text="summary"))]),),
        )
        await self.apply(repository, s, plan)
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            "a1",
            "Σ:summary",
            "u2",
            "a2",
        ]
        assert await self.texts(repository, s, EventFilter.active()) == ["Σ:summary", "u2", "a2"]

    async def test_an_insert_without_an_anchor_is_appended(
        self, repository: SessionRepository
    ) -> None:
        """A group with no anchor goes at the end of the log."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, "u1", "a1")
        await self.apply(
            repository, s, CompactionPlan(inserts=(Insert.at_end([user(s, "added")]),))
        )
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "a1", "added"]
        await self.append(repository, s, "after")
        assert await self.texts(repository, s, EventFilter.all()) == ["u1", "a1", "added", "after"]

    async def test_two_inserts_in_one_plan_each_go_before_their_own_anchor(
        self, repository: SessionRepository
    ) -> None:
        """Each group goes before its own anchor; groups on one anchor keep plan order."""
        s = (await self.new_session(repository)).id
        _u1, u2, u3 = await self.append(repository, s, "u1", "u2", "u3")
        plan = CompactionPlan(
            inserts=(
                Insert.before(u2.id, [user(s, "x")]),
                Insert.before(u3.id, [user(s, "y")]),
                Insert.before(u3.id, [user(s, "z")]),
            )
        )
        await self.apply(repository, s, plan)
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            "x",
            "u2",
            "y",
            "z",
            "u3",
        ]

    async def test_inserts_are_anchored_repeatedly_at_one_point(
        self, repository: SessionRepository
    ) -> None:
        """Many compactions inserting before the same anchor keep every insert in order."""
        s = (await self.new_session(repository)).id
        _u1, u2 = await self.append(repository, s, "u1", "u2")
        for i in range(40):
            await self.apply(
                repository, s, CompactionPlan(inserts=(Insert.before(u2.id, [user(s, f"i{i}")]),))
            )
        assert await self.texts(repository, s, EventFilter.all()) == [
            "u1",
            *(f"i{i}" for i in range(40)),
            "u2",
        ]

    async def test_repeated_summarization_plans_never_reorder_the_log(
        self, repository: SessionRepository
    ) -> None:
        """Three summarization passes archive in place and insert summaries before kept windows."""
        s = (await self.new_session(repository)).id

        async def add(*items: SessionEvent) -> dict[str, SessionEvent]:
            await repository.append_events(s, list(items))
            return {label(e): e for e in items}

        def u(text: str) -> SessionEvent:
            return user(s, text)

        def a(text: str) -> SessionEvent:
            return assistant(s, text)

        e = await add(u("u1"), system(s, "sys-1"), a("a1"), u("u2"), a("a2"), u("u3"), a("a3"))
        sum1 = summary_turn(s, "summary 1")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(e[k].id for k in ("u1", "a1", "u2", "a2")),
                inserts=(Insert.before(e["u3"].id, sum1),),
            ),
        )
        assert await self.texts(repository, s, EventFilter.active()) == [
            "sys-1",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
        ]

        e |= await add(u("u4"), a("a4"), u("u5"), a("a5"), system(s, "sys-2"), u("u6"), a("a6"))
        sum2 = summary_turn(s, "summary 2")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(
                    {
                        *(x.id for x in sum1),
                        *(e[k].id for k in ("u3", "a3", "u4", "a4", "u5", "a5")),
                    }
                ),
                inserts=(Insert.before(e["u6"].id, sum2),),
            ),
        )

        e |= await add(u("u7"), a("a7"), u("u8"), a("a8"), u("u9"), system(s, "sys-3"), a("a9"))
        sum3 = summary_turn(s, "summary 3")
        await self.apply(
            repository,
            s,
            CompactionPlan(
                archive_ids=frozenset(
                    {
                        *(x.id for x in sum2),
                        *(e[k].id for k in ("u6", "a6", "u7", "a7", "sys-1", "sys-2")),
                    }
                ),
                inserts=(Insert.before(e["u8"].id, sum3),),
            ),
        )
        log = await repository.find_events(s, EventFilter.all())
        assert labels(log) == [
            "u1",
            "sys-1",
            "a1",
            "u2",
            "a2",
            "Σ?",
            "Σ:summary 1",
            "u3",
            "a3",
            "u4",
            "a4",
            "u5",
            "a5",
            "sys-2",
            "Σ?",
            "Σ:summary 2",
            "u6",
            "a6",
            "u7",
            "a7",
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert [label(x) for x in log if not x.archived] == [
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert await self.texts(repository, s, EventFilter.active()) == [
            "Σ?",
            "Σ:summary 3",
            "u8",
            "a8",
            "u9",
            "sys-3",
            "a9",
        ]
        assert await repository.get_event_version(s) == 6

    async def test_a_stale_version_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """A plan at an old version returns ``False``; log, flags and version stay."""
        s = (await self.new_session(repository)).id
        u1, a1, u2 = await self.append(repository, s, "u1", "a1", "u2")
        version = await repository.get_event_version(s)
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id, a1.id}),
            inserts=(Insert.before(u2.id, [synthetic(s, AssistantMessage(text="summary"))]),),
        )
        assert not await repository.apply_compaction(s, plan, version - 1)
        assert not await repository.apply_compaction(s, plan, version + 1)
        assert await repository.get_event_version(s) == version
        log = await repository.find_events(s, EventFilter.all())
        assert [(x.text, x.archived) for x in log] == [("u1", False), ("a1", False), ("u2", False)]

    async def test_an_unknown_archive_id_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Archiving an id not in the log raises; nothing is archived, the version stays."""
        s = (await self.new_session(repository)).id
        other = (await self.new_session(repository)).id
        (u1,) = await self.append(repository, s, "u1")
        (foreign,) = await self.append(repository, other, "foreign")
        version = await repository.get_event_version(s)
        for unknown in (_id("e"), foreign.id):
            with pytest.raises(InvalidCompactionPlan):
                await repository.apply_compaction(
                    s, CompactionPlan(archive_ids=frozenset({u1.id, unknown})), version
                )
        assert await repository.get_event_version(s) == version
        assert [x.archived for x in await repository.find_events(s, EventFilter.all())] == [False]
        assert [x.archived for x in await repository.find_events(other, EventFilter.all())] == [
            False
        ]

    async def test_an_unknown_anchor_id_is_rejected_and_changes_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Inserting before an id not in the log raises; nothing is written, the version stays."""
        s = (await self.new_session(repository)).id
        (u1,) = await self.append(repository, s, "u1")
        version = await repository.get_event_version(s)
        plan = CompactionPlan(
            archive_ids=frozenset({u1.id}), inserts=(Insert.before(_id("e"), [user(s, "x")]),)
        )
        with pytest.raises(InvalidCompactionPlan):
            await repository.apply_compaction(s, plan, version)
        assert await repository.get_event_version(s) == version
        log = await repository.find_events(s, EventFilter.all())
        assert [(x.text, x.archived) for x in log] == [("u1", False)]

    async def test_apply_compaction_on_an_unknown_session_is_rejected(
        self, repository: SessionRepository
    ) -> None:
        """A plan for a session that does not exist raises, even an empty one."""
        with pytest.raises(SessionNotFound):
            await repository.apply_compaction(_id(), CompactionPlan(), 0)

    async def test_compaction_and_appends_racing_lose_nothing(
        self, repository: SessionRepository
    ) -> None:
        """Racing compactions and appends: every append lands; each plan applies whole or not."""
        s = (await self.new_session(repository)).id
        await self.append(repository, s, *(f"seed-{i}" for i in range(10)))

        appended = asyncio.Event()

        async def appender(w: int) -> None:
            for i in range(15):
                await repository.append_event(user(s, f"w{w}-{i}"))
                await asyncio.sleep(0)  # interleave even with a store that never awaits

        async def appenders() -> None:
            await asyncio.gather(*(appender(w) for w in range(4)))
            appended.set()

        async def compactor(c: int) -> int:
            """Compact while the appends go on, then once more after them."""
            applied = 0
            while True:
                await asyncio.sleep(0)
                last = appended.is_set()
                version = await repository.get_event_version(s)
                active = await repository.find_events(s, EventFilter.active())
                plan = CompactionPlan(
                    archive_ids=frozenset({active[0].id}),
                    inserts=(
                        Insert.before(active[1].id, [synthetic(s, AssistantMessage(text=f"c{c}"))]),
                    ),
                )
                applied += await repository.apply_compaction(s, plan, version)
                if last:
                    return applied

        results = await asyncio.gather(appenders(), *(compactor(c) for c in range(4)))
        applied = sum(r for r in results if isinstance(r, int))
        assert applied > 0  # of the compactors' last attempts, after the appends, one wins
        log = await repository.find_events(s, EventFilter.all())
        real = [x.text for x in log if not x.is_synthetic]
        assert real[:10] == [f"seed-{i}" for i in range(10)]
        for w in range(4):
            assert [t for t in real if t and t.startswith(f"w{w}-")] == [
                f"w{w}-{i}" for i in range(15)
            ]
        assert len([x for x in log if x.is_synthetic]) == applied
        assert await repository.get_event_version(s) == 10 + 60 + applied
