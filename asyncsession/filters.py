"""``EventFilter``: which events of a session's log a read returns.

Every criterion that is set must hold (they are AND-ed). A filter also carries at most one
retrieval window: the newest ``last_n`` events, or one page (``page``, ``page_size``).

Stores push filters into their queries;
[`EventFilter.apply`][asyncsession.filters.EventFilter.apply] is the reference read.

**Windows keep turns whole.** A ``last_n`` window of one session that would start in the middle
of a turn is extended back to the user message that starts it, so a prompt never opens with a
tool result or a reply. Text searches, pages and reads across sessions are never extended.

**Archived and the active view are derived** from the log (Spring AI 2.1): let B be the newest
boundary (a compaction's ``COMPACTION`` event or a rewind's ``REWIND`` event). After a
compaction, the active view (``active_view=True``) is the events B's record names
(``CompactionRecord.view``), in that order, then the message events after B; after a rewind, it
is the active view the log had at the point B's record names, then the message events after B.
A message at or before B that is not in the view reads ``archived=True``. Custom events are in
the active view only when ``event_types`` asks, and only those a message in their place would
be. An ``active_view`` read returns view order, every other read log order.

**Time travel.** ``as_of=v`` reads the log as it was at version ``v``: only the commits up to
``v``, with ``archived`` and the view as their boundaries said then; a version past the
newest reads the log as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar, Final, cast, overload

from ._view import ReadLog
from .events import EventType, SessionEvent
from .exceptions import UsageError
from .messages import MessageType

__all__ = ["EventFilter", "EventQuery", "MatchMode"]

DEFAULT_PAGE_SIZE: Final = 10
_MAX_KEYWORDS: Final = 20
_MAX_KEYWORD_LENGTH: Final = 200


class MatchMode(StrEnum):
    """How several keywords combine."""

    ANY = "any"
    ALL = "all"


class _LastN:
    """``EventFilter.last_n``: the factory on the class, the field on an instance."""

    @overload
    def __get__(self, instance: None, owner: type[EventFilter]) -> Callable[[int], EventFilter]: ...
    @overload
    def __get__(self, instance: EventFilter, owner: type[EventFilter]) -> int | None: ...
    def __get__(
        self, instance: EventFilter | None, owner: type[EventFilter]
    ) -> Callable[[int], EventFilter] | int | None:
        if instance is None:
            return lambda n: owner(last_n=n)
        return instance._last_n  # pyright: ignore[reportPrivateUsage] (the field's own descriptor)

    def __set__(self, instance: EventFilter, value: Any) -> None:
        raise AttributeError("EventFilter is immutable")


_FIELDS: Final = (
    "from_",
    "to",
    "message_types",
    "event_types",
    "exclude_synthetic",
    "exclude_archived",
    "active_view",
    "last_n",
    "keyword",
    "keywords",
    "match_mode",
    "pattern",
    "page",
    "page_size",
    "as_of",
)


class EventFilter:
    """Criteria and a window for reading a session's events. Immutable.

    Args:
        from_: only events at or after this time (inclusive).
        to: only events at or before this time (inclusive).
        message_types: only message events of these types.
        event_types: only events of these types (message or custom types).
        exclude_synthetic: leave out events that compaction wrote (summaries).
        exclude_archived: leave out events that compaction archived.
        active_view: the model's view: see the module docs.
        last_n: only the newest ``n`` matching events (turn-aware for one session).
        keyword: only events whose text contains this, case-insensitively and literally.
        keywords: only events whose text contains any (or all) of these.
        match_mode: ``ANY`` (the default with keywords) or ``ALL``.
        pattern: only events whose text matches this Python regex (``re.search``). Never
            compile text from users or models into a pattern.
        page: the zero-based page number, with ``page_size``.
        page_size: the size of a page; ``page`` defaults to 0.
        as_of: read the log as it was at this version (see the module docs).

    Raises:
        UsageError: a criterion is out of range, or ``last_n`` is combined with a page.
    """

    __slots__ = (
        "from_",
        "to",
        "message_types",
        "event_types",
        "exclude_synthetic",
        "exclude_archived",
        "active_view",
        "_last_n",
        "keyword",
        "keywords",
        "match_mode",
        "pattern",
        "page",
        "page_size",
        "as_of",
    )

    last_n: ClassVar[_LastN] = _LastN()

    from_: datetime | None
    to: datetime | None
    message_types: frozenset[MessageType] | None
    event_types: frozenset[EventType] | None
    exclude_synthetic: bool
    exclude_archived: bool
    active_view: bool
    _last_n: int | None
    keyword: str | None
    keywords: tuple[str, ...] | None
    match_mode: MatchMode | None
    pattern: re.Pattern[str] | None
    page: int | None
    page_size: int | None
    as_of: int | None

    def __init__(
        self,
        *,
        from_: datetime | None = None,
        to: datetime | None = None,
        message_types: Iterable[MessageType | str] | None = None,
        event_types: Iterable[EventType | str] | None = None,
        exclude_synthetic: bool = False,
        exclude_archived: bool = False,
        active_view: bool = False,
        last_n: int | None = None,
        keyword: str | None = None,
        keywords: Iterable[str] | None = None,
        match_mode: MatchMode | str | None = None,
        pattern: re.Pattern[str] | str | None = None,
        page: int | None = None,
        page_size: int | None = None,
        as_of: int | None = None,
    ) -> None:
        for name, value in (("from_", from_), ("to", to)):
            if value is not None and (not isinstance(value, datetime) or value.tzinfo is None):
                raise UsageError(f"{name} must be a timezone-aware datetime, not {value!r}")
        if from_ is not None and to is not None and from_ > to:
            raise UsageError(f"from_ ({from_.isoformat()}) is after to ({to.isoformat()})")
        if last_n is not None and last_n <= 0:
            raise UsageError("last_n must be greater than 0")
        if page_size is not None and page_size <= 0:
            raise UsageError("page_size must be greater than 0")
        if page is not None and page < 0:
            raise UsageError("page must be >= 0")
        if page is not None and page_size is None:
            raise UsageError("page_size must be set when page is set")
        if last_n is not None and page_size is not None:
            raise UsageError("last_n and page/page_size are mutually exclusive")
        if as_of is not None and (isinstance(as_of, bool) or not isinstance(as_of, int)):
            raise UsageError(f"as_of must be a version (an int), not {as_of!r}")
        if as_of is not None and as_of < 0:
            raise UsageError("as_of must be >= 0")

        types = None
        if message_types is not None:
            try:
                types = frozenset(MessageType(t) for t in message_types) or None
            except ValueError as exc:
                raise UsageError(f"unknown message type in {message_types!r}") from exc
        kinds = None
        if event_types is not None:
            try:
                kinds = frozenset(
                    t if isinstance(t, EventType) else EventType(t) for t in event_types
                )
            except ValueError as exc:
                raise UsageError(str(exc)) from exc
            except TypeError as exc:  # not iterable: EventType itself, a number
                raise UsageError(
                    f"event_types must be a list of EventType or str, not {event_types!r}"
                ) from exc
            kinds = kinds or None

        keyword = keyword.lower() if keyword is not None and keyword.strip() else None
        terms: tuple[str, ...] | None = None
        if keywords is not None:
            if isinstance(keywords, str):
                raise UsageError("keywords must be a list of terms, not one string")
            terms = tuple(k.lower() for k in keywords if k is not None and k.strip()) or None
        mode: MatchMode | None = None
        if terms is not None:
            try:
                mode = MatchMode(
                    match_mode.lower()
                    if isinstance(match_mode, str)
                    else match_mode or MatchMode.ANY
                )
            except ValueError as exc:
                raise UsageError(f"match_mode must be 'any' or 'all', not {match_mode!r}") from exc
        compiled: re.Pattern[str] | None
        try:
            compiled = re.compile(pattern) if isinstance(pattern, str) else pattern
        except re.error as exc:
            raise UsageError(f"invalid pattern {pattern!r}: {exc}") from exc

        values: dict[str, Any] = {
            "from_": from_,
            "to": to,
            "message_types": types,
            "event_types": kinds,
            "exclude_synthetic": bool(exclude_synthetic),
            "exclude_archived": bool(exclude_archived),
            "active_view": bool(active_view),
            "_last_n": last_n,
            "keyword": keyword,
            "keywords": terms,
            "match_mode": mode,
            "pattern": compiled,
            "page": 0 if page is None and page_size is not None else page,
            "page_size": page_size,
            "as_of": as_of,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError("EventFilter is immutable")

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in _FIELDS)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, EventFilter) and self._values() == other._values()

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        defaults = EventFilter()._values()
        shown = [
            f"{name}={value!r}"
            for name, value, default in zip(_FIELDS, self._values(), defaults, strict=True)
            if value != default
        ]
        return f"EventFilter({', '.join(shown)})"

    def _replace(self, **changes: Any) -> EventFilter:
        values: dict[str, Any] = dict(zip(_FIELDS, self._values(), strict=True))
        values.update(changes)
        return EventFilter(**values)

    # --- factories ----------------------------------------------------------------------------

    @classmethod
    def all(cls) -> EventFilter:
        """Every event of the log, archived ones included."""
        return cls()

    @classmethod
    def active(cls) -> EventFilter:
        """The model's view: message events that compaction has not archived."""
        return cls(exclude_archived=True, active_view=True)

    @classmethod
    def real_only(cls) -> EventFilter:
        """Every event but the synthetic ones compaction wrote."""
        return cls(exclude_synthetic=True)

    @classmethod
    def keyword_search(
        cls, keyword: str, page: int = 0, page_size: int = DEFAULT_PAGE_SIZE
    ) -> EventFilter:
        """One page of the events whose text contains ``keyword`` (literal, any case)."""
        return cls(keyword=keyword, page=page, page_size=page_size)

    @classmethod
    def keywords_search(
        cls,
        terms: Sequence[str],
        mode: MatchMode | str = MatchMode.ANY,
        page: int = 0,
        page_size: int = DEFAULT_PAGE_SIZE,
    ) -> EventFilter:
        """One page of the events whose text contains any (or all) of ``terms``."""
        return cls(keywords=terms, match_mode=mode, page=page, page_size=page_size)

    @classmethod
    def pattern_search(
        cls, pattern: re.Pattern[str] | str, page: int = 0, page_size: int = DEFAULT_PAGE_SIZE
    ) -> EventFilter:
        """One page of the events whose text matches a regex you wrote (never a user's)."""
        return cls(pattern=pattern, page=page, page_size=page_size)

    # --- combining ----------------------------------------------------------------------------

    def merge(self, other: EventFilter | None) -> EventFilter:
        """This filter with ``other`` laid over it.

        Every criterion ``other`` sets replaces this one's; the flags ``exclude_synthetic``,
        ``exclude_archived`` and ``active_view`` are OR-ed, so either side can only narrow.
        The window is one unit: if ``other`` sets ``last_n`` or a page, it replaces this
        filter's window whole.
        """
        if other is None:
            return self
        changes: dict[str, Any] = {}
        for name in (
            "from_",
            "to",
            "message_types",
            "event_types",
            "keyword",
            "keywords",
            "pattern",
        ):
            value = getattr(other, name)
            if value is not None:
                changes[name] = value
        if other.keywords is not None:
            changes["match_mode"] = other.match_mode
        if other.as_of is not None:
            changes["as_of"] = other.as_of
        for flag in ("exclude_synthetic", "exclude_archived", "active_view"):
            changes[flag] = getattr(self, flag) or getattr(other, flag)
        window = other if other.has_window else self
        changes.update(last_n=window.last_n, page=window.page, page_size=window.page_size)
        return self._replace(**changes)

    def without_window(self) -> EventFilter:
        """The same criteria with no ``last_n`` and no page."""
        return self._replace(last_n=None, page=None, page_size=None)

    @property
    def has_window(self) -> bool:
        """Whether a ``last_n`` or a page is set."""
        return self.last_n is not None or self.page_size is not None

    @property
    def has_text_criteria(self) -> bool:
        """Whether ``keyword``, ``keywords`` or ``pattern`` is set."""
        return self.keyword is not None or self.keywords is not None or self.pattern is not None

    # --- the reference read ---------------------------------------------------------------------

    def matches(self, event: SessionEvent) -> bool:
        """Whether ``event`` meets every criterion (the window and the view's boundary aside)."""
        if self.exclude_synthetic and event.is_synthetic:
            return False
        if (self.exclude_archived or self.active_view) and event.archived:
            return False
        if self.active_view and not event.is_message and self.event_types is None:
            return False
        if self.from_ is not None and event.timestamp < self.from_:
            return False
        if self.to is not None and event.timestamp > self.to:
            return False
        if self.message_types is not None and event.message_type not in self.message_types:
            return False
        if self.event_types is not None and event.type not in self.event_types:
            return False
        if self.has_text_criteria:
            text = event.text
            if text is None:
                return False
            lowered = text.lower()
            if self.keyword is not None and self.keyword not in lowered:
                return False
            if self.keywords is not None:
                hits = (term in lowered for term in self.keywords)
                if not (all(hits) if self.match_mode is MatchMode.ALL else any(hits)):
                    return False
            if self.pattern is not None and self.pattern.search(text) is None:
                return False
        return True

    def apply(self, log: Sequence[SessionEvent]) -> list[SessionEvent]:
        """The reference read of one session's whole log held as a list (``archived`` derived
        from its boundaries, whatever the events say; see the module docs).

        Raises:
            UsageError: ``as_of`` is set: a list holds no commits (hold the log as it was).
        """
        if self.as_of is not None:
            raise UsageError("as_of needs a log's commits; apply the filter to the log as it was")
        return self.read_backwards(ReadLog.of(log))

    def read_backwards(self, log: ReadLog) -> list[SessionEvent]:
        """What this filter selects from ``log``: walked from its newest event, so the cost of
        a ``last_n`` read follows the window, not the log."""
        return self.window_of_newest_first(
            event for event in log.newest_first(active_view=self.active_view) if self.matches(event)
        )

    def window_of_newest_first(self, matched: Iterable[SessionEvent]) -> list[SessionEvent]:
        """The window over one session's matched events given newest first, in read order.

        A ``last_n`` window whose oldest event is not a user message reaches back to the nearest
        matched user message before it, unless the filter searches text or there is none: it
        can be longer than ``last_n`` by at most one turn. Other windows take every event.
        """
        n = self.last_n
        if n is None:
            return self.apply_window(list(matched)[::-1])
        window: list[SessionEvent] = []
        newest_first = iter(matched)
        for event in newest_first:
            window.append(event)
            if len(window) == n:
                break
        if len(window) == n and not self.has_text_criteria and not window[-1].is_turn_start:
            extension: list[SessionEvent] = []
            for event in newest_first:
                extension.append(event)
                if event.is_turn_start:
                    window.extend(extension)
                    break
        window.reverse()
        return window

    def apply_window(self, matched: Sequence[SessionEvent]) -> list[SessionEvent]:
        """The plain window over already matched events: the newest ``last_n``, or one page."""
        if self.last_n is not None:
            return list(matched[-self.last_n :])
        if self.page_size is not None:
            start = (self.page or 0) * self.page_size
            return list(matched[start : start + self.page_size]) if start < len(matched) else []
        return list(matched)


