"""The contract kit: filters and windows.

Types, time ranges, text searches, last-N turn windows, pages and views.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from ...events import EventType, SessionEvent
from ...filters import EventFilter
from ...messages import (
    MESSAGE_TYPES,
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from ...repository import SessionRepository
from ._support import (
    ContractBase,
    assistant,
    event,
    labels,
    new_id,
    synthetic,
    system,
    user,
)

__all__ = ["FiltersContract"]


class FiltersContract(ContractBase):
    """Contract tests for reads: filters, text searches, windows and pages."""

    async def test_find_events_for_an_unknown_session_returns_an_empty_list(
        self, repository: SessionRepository
    ) -> None:
        """Reading an unknown session returns nothing and does not raise."""
        assert await repository.find_events(new_id(), EventFilter.last_n(3)) == []

    async def test_message_types_filter_keeps_only_those_types(
        self, repository: SessionRepository
    ) -> None:
        """``message_types`` selects messages of those roles."""
        session = await self.new_session(repository)
        await repository.append_events(
            session.id, [user(session.id, "q"), assistant(session.id, "a"), user(session.id, "q2")]
        )
        only = EventFilter(message_types=["assistant"])
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
        await self.compact(repository, session.id, drop=[old])
        messages = EventFilter(message_types=MESSAGE_TYPES)
        assert await self.texts(repository, session.id, EventFilter.active()) == ["new"]
        assert await self.texts(
            repository, session.id, messages.merge(EventFilter(exclude_archived=True))
        ) == ["new"]
        assert await self.texts(repository, session.id, messages) == ["old", "new"]

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
        any_ = EventFilter.keywords_search(["0%", "e_c"], "any")
        all_ = EventFilter.keywords_search(["0%", "E_C"], "all")
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
        only_assistant = EventFilter(message_types=["assistant"], last_n=2)
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
        await self.compact(repository, s, drop=[old])
        window = EventFilter(exclude_archived=True, last_n=2, message_types=MESSAGE_TYPES)
        assert await self.texts(repository, s, window) == [
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
        owner, other = new_id("u"), new_id("u")
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
        assert await repository.find_events_by_user_id(new_id("nobody"), EventFilter.all()) == []

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
        await self.compact(repository, s, drop=[u1, a1])
        assert await repository.find_events(s, asked) == []
        await repository.append_event(SessionEvent(session_id=s, type=audit, payload={"n": 2}))
        assert [e.payload for e in await repository.find_events(s, asked)] == [{"n": 2}]
        assert len(await repository.find_events(s, EventFilter(event_types=[audit]))) == 2
        assert await self.texts(repository, s, EventFilter.active()) == ["u2", "a2"]
