"""The contract kit: reads.

Filters by type, time and text, last-N turn windows, pages and views; and recall searches
(``SessionService.search_events`` with an ``EventQuery``, which the service translates into an
``EventFilter``): literal keywords, any/all, ``since`` to the microsecond, pages, message events
only (archived included, summaries on request).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ...events import EventType, SessionEvent
from ...exceptions import UsageError
from ...filters import EventFilter, EventQuery, MatchMode
from ...messages import AssistantMessage, MessageType, ToolCall, ToolResponse, ToolResponseMessage
from ...service import DefaultSessionService
from ._support import ContractBase, assistant, event, labels, new_id, synthetic, system, user

__all__ = ["FiltersContract", "SearchContract"]


class FiltersContract(ContractBase):
    """Contract tests for reads: filters, text searches, windows and pages."""

    async def test_find_events_for_an_unknown_session_returns_an_empty_list(self) -> None:
        """Reading an unknown session returns nothing and does not raise."""
        assert await self.repo.find_events(new_id(), EventFilter.last_n(3)) == []

    async def test_message_types_filter_keeps_only_those_types(self) -> None:
        """``message_types`` selects messages of those roles."""
        s = (await self.new_session()).id
        await self.repo.append_events(s, [user(s, "q"), assistant(s, "a"), user(s, "q2")])
        only = EventFilter(message_types=[MessageType.ASSISTANT])
        assert await self.texts(s, only) == ["a"]

    async def test_time_range_filter_is_inclusive(self) -> None:
        """``from_`` and ``to`` include events exactly at their instants."""
        s = (await self.new_session()).id
        base = datetime(2026, 5, 1, tzinfo=UTC)
        for i in range(4):
            await self.repo.append_event(
                user(s, f"t{i}", timestamp=base + timedelta(seconds=60 * i))
            )
        window = EventFilter(from_=base + timedelta(seconds=60), to=base + timedelta(seconds=120))
        assert await self.texts(s, window) == ["t1", "t2"]

    async def test_exclude_synthetic_hides_summary_events(self) -> None:
        """``real_only`` leaves out synthetic events; ``all`` keeps them."""
        s = (await self.new_session()).id
        await self.repo.append_event(user(s, "real"))
        await self.repo.append_event(synthetic(s, AssistantMessage(text="summary")))
        assert await self.texts(s, EventFilter.real_only()) == ["real"]
        assert await self.texts(s) == ["real", "Σ:summary"]

    async def test_exclude_archived_hides_archived_events(self) -> None:
        """Archived events are hidden from the active view and kept in the whole log."""
        s = (await self.new_session()).id
        old, _new = await self.append(s, "old", "new")
        await self.compact(s, drop=[old])
        messages = EventFilter(message_types=list(MessageType))
        assert await self.texts(s, EventFilter.active()) == ["new"]
        assert await self.texts(s, messages.merge(EventFilter(exclude_archived=True))) == ["new"]
        assert await self.texts(s, messages) == ["old", "new"]

    async def test_keyword_search_is_case_insensitive_and_matches_wildcard_characters_literally(
        self,
    ) -> None:
        """Keywords match literally and in any case; regex and LIKE metacharacters mean nothing."""
        session = await self.new_session()
        await self.append(
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
            assert await self.texts(session.id, EventFilter(keyword=keyword)) == expected, keyword

    async def test_keywords_search_combines_terms_with_any_or_all(self) -> None:
        """Several keywords match any or all of the terms, literally."""
        s = (await self.new_session()).id
        await self.append(s, "100% done", "snake_case", "100% snake_case", "other")
        any_ = EventFilter.keywords_search(["0%", "e_c"], MatchMode.ANY)
        all_ = EventFilter.keywords_search(["0%", "E_C"], MatchMode.ALL)
        assert await self.texts(s, any_) == ["100% done", "snake_case", "100% snake_case"]
        assert await self.texts(s, all_) == ["100% snake_case"]

    async def test_pattern_search_matches_with_the_regex(self) -> None:
        """``pattern`` is a Python regex searched in the text."""
        s = (await self.new_session()).id
        await self.append(s, "msg-1", "msg-2", "msg-13")
        found = await self.texts(s, EventFilter.pattern_search(r"^msg-1\d?$"))
        assert found == ["msg-1", "msg-13"]

    async def test_text_searches_skip_events_without_text(self) -> None:
        """Tool results and custom events have no text, so searches never return them."""
        s = (await self.new_session()).id
        await self.repo.append_events(
            s,
            [
                event(
                    s,
                    ToolResponseMessage(responses=(ToolResponse(id="c", name="t", data="needle"),)),
                ),
                SessionEvent(session_id=s, type=EventType.of("ACME.X"), payload={"t": "needle"}),
                user(s, "a needle"),
            ],
        )
        assert await self.texts(s, EventFilter(keyword="needle")) == ["a needle"]

    async def test_last_n_returns_the_newest_events_in_chronological_order(self) -> None:
        """``last_n`` returns the newest events, oldest first."""
        s = (await self.new_session()).id
        await self.append(s, *(f"msg-{i}" for i in range(1, 6)))
        assert await self.texts(s, EventFilter.last_n(2)) == ["msg-4", "msg-5"]
        assert await self.texts(s, EventFilter.last_n(10)) == [f"msg-{i}" for i in range(1, 6)]

    async def test_last_n_is_extended_to_the_start_of_its_turn(self) -> None:
        """A window that would start mid-turn reaches back to the turn's user message."""
        s = (await self.new_session()).id
        call = AssistantMessage(tool_calls=(ToolCall(id="c1", name="t"),))
        result = ToolResponseMessage(responses=(ToolResponse(id="c1", name="t", data="r"),))
        await self.repo.append_events(
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
        window = await self.repo.find_events(s, EventFilter.last_n(2))
        assert [e.type for e in window] == [
            EventType.USER,
            EventType.ASSISTANT,
            EventType.TOOL,
            EventType.ASSISTANT,
        ]
        assert labels(window)[0] == "U2"
        assert await self.texts(s, EventFilter.last_n(4)) == ["U2", "None", "None", "A2'"]
        assert await self.texts(s, EventFilter.last_n(5)) == [
            "U1",
            "A1",
            "U2",
            "None",
            "None",
            "A2'",
        ]

    async def test_last_n_is_not_extended_for_text_searches_pages_or_without_a_user_message(
        self,
    ) -> None:
        """Text searches, pages, and windows with no earlier user message stay plain."""
        s = (await self.new_session()).id
        await self.repo.append_events(
            s, [user(s, "U1 x"), assistant(s, "A1 x"), assistant(s, "A2 x"), assistant(s, "A3 x")]
        )
        assert await self.texts(s, EventFilter(keyword="x", last_n=1)) == ["A3 x"]
        assert await self.texts(s, EventFilter(page=1, page_size=2)) == ["A2 x", "A3 x"]
        only_assistant = EventFilter(message_types=[MessageType.ASSISTANT], last_n=2)
        assert await self.texts(s, only_assistant) == ["A2 x", "A3 x"]
        t = (await self.new_session()).id
        await self.repo.append_events(t, [system(t, "sys"), assistant(t, "A1"), assistant(t, "A2")])
        assert await self.texts(t, EventFilter.last_n(1)) == ["A2"]

    async def test_a_turn_aware_window_respects_the_other_criteria(self) -> None:
        """The extension reaches back only over events that match the filter."""
        s = (await self.new_session()).id
        await self.repo.append_events(
            s,
            [
                user(s, "U1"),
                assistant(s, "A1"),
                user(s, "U2"),
                assistant(s, "A2a"),
                assistant(s, "A2b"),
            ],
        )
        old = (await self.log(s))[2]
        await self.compact(s, drop=[old])
        window = EventFilter(exclude_archived=True, last_n=2, message_types=list(MessageType))
        assert await self.texts(s, window) == ["U1", "A1", "A2a", "A2b"]

    async def test_pages_are_zero_indexed_in_chronological_order(self) -> None:
        """Pages cut the matching events in order, from page 0."""
        s = (await self.new_session()).id
        await self.append(s, *(f"msg-{i}" for i in range(1, 6)))
        pages = [await self.texts(s, EventFilter(page=p, page_size=2)) for p in range(4)]
        assert pages == [["msg-1", "msg-2"], ["msg-3", "msg-4"], ["msg-5"], []]
        assert await self.texts(s, EventFilter(page_size=3)) == ["msg-1", "msg-2", "msg-3"]

    async def test_a_huge_page_number_returns_an_empty_page(self) -> None:
        """A page far past the end is empty, with no overflow."""
        s = (await self.new_session()).id
        await self.append(s, "only")
        assert await self.repo.find_events(s, EventFilter(page=2**31 - 1, page_size=10)) == []
        assert await self.repo.find_events(s, EventFilter(page=2**62, page_size=2**31)) == []

    async def test_find_events_by_user_id_orders_by_timestamp_across_sessions_and_pages(
        self,
    ) -> None:
        """A user's events from all sessions come ordered by time, windowed plainly."""
        owner, other = new_id("u"), new_id("u")
        first = await self.new_session(owner)
        second = await self.new_session(owner)
        third = await self.new_session(other)
        base = datetime(2026, 2, 1, tzinfo=UTC)
        for session, text, minute in [
            (first, "first-1", 0),
            (second, "second-1", 1),
            (first, "first-2", 2),
            (second, "second-2", 3),
            (third, "other", 1),
        ]:
            await self.repo.append_event(
                user(session.id, text, timestamp=base + timedelta(minutes=minute))
            )
        all_ = await self.repo.find_events_by_user_id(owner, EventFilter.all())
        assert labels(all_) == ["first-1", "second-1", "first-2", "second-2"]
        page = await self.repo.find_events_by_user_id(owner, EventFilter(page=1, page_size=3))
        assert labels(page) == ["second-2"]
        found = await self.repo.find_events_by_user_id(owner, EventFilter.keyword_search("SECOND"))
        assert labels(found) == ["second-1", "second-2"]
        newest = await self.repo.find_events_by_user_id(owner, EventFilter.last_n(2))
        assert labels(newest) == ["first-2", "second-2"]
        assert await self.repo.find_events_by_user_id(new_id("nobody"), EventFilter.all()) == []

    async def test_the_active_view_leaves_out_custom_events_unless_asked(self) -> None:
        """The active view holds message events; custom ones only if asked, after compaction."""
        audit = EventType.of("ACME.AUDIT")
        s = (await self.new_session()).id
        u1, a1 = user(s, "u1"), assistant(s, "a1")
        await self.repo.append_events(
            s, [u1, SessionEvent(session_id=s, type=audit, payload={"n": 1}), a1]
        )
        await self.repo.append_events(s, [user(s, "u2"), assistant(s, "a2")])
        assert await self.texts(s, EventFilter.active()) == ["u1", "a1", "u2", "a2"]
        asked = EventFilter.active().merge(EventFilter(event_types=[audit]))
        assert [e.payload for e in await self.repo.find_events(s, asked)] == [{"n": 1}]
        await self.compact(s, drop=[u1, a1])
        assert await self.repo.find_events(s, asked) == []
        await self.repo.append_event(SessionEvent(session_id=s, type=audit, payload={"n": 2}))
        assert [e.payload for e in await self.repo.find_events(s, asked)] == [{"n": 2}]
        assert len(await self.repo.find_events(s, EventFilter(event_types=[audit]))) == 2
        assert await self.texts(s, EventFilter.active()) == ["u2", "a2"]


_T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _texts(events: list[SessionEvent]) -> list[str]:
    return [e.text or "" for e in events]


class SearchContract(ContractBase):
    """Contract tests for ``search_events``."""

    async def _search(self, session_id: str, *keywords: str, **options: object) -> list[str]:
        query = EventQuery(keywords=keywords, **options)  # type: ignore[arg-type]
        return _texts(await DefaultSessionService(self.repo).search_events(session_id, query))

    async def test_keywords_match_literally_ignoring_case(self) -> None:
        """``%``, ``_`` and ``[`` are text, not wildcards; case is ignored."""
        s = (await self.new_session()).id
        texts = ["100% sure", "100 percent", "a_b", "axb", "[Draft] plan", "draft plan"]
        await self.append(s, *texts)
        assert await self._search(s, "%") == ["100% sure"]
        assert await self._search(s, "_") == ["a_b"]
        assert await self._search(s, "[d") == ["[Draft] plan"]
        assert await self._search(s, "DRAFT") == ["[Draft] plan", "draft plan"]
        assert await self._search(s, "a.b") == []

    async def test_any_or_all_of_the_keywords(self) -> None:
        """ANY (the default) needs one keyword, ALL every one."""
        s = (await self.new_session()).id
        await self.append(s, "invoice sent", "refund asked", "invoice refund")
        both = ("invoice", "refund")
        assert await self._search(s, *both) == ["invoice sent", "refund asked", "invoice refund"]
        assert await self._search(s, *both, match_mode=MatchMode.ALL) == ["invoice refund"]

    async def test_message_types_and_message_events_only(self) -> None:
        """Only message events are searched, of the asked types; a custom event's payload and a
        summary (unless asked for) are not, an archived message is."""
        session = await self.new_session()
        asked = user(session.id, "where is my parcel")
        await self.repo.append_events(
            session.id,
            [
                asked,
                assistant(session.id, "your parcel ships today"),
                SessionEvent(
                    session_id=session.id, type=EventType.of("NOTE"), payload={"text": "parcel"}
                ),
                synthetic(session.id, AssistantMessage(text="summary: a parcel")),
            ],
        )
        await self.compact(session.id, drop=[asked])
        assert await self._search(session.id, "parcel") == [
            "where is my parcel",
            "your parcel ships today",
        ]
        users = await self._search(
            session.id, "parcel", message_types=frozenset({MessageType.USER})
        )
        assert users == ["where is my parcel"]
        with_summaries = await self._search(session.id, "parcel", include_synthetic=True)
        assert with_summaries[-1] == "summary: a parcel"

    async def test_since_compares_to_the_microsecond(self) -> None:
        """An event stamped before ``since`` by any amount is left out."""
        s = (await self.new_session()).id
        await self.repo.append_events(
            s,
            [
                user(s, "tick early", timestamp=_T0),
                user(s, "tick late", timestamp=_T0 + timedelta(milliseconds=1)),
            ],
        )
        at = _T0
        assert await self._search(s, "tick", since=at) == ["tick early", "tick late"]
        just_after = _T0 + timedelta(microseconds=1)
        assert await self._search(s, "tick", since=just_after) == ["tick late"]
        last = _T0 + timedelta(microseconds=1000)
        assert await self._search(s, "tick", since=last) == ["tick late"]
        beyond = _T0 + timedelta(microseconds=1001)
        assert await self._search(s, "tick", since=beyond) == []

    async def test_pages_of_matches_oldest_first(self) -> None:
        """Matches come a page at a time; a page past the end is empty."""
        s = (await self.new_session()).id
        await self.append(s, *(f"match {i}" for i in range(5)), "other")
        pages = [await self._search(s, "match", page=page, page_size=2) for page in range(4)]
        assert pages == [["match 0", "match 1"], ["match 2", "match 3"], ["match 4"], []]

    async def test_a_query_is_bounded(self) -> None:
        """At most 20 keywords of 1 to 200 characters; anything else is refused up front."""
        s = (await self.new_session()).id
        await self.append(s, "x" * 200)
        assert await self._search(s, "x" * 200) == ["x" * 200]
        assert len(await self._search(s, *("x" * (i + 1) for i in range(20)))) == 1
        for keywords in [(), ("x",) * 21, ("x" * 201,), (" ",), ("x", "")]:
            with pytest.raises(UsageError):
                EventQuery(keywords=keywords)
        with pytest.raises(UsageError):
            EventQuery(keywords=("x",), since=_T0.replace(tzinfo=None))
        with pytest.raises(UsageError):
            EventQuery(keywords=("x",), page_size=0)
        with pytest.raises(UsageError):
            EventQuery(keywords=("x",), match_mode="most")  # type: ignore[arg-type]
