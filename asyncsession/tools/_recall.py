"""Recall tools: let the model search what was said, archived history included.

Compaction takes old turns out of the model's view but keeps them in the log. These tools
search the whole log, so the model can recall an exchange after it was compacted away (the
MemGPT recall pattern):

- `conversation_search`: keyword search in one session
  ([`search_events`][asyncsession.service.SessionService.search_events]), bound when the tool
  is built (the
  [`SessionRecallAdvisor`][asyncsession.advisors.SessionRecallAdvisor] binds the call's own
  session) — the session is never a tool argument.
- `cross_session_search`: several terms across every session of one user, bound the same way.

Both are [`Tool`][asyncsession.tools.Tool]s whose schemas come from the argument models below,
so arguments that do not validate come back to the model the way every tool's do. Search terms
(at most 20, of at most 200 characters each) are matched literally and case-insensitively; no
tool accepts a regex, so nothing the model writes is compiled into a pattern.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Annotated, Any, ClassVar, Final, Literal

from pydantic import AfterValidator, AwareDatetime, BaseModel, BeforeValidator, ConfigDict, Field

from ..events import SessionEvent
from ..exceptions import UsageError
from ..filters import EventQuery, MatchMode
from ..service import SessionService
from ._tool import Tool

__all__ = [
    "MAX_TERMS",
    "NO_RESULTS",
    "ConversationSearchArgs",
    "CrossSessionSearchArgs",
    "conversation_search",
    "cross_session_search",
]

NO_RESULTS: Final = "No results found."
"""The answer when nothing matches."""
MAX_TERMS: Final = 20
"""The most comma-separated terms one `cross_session_search` takes."""
_MAX_TERM_LENGTH: Final = 200

_CONVERSATION_DESCRIPTION: Final = (
    "Search this conversation's full history, including older parts that are no longer in "
    "your context, for messages containing a keyword (case-insensitive, literal text). "
    "Returns a JSON list of {timestamp, type, text}, oldest first, one page at a time."
)
_CROSS_SESSION_DESCRIPTION: Final = (
    "Search all of this user's past conversations for messages containing search terms "
    "(comma-separated, literal, case-insensitive; match any or all of them), optionally "
    "only since an ISO-8601 time. Returns a JSON list of {sessionId, timestamp, type, text} "
    "ordered by time, one page at a time."
)


def _keyword(query: str) -> str:
    if not query.strip():
        raise ValueError("query must be a non-empty keyword or phrase")
    if len(query) > _MAX_TERM_LENGTH:
        raise ValueError(f"query must be at most {_MAX_TERM_LENGTH} characters")
    return query


def _terms(query: str) -> str:
    terms = [term.strip() for term in query.split(",") if term.strip()]
    if not terms:
        raise ValueError("query must contain at least one search term (comma-separated)")
    if len(terms) > MAX_TERMS:
        raise ValueError(f"at most {MAX_TERMS} search terms are allowed, not {len(terms)}")
    if any(len(term) > _MAX_TERM_LENGTH for term in terms):
        raise ValueError(f"a search term must be at most {_MAX_TERM_LENGTH} characters")
    return query


def _lower(value: object) -> object:
    if value is None:
        return "any"
    return value.strip().lower() if isinstance(value, str) else value


def _blank_is_none(value: object) -> object:
    return None if isinstance(value, str) and not value.strip() else value


def _null_is_first(value: object) -> object:
    return 0 if value is None else value


def _clamp(page: int) -> int:
    return max(page, 0)  # the reference clamps a negative page to the first one


# Lenient where the reference was: null is the first page, a negative page is clamped; a
# string or a boolean is still refused (strict).
_Page = Annotated[
    int,
    Field(strict=True, description="Page number, from 0."),
    BeforeValidator(_null_is_first),
    AfterValidator(_clamp),
]


class _Args(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class ConversationSearchArgs(_Args):
    inner_thought: str = Field(description="Why you are searching.")
    query: Annotated[str, AfterValidator(_keyword)] = Field(
        description="The keyword or phrase to look for."
    )
    page: _Page = 0


class CrossSessionSearchArgs(_Args):
    inner_thought: str = Field(description="Why you are searching.")
    query: Annotated[str, AfterValidator(_terms)] = Field(
        description=f"Comma-separated search terms (max {MAX_TERMS})."
    )
    match_mode: Annotated[Literal["any", "all"], BeforeValidator(_lower)] = Field(
        default="any", description="Match any or all of the terms; default any."
    )
    since: Annotated[AwareDatetime | None, BeforeValidator(_blank_is_none)] = Field(
        default=None, description="ISO-8601 time with a time zone, e.g. 2026-01-31T00:00:00Z."
    )
    page: _Page = 0


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


def _check(service: SessionService, name: str, value: str, page_size: int) -> None:
    """Refuse at build time what would make the tool fail at its first call."""
    if service is None or isinstance(service, type):
        raise UsageError(f"a recall tool needs a session service instance, not {service!r}")
    if not isinstance(value, str) or not value.strip():
        raise UsageError(f"{name} must be a non-empty string")
    if page_size <= 0:
        raise UsageError("page_size must be greater than 0")


def conversation_search(
    service: SessionService,
    session_id: str,
    *,
    page_size: int = 10,
    include_synthetic: bool = True,
) -> Tool:
    """The ``conversation_search`` tool over one session's whole log, archived turns included.

    Args:
        service: the session service to read from.
        session_id: the session searched; bound here, never a tool argument.
        page_size: results per page.
        include_synthetic: whether summaries written by compaction are searched too.

    Raises:
        UsageError: `service` is None, `session_id` is blank, or `page_size` is not
            positive.
    """
    _check(service, "session_id", session_id, page_size)

    async def search(inner_thought: str, query: str, page: int) -> str:
        search = EventQuery(
            keywords=(query,), include_synthetic=include_synthetic, page=page, page_size=page_size
        )
        return _rows(await service.search_events(session_id, search), with_session=False)

    return Tool.from_model(
        "conversation_search", _CONVERSATION_DESCRIPTION, ConversationSearchArgs, search
    )


def cross_session_search(
    service: SessionService,
    user_id: str,
    *,
    page_size: int = 10,
    include_synthetic: bool = False,
) -> Tool:
    """The ``cross_session_search`` tool: terms across every session of one user.

    Args:
        service: the session service to read from.
        user_id: whose sessions are searched; bound here, never a tool argument.
        page_size: results per page.
        include_synthetic: whether summaries written by compaction are searched (off: a
            summary only paraphrases events that are still in the log).

    Raises:
        UsageError: `service` is None, `user_id` is blank, or `page_size` is not positive.
    """
    _check(service, "user_id", user_id, page_size)

    async def search(
        inner_thought: str,
        query: str,
        match_mode: Literal["any", "all"],
        since: AwareDatetime | None,
        page: int,
    ) -> str:
        search = EventQuery(
            keywords=tuple(term.strip() for term in query.split(",") if term.strip()),
            match_mode=MatchMode(match_mode),
            since=since,
            include_synthetic=include_synthetic,
            page=page,
            page_size=page_size,
        )
        events = await service.find_events_by_user_id(user_id, search.to_filter())
        return _rows(events, with_session=True)

    return Tool.from_model(
        "cross_session_search", _CROSS_SESSION_DESCRIPTION, CrossSessionSearchArgs, search
    )
