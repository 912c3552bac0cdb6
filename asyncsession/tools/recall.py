"""Recall tools: let the model search what was said, archived history included.

Compaction takes old turns out of the model's view but keeps them in the log. These tools
search the whole log, so the model can recall an exchange after it was compacted away (the
MemGPT recall pattern):

- :class:`ConversationSearch` (``conversation_search``): keyword search in the current session;
  the session id comes from the call's context, never from the model.
- :class:`CrossSessionSearch` (``cross_session_search``): several terms across every session of
  one user, bound when the tool is built — the user is never a tool argument.

Search terms are matched literally and case-insensitively; no tool accepts a regex, so nothing
the model writes is compiled into a pattern. Bad arguments come back to the model as text that
starts with ``Error:``; the tools never raise into the tool loop.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Final

from ..events import SessionEvent
from ..filters import EventFilter, MatchMode
from ..service import SessionService

__all__ = [
    "MAX_TERMS",
    "NO_RESULTS",
    "ConversationSearch",
    "CrossSessionSearch",
]

NO_RESULTS: Final = "No results found."
MAX_TERMS: Final = 20


def _page(raw: Any) -> int | str:
    if raw is None:
        return 0
    if isinstance(raw, bool) or not isinstance(raw, int):
        return "Error: page must be a whole number (0 for the first page)."
    return max(raw, 0)


def _rows(events: Sequence[SessionEvent], *, with_session: bool) -> str:
    rows: list[dict[str, Any]] = []
    for event in events:
        if not event.text:
            continue
        row: dict[str, Any] = {}
        if with_session:
            row["sessionId"] = event.session_id
        row["timestamp"] = event.timestamp.isoformat().replace("+00:00", "Z")
        row["type"] = event.message_type.value if event.message_type else str(event.type).lower()
        row["text"] = event.text
        rows.append(row)
    return json.dumps(rows, ensure_ascii=False) if rows else NO_RESULTS


class ConversationSearch:
    """``conversation_search``: keyword search over this session's whole log.

    Args:
        service: the session service to read from.
        page_size: results per page.
        include_synthetic: whether summaries written by compaction are searched too.
    """

    name: Final = "conversation_search"
    description: Final = (
        "Search this conversation's full history, including older parts that are no longer in "
        "your context, for messages containing a keyword (case-insensitive, literal text). "
        "Returns a JSON list of {timestamp, type, text}, oldest first, one page at a time."
    )
    parameters: Final[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "inner_thought": {"type": "string", "description": "Why you are searching."},
            "query": {"type": "string", "description": "The keyword or phrase to look for."},
            "page": {"type": "integer", "minimum": 0, "description": "Page number, from 0."},
        },
        "required": ["inner_thought", "query"],
        "additionalProperties": False,
    }

    def __init__(
        self, service: SessionService, *, page_size: int = 10, include_synthetic: bool = True
    ) -> None:
        if page_size <= 0:
            raise ValueError("page_size must be greater than 0")
        self.service = service
        self.page_size = page_size
        self.include_synthetic = include_synthetic

    async def __call__(
        self,
        *,
        query: str,
        page: int | None = 0,
        inner_thought: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> str:
        """Run the search for the session named in ``context``; returns the model's answer."""
        # Imported here: the advisors package imports this module.
        from ..advisors.contexts import SESSION_ID_CONTEXT_KEY

        session_id = (context or {}).get(SESSION_ID_CONTEXT_KEY)
        if not isinstance(session_id, str) or not session_id.strip():
            return (
                "Error: conversation_search is unavailable because no session ID was provided "
                "in the tool context."
            )
        if not isinstance(query, str) or not query.strip():
            return "Error: query must be a non-empty keyword or phrase."
        number = _page(page)
        if isinstance(number, str):
            return number
        filter = EventFilter(
            keyword=query,
            page=number,
            page_size=self.page_size,
            exclude_synthetic=not self.include_synthetic,
        )
        return _rows(await self.service.get_events(session_id, filter), with_session=False)


class CrossSessionSearch:
    """``cross_session_search``: terms across every session of one user.

    Args:
        service: the session service to read from.
        user_id: whose sessions are searched; bound here, never a tool argument.
        page_size: results per page.
        include_synthetic: whether summaries written by compaction are searched (off: a
            summary only paraphrases events that are still in the log).
    """

    name: Final = "cross_session_search"
    description: Final = (
        "Search all of this user's past conversations for messages containing search terms "
        "(comma-separated, literal, case-insensitive; match any or all of them), optionally "
        "only since an ISO-8601 time. Returns a JSON list of {sessionId, timestamp, type, text} "
        "ordered by time, one page at a time."
    )
    parameters: Final[Mapping[str, Any]] = {
        "type": "object",
        "properties": {
            "inner_thought": {"type": "string", "description": "Why you are searching."},
            "query": {"type": "string", "description": "Comma-separated search terms (max 20)."},
            "match_mode": {"type": "string", "enum": ["any", "all"], "description": "Default any."},
            "since": {"type": "string", "description": "ISO-8601 time, e.g. 2026-01-31T00:00:00Z."},
            "page": {"type": "integer", "minimum": 0, "description": "Page number, from 0."},
        },
        "required": ["inner_thought", "query"],
        "additionalProperties": False,
    }

    def __init__(
        self,
        service: SessionService,
        user_id: str,
        *,
        page_size: int = 10,
        include_synthetic: bool = False,
    ) -> None:
        if not isinstance(user_id, str) or not user_id.strip():
            raise ValueError("user_id must be a non-empty string")
        if page_size <= 0:
            raise ValueError("page_size must be greater than 0")
        self.service = service
        self.user_id = user_id
        self.page_size = page_size
        self.include_synthetic = include_synthetic

    async def __call__(
        self,
        *,
        query: str,
        match_mode: str | None = "any",
        since: str | None = None,
        page: int | None = 0,
        inner_thought: str = "",
        context: Mapping[str, Any] | None = None,
    ) -> str:
        """Run the search across the bound user's sessions; returns the model's answer."""
        if not isinstance(query, str) or not query.strip():
            return "Error: query must contain at least one search term."
        terms = [term.strip() for term in query.split(",") if term.strip()]
        if not terms:
            return "Error: query must contain at least one search term (comma-separated)."
        if len(terms) > MAX_TERMS:
            return f"Error: at most {MAX_TERMS} search terms are allowed, not {len(terms)}."
        mode_text = (match_mode or "any").strip().lower()
        if mode_text not in ("any", "all"):
            return f"Error: match_mode must be 'any' or 'all', not {match_mode!r}."
        start: datetime | None = None
        if since is not None and since.strip():
            try:
                start = datetime.fromisoformat(since.strip().replace("Z", "+00:00"))
            except ValueError:
                return (
                    f"Error: since must be an ISO-8601 time such as 2026-01-31T09:00:00Z, "
                    f"not {since!r}."
                )
            if start.tzinfo is None:
                return "Error: since needs a time zone, e.g. 2026-01-31T09:00:00Z."
        number = _page(page)
        if isinstance(number, str):
            return number
        filter = EventFilter(
            keyword=terms[0] if len(terms) == 1 else None,
            keywords=terms if len(terms) > 1 else None,
            match_mode=MatchMode(mode_text),
            from_=start,
            exclude_synthetic=not self.include_synthetic,
            page=number,
            page_size=self.page_size,
        )
        events = await self.service.find_events_by_user_id(self.user_id, filter)
        return _rows(events, with_session=True)
