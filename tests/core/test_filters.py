"""EventFilter: validation, merge, matching and windows."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from asyncsession import (
    AssistantMessage,
    EventFilter,
    EventType,
    SessionEvent,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UsageError,
    UserMessage,
)
from asyncsession.filters import MatchMode
from asyncsession.messages import MessageType
from asyncsession.testing._contract._support import assistant, boundary, labels, synthetic, user


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        pytest.param({"last_n": 0}, "last_n must be greater than 0", id="last-n-zero"),
        pytest.param({"last_n": -3}, "last_n must be greater than 0", id="last-n-negative"),
        pytest.param({"page_size": 0}, "page_size must be greater than 0", id="page-size-zero"),
        pytest.param({"page": -1, "page_size": 2}, "page must be >= 0", id="negative-page"),
        pytest.param({"page": 1}, "page_size must be set", id="page-without-size"),
        pytest.param({"last_n": 3, "page_size": 2}, "mutually exclusive", id="last-n-and-page"),
        pytest.param({"from_": datetime(2026, 1, 1)}, "timezone-aware", id="naive-from"),  # noqa: DTZ001
        pytest.param(
            {"from_": datetime(2026, 2, 1, tzinfo=UTC), "to": datetime(2026, 1, 1, tzinfo=UTC)},
            "is after",
            id="from-after-to",
        ),
        pytest.param({"pattern": "("}, "invalid pattern", id="bad-regex"),
        pytest.param({"message_types": ["robot"]}, "unknown message type", id="bad-type"),
        pytest.param({"event_types": ["bad name"]}, "invalid event type", id="bad-event-type"),
        pytest.param({"keywords": ["a"], "match_mode": "some"}, "match_mode", id="bad-mode"),
        pytest.param({"keywords": "abc"}, "list of terms", id="keywords-string"),
    ],
)
def test_invalid_criteria_raise_a_clear_error(kwargs: dict[str, object], message: str) -> None:
    """Bad or contradictory criteria raise UsageError (also a ValueError)."""
    with pytest.raises(UsageError, match=message) as info:
        EventFilter(**kwargs)  # type: ignore[arg-type]
    assert isinstance(info.value, ValueError)


def test_normalisation() -> None:
    """Keywords are lower-cased, blanks dropped, empty sets become None, page defaults to 0."""
    f = EventFilter(keyword="  ", keywords=["A", " ", "b"], message_types=[], page_size=5)
    assert f.keyword is None
    assert f.keywords == ("a", "b")
    assert f.match_mode is MatchMode.ANY
    assert f.message_types is None
    assert f.page == 0
    assert EventFilter(keywords=[" "]).match_mode is None
    assert EventFilter(keyword="HeLLo").keyword == "hello"
    assert EventFilter(pattern="a+").pattern == re.compile("a+")
    assert EventFilter(message_types=["user"]).message_types == frozenset({MessageType.USER})


def test_factories() -> None:
    """The factories build the filters the spec names."""
    assert EventFilter.all() == EventFilter()
    assert EventFilter.active() == EventFilter(exclude_archived=True, active_view=True)
    assert EventFilter.last_n(5).last_n == 5
    assert EventFilter.real_only().exclude_synthetic
    k = EventFilter.keyword_search("X")
    assert (k.keyword, k.page, k.page_size) == ("x", 0, 10)
    ks = EventFilter.keywords_search(["a", "b"], MatchMode.ALL)
    assert (ks.keywords, ks.match_mode, ks.page_size) == (("a", "b"), MatchMode.ALL, 10)
    assert EventFilter.pattern_search("^a", page=2, page_size=3).page == 2


def test_filters_are_immutable_hashable_values() -> None:
    """Filters compare by value, hash, and refuse mutation."""
    assert EventFilter(last_n=3, keyword="x") == EventFilter(keyword="X", last_n=3)
    assert len({EventFilter.active(), EventFilter.active()}) == 1
    with pytest.raises(AttributeError):
        EventFilter.active().exclude_archived = False  # type: ignore[misc]
    with pytest.raises(AttributeError):
        EventFilter.active().last_n = 3  # type: ignore[misc]
    assert "last_n=3" in repr(EventFilter.last_n(3))


def test_merge_replaces_set_fields_and_ors_the_flags() -> None:
    """Every field the other filter sets wins; flags are OR-ed; None is ignored."""
    base = EventFilter(keyword="a", exclude_synthetic=True, message_types=[MessageType.USER])
    other = EventFilter(keyword="b", exclude_archived=True)
    merged = base.merge(other)
    assert merged.keyword == "b"
    assert merged.exclude_synthetic
    assert merged.exclude_archived
    assert merged.message_types == frozenset({MessageType.USER})
    assert base.merge(None) is base
    assert EventFilter.active().merge(EventFilter()).active_view


def test_merge_replaces_the_window_as_a_unit() -> None:
    """A request's last_n or page replaces the base window whole, without a conflict error."""
    merged = EventFilter.last_n(20).merge(EventFilter.keyword_search("x", 1, 5))
    assert (merged.last_n, merged.page, merged.page_size) == (None, 1, 5)
    merged = EventFilter(page=2, page_size=3).merge(EventFilter.last_n(4))
    assert (merged.last_n, merged.page, merged.page_size) == (4, None, None)
    kept = EventFilter.last_n(7).merge(EventFilter(keyword="y"))
    assert kept.last_n == 7
    assert kept.keyword == "y"


