"""The contract kit: recall searches (``SessionService.search_events``).

The service translates a search into an ``EventFilter``; these tests hold the store to what the
search promises: literal keywords, any/all, message types, ``since`` to the microsecond, pages,
message events only (archived included, summaries on request).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from ...events import EventType, SessionEvent
from ...exceptions import InvalidFilter
from ...filters import EventFilter
from ...messages import AssistantMessage
from ...repository import SessionRepository
from ...service import DefaultSessionService
from ._support import ContractBase, assistant, synthetic, user

__all__ = ["SearchContract"]

_T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)


def _texts(events: list[SessionEvent]) -> list[str]:
    return [e.text or "" for e in events]


class SearchContract(ContractBase):
    """Contract tests for ``search_events``."""

    async def _search(
        self, repo: SessionRepository, session_id: str, *keywords: str, **options: object
    ) -> list[str]:
        service = DefaultSessionService(repo)
        return _texts(await service.search_events(session_id, keywords, **options))  # type: ignore[arg-type]

    async def test_keywords_match_literally_ignoring_case(
        self, repository: SessionRepository
    ) -> None:
        """``%``, ``_`` and ``[`` are text, not wildcards; case is ignored."""
        session = await self.new_session(repository)
        texts = ["100% sure", "100 percent", "a_b", "axb", "[Draft] plan", "draft plan"]
        await self.append(repository, session.id, *texts)
        assert await self._search(repository, session.id, "%") == ["100% sure"]
        assert await self._search(repository, session.id, "_") == ["a_b"]
        assert await self._search(repository, session.id, "[d") == ["[Draft] plan"]
        assert await self._search(repository, session.id, "DRAFT") == ["[Draft] plan", "draft plan"]
        assert await self._search(repository, session.id, "a.b") == []

    async def test_any_or_all_of_the_keywords(self, repository: SessionRepository) -> None:
        """ANY (the default) needs one keyword, ALL every one."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "invoice sent", "refund asked", "invoice refund")
        both = ("invoice", "refund")
        assert await self._search(repository, session.id, *both) == [
            "invoice sent",
            "refund asked",
            "invoice refund",
        ]
        assert await self._search(repository, session.id, *both, match_mode="all") == [
            "invoice refund"
        ]

    async def test_message_types_and_message_events_only(
        self, repository: SessionRepository
    ) -> None:
        """Only message events are searched, of the asked types; a custom event's payload and a
        summary (unless asked for) are not, an archived message is."""
        session = await self.new_session(repository)
        asked = user(session.id, "where is my parcel")
        await repository.append_events(
            session.id,
            [
                asked,
                assistant(session.id, "your parcel ships today"),
                SessionEvent(
                    session_id=session.id,
                    type=EventType.of("NOTE"),
                    payload={"text": "parcel"},
                ),
                synthetic(session.id, AssistantMessage(text="summary: a parcel")),
            ],
        )
        await self.compact(repository, session.id, drop=[asked])
        assert await self._search(repository, session.id, "parcel") == [
            "where is my parcel",
            "your parcel ships today",
        ]
        users = await self._search(repository, session.id, "parcel", message_types=["user"])
        assert users == ["where is my parcel"]
        with_summaries = await self._search(
            repository, session.id, "parcel", include_synthetic=True
        )
        assert with_summaries[-1] == "summary: a parcel"

    async def test_since_compares_to_the_microsecond(self, repository: SessionRepository) -> None:
        """An event stamped before ``since`` by any amount is left out."""
        session = await self.new_session(repository)
        await repository.append_events(
            session.id,
            [
                user(session.id, "tick early", timestamp=_T0),
                user(session.id, "tick late", timestamp=_T0 + timedelta(milliseconds=1)),
            ],
        )
        at = _T0
        assert await self._search(repository, session.id, "tick", since=at) == [
            "tick early",
            "tick late",
        ]
        just_after = _T0 + timedelta(microseconds=1)
        assert await self._search(repository, session.id, "tick", since=just_after) == ["tick late"]
        last = _T0 + timedelta(microseconds=1000)
        assert await self._search(repository, session.id, "tick", since=last) == ["tick late"]
        beyond = _T0 + timedelta(microseconds=1001)
        assert await self._search(repository, session.id, "tick", since=beyond) == []

    async def test_pages_of_matches_oldest_first(self, repository: SessionRepository) -> None:
        """Matches come a page at a time; a page past the end is empty."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, *(f"match {i}" for i in range(5)), "other")
        pages = [
            await self._search(repository, session.id, "match", page=page, page_size=2)
            for page in range(4)
        ]
        assert pages == [["match 0", "match 1"], ["match 2", "match 3"], ["match 4"], []]

    async def test_a_query_is_bounded(self, repository: SessionRepository) -> None:
        """At most 20 keywords of 1 to 200 characters; anything else is refused up front."""
        session = await self.new_session(repository)
        await self.append(repository, session.id, "x" * 200)
        assert await self._search(repository, session.id, "x" * 200) == ["x" * 200]
        assert (
            len(await self._search(repository, session.id, *("x" * (i + 1) for i in range(20))))
            == 1
        )
        for keywords in [(), ("x",) * 21, ("x" * 201,), (" ",), ("x", "")]:
            with pytest.raises(InvalidFilter):
                EventFilter.keywords_search(keywords)
        with pytest.raises(InvalidFilter):
            EventFilter.keywords_search(["x"], since=_T0.replace(tzinfo=None))
        with pytest.raises(InvalidFilter):
            EventFilter.keywords_search(["x"], page_size=0)
        with pytest.raises(InvalidFilter):
            EventFilter.keywords_search(["x"], "most")  # type: ignore[arg-type]