@dataclass(frozen=True, slots=True, kw_only=True)
class EventQuery:
    """A bounded search of one session's message events (``SessionService.search_events``).

    Keywords are matched literally and case-insensitively in a message's text (``%``, ``_``,
    ``[`` and every other character stand for themselves). Archived events are searched too:
    recall finds what compaction took out of the view.

    Raises:
        UsageError: no keyword or over 20, one blank or over 200 characters, a bad mode,
            message type or page, or a naive ``since``.
    """

    keywords: tuple[str, ...]
    """The terms: 1 to 20, each of 1 to 200 characters."""
    match_mode: MatchMode = MatchMode.ANY
    """Whether an event must contain any of the keywords or all of them."""
    message_types: frozenset[MessageType] | None = None
    """The message types searched; ``None``: all of them."""
    since: datetime | None = None
    """Only events at or after this instant, to the microsecond."""
    include_synthetic: bool = False
    """Whether the summaries compaction wrote are searched (they repeat what the log holds)."""
    page: int = 0
    """The zero-based page, oldest events first."""
    page_size: int = DEFAULT_PAGE_SIZE
    """Events per page."""

    def __post_init__(self) -> None:
        terms: object = self.keywords
        if not isinstance(terms, tuple | list) or not 0 < len(self.keywords) <= _MAX_KEYWORDS:
            raise UsageError(f"keywords must be a tuple of 1 to {_MAX_KEYWORDS} terms")
        for term in self.keywords:
            text = cast(object, term)
            if not isinstance(text, str) or not text.strip() or len(text) > _MAX_KEYWORD_LENGTH:
                raise UsageError(f"a keyword must be 1 to {_MAX_KEYWORD_LENGTH} characters")
        if self.since is not None and self.since.utcoffset() is None:
            raise UsageError("since must be timezone-aware")
        object.__setattr__(self, "keywords", tuple(self.keywords))
        try:
            object.__setattr__(self, "match_mode", MatchMode(self.match_mode))
            types = (
                None
                if self.message_types is None
                else frozenset(map(MessageType, self.message_types))
            )
        except ValueError as exc:
            raise UsageError(str(exc)) from exc
        object.__setattr__(self, "message_types", types or None)
        self.to_filter()  # the page checks

    def to_filter(self) -> EventFilter:
        """The [`EventFilter`][asyncsession.filters.EventFilter] every store answers this with.

        ``since`` is rounded up to the millisecond, the precision of stored timestamps, so that
        every store compares it exactly.
        """
        since = self.since
        if since is not None and since.microsecond % 1000:
            since += timedelta(microseconds=1000 - since.microsecond % 1000)
        return EventFilter(
            keywords=self.keywords,
            match_mode=self.match_mode,
            message_types=self.message_types or tuple(MessageType),
            from_=since,
            exclude_synthetic=not self.include_synthetic,
            page=self.page,
            page_size=self.page_size,
        )