def test_merge_carries_match_mode_with_keywords() -> None:
    """The keywords and their match mode travel together."""
    merged = EventFilter.keywords_search(["a"], MatchMode.ALL).merge(
        EventFilter(keywords=["b"], match_mode=MatchMode.ANY)
    )
    assert (merged.keywords, merged.match_mode) == (("b",), MatchMode.ANY)


def _log() -> list[SessionEvent]:
    s = "s"
    base = datetime(2026, 1, 1, tzinfo=UTC)
    call = AssistantMessage(tool_calls=[ToolCall(id="c", name="t")])
    result = ToolResponseMessage(responses=[ToolResponse(id="c", name="t", data="R")])
    return [
        user(s, "U1 apple", timestamp=base),
        assistant(s, "A1 Banana", timestamp=base + timedelta(minutes=1)),
        user(s, "U2", timestamp=base + timedelta(minutes=2)),
        SessionEvent(session_id=s, message=call, timestamp=base + timedelta(minutes=3)),
        SessionEvent(session_id=s, message=result, timestamp=base + timedelta(minutes=4)),
        assistant(s, "A2 apple banana", timestamp=base + timedelta(minutes=5)),
        SessionEvent(session_id=s, type=EventType.of("ACME.X"), payload={}),
        synthetic(s, AssistantMessage(text="summary apple")),
    ]


def test_apply_is_the_reference_read() -> None:
    """Criteria AND together; keywords match literally and case-insensitively."""
    log = _log()
    assert labels(EventFilter(keyword="APPLE").apply(log)) == [
        "U1 apple",
        "A2 apple banana",
        "Σ:summary apple",
    ]
    both = EventFilter.keywords_search(["apple", "banana"], MatchMode.ALL, page_size=50)
    assert labels(both.apply(log)) == ["A2 apple banana"]
    assert labels(EventFilter(keyword="apple", exclude_synthetic=True).apply(log)) == [
        "U1 apple",
        "A2 apple banana",
    ]
    assert len(EventFilter(message_types=[MessageType.TOOL]).apply(log)) == 1
    assert len(EventFilter.all().apply(log)) == 8
    assert len(EventFilter.active().apply(log)) == 7


def test_turn_aware_window_extends_to_the_turn_start() -> None:
    """``U1 A1 U2 A2(call) T2 A2'`` with last_n 2 gives ``U2 A2 T2 A2'``."""
    log = _log()[:6]
    window = EventFilter.last_n(2).apply(log)
    assert [e.type for e in window] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.ASSISTANT,
    ]
    assert window[0].text == "U2"
    assert EventFilter.last_n(2).apply_window(log) == log[-2:]
    assert EventFilter(last_n=2, keyword="a").apply(log) == [log[1], log[5]]


def test_plain_window_pages_and_huge_pages() -> None:
    """Pages slice in order; a huge page is empty."""
    log = _log()
    assert EventFilter(page=1, page_size=3).apply_window(log) == log[3:6]
    assert EventFilter(page=10**12, page_size=10**6).apply_window(log) == []
    assert EventFilter().apply_window(log) == log


def test_the_active_view_honours_the_compaction_point_for_custom_events() -> None:
    """Custom events asked for in the active view must come after the newest compaction."""
    log = _log()
    asked = EventFilter.active().merge(EventFilter(event_types=[EventType.of("ACME.X")]))
    assert len(asked.apply(log)) == 1
    compacted = [*log, boundary("s", log[:6])]
    assert asked.apply(compacted) == []
    assert len(asked.apply([*compacted, log[6].model_copy(update={"id": "later"})])) == 1
    assert asked.without_window() == asked
    assert not EventFilter.last_n(3).without_window().has_window


def test_an_event_without_text_never_matches_a_text_search() -> None:
    """Tool results and custom events have no text."""
    result = SessionEvent(
        session_id="s",
        message=ToolResponseMessage(responses=[ToolResponse(id="c", name="t", data="apple")]),
    )
    assert not EventFilter(keyword="apple").matches(result)
    assert not EventFilter(pattern="a").matches(result)
    assert EventFilter(pattern="^U").matches(user("s", "U"))
    assert not EventFilter(pattern="^U").matches(user("s", "xU"))
    assert EventFilter(keyword="x").has_text_criteria
    assert not EventFilter(keyword=" ").has_text_criteria
    assert EventFilter(message_types=[MessageType.USER]).matches(
        SessionEvent(session_id="s", message=UserMessage(text="x"))
    )
