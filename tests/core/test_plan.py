"""A compaction as one commit: built from a strategy's result, and read back by the reference
derivation (``EventFilter.apply`` over a log held as a list)."""

from __future__ import annotations

import pytest

from asyncsession import AssistantMessage, EventFilter, EventType, UsageError, UserMessage
from asyncsession._compaction_pass import compaction_commit
from asyncsession.compaction_protocols import CompactionRecord, CompactionResult
from asyncsession.events import COMPACTION_ID
from asyncsession.testing._contract._support import labels, synthetic, user


def _always(_: object) -> bool:
    return True


def test_the_worked_example_of_the_spec() -> None:
    """``Σold U1 A1 U2 A2 U3 A3`` to ``[Σnew U3 A3]``: one commit of ``Σnew`` and the boundary;
    read back, the log only grew and the view is the new one, in view order."""
    s = "s"
    old = synthetic(s, AssistantMessage(text="old"))
    u1, a1, u2, a2, u3, a3 = (user(s, t) for t in ("U1", "A1", "U2", "A2", "U3", "A3"))
    active = [old, u1, a1, u2, a2, u3, a3]
    new = synthetic(s, AssistantMessage(text="new"))
    result = CompactionResult(compacted_events=(new, u3, a3), archived_events=(u1, a1, u2, a2))
    commit = compaction_commit(s, active, result, _always, "strategy")
    assert commit is not None
    *written, boundary = commit
    assert [e.id for e in written] == [new.id]
    assert written[0].metadata[COMPACTION_ID] == boundary.id
    assert boundary.type == EventType.COMPACTION
    record = CompactionRecord.from_event(boundary)
    assert record.covered == (old.id, u1.id, a1.id, u2.id, a2.id)
    assert record.kept == (u3.id, a3.id)
    assert record.summaries == (new.id,)
    assert record.view == (new.id, u3.id, a3.id)
    log = [*active, *commit]
    messages = EventFilter(event_types=[EventType.USER, EventType.ASSISTANT])
    read = messages.apply(log)
    assert labels(read) == ["Σ:old", "U1", "A1", "U2", "A2", "U3", "A3", "Σ:new"]
    assert [e.archived for e in read] == [True] * 5 + [False] * 3
    assert labels(EventFilter.active().apply(log)) == ["Σ:new", "U3", "A3"]


def test_new_events_keep_their_place_in_the_view_and_are_appended_in_its_order() -> None:
    """New events go into the commit in the order the view has them; the view interleaves."""
    s = "s"
    u1, u2 = user(s, "u1"), user(s, "u2")
    x, y, z = user(s, "x"), user(s, "y"), user(s, "z")
    commit = compaction_commit(
        s, [u1, u2], CompactionResult(compacted_events=(x, u1, y, u2, z)), _always, "s"
    )
    assert commit is not None
    assert [e.text for e in commit[:-1]] == ["x", "y", "z"]
    log = [u1, u2, *commit]
    assert labels(EventFilter.active().apply(log)) == ["x", "u1", "y", "u2", "z"]
    assert labels(EventFilter(event_types=[EventType.USER]).apply(log)) == [
        "u1",
        "u2",
        "x",
        "y",
        "z",
    ]


def test_an_unchanged_result_writes_nothing() -> None:
    """Keeping every event and adding none is no commit."""
    s = "s"
    log = [user(s, "a"), user(s, "b")]
    assert compaction_commit(s, log, CompactionResult.unchanged(log), _always, "s") is None


def test_a_modified_copy_of_an_existing_event_is_not_rewritten() -> None:
    """Only new ids are written; an existing event is never rewritten, whatever the copy says."""
    s = "s"
    u1 = user(s, "u1")
    changed = u1.model_copy(update={"message": UserMessage(text="changed")})
    assert (
        compaction_commit(s, [u1], CompactionResult(compacted_events=(changed,)), _always, "s")
        is None
    )


def test_a_new_event_flagged_archived_is_written_out_of_the_view() -> None:
    """A new event the result flags archived is stored, covered, and not in the view."""
    s = "s"
    u1 = user(s, "u1")
    question, reply = user(s, "q"), AssistantMessage(text="r")
    answer = synthetic(s, reply)
    result = CompactionResult(
        compacted_events=(question.as_archived(), answer), archived_events=(u1,)
    )
    commit = compaction_commit(s, [u1], result, _always, "s")
    assert commit is not None
    record = CompactionRecord.from_event(commit[-1])
    assert record.covered == (u1.id, question.id)
    assert record.view == (answer.id,)
    assert COMPACTION_ID not in commit[0].metadata
    log = [u1, *commit]
    assert labels(EventFilter.active().apply(log)) == ["Σ:r"]
    assert [e.archived for e in EventFilter(event_types=[EventType.USER]).apply(log)] == [
        True,
        True,
    ]


def test_a_new_event_of_another_session_is_refused() -> None:
    """A result that smuggles in another session's event raises."""
    with pytest.raises(UsageError, match="not of session"):
        compaction_commit(
            "s", [], CompactionResult(compacted_events=(user("other", "x"),)), _always, "s"
        )


def test_only_the_newest_boundary_defines_the_view() -> None:
    """Two compactions: the first one's view no longer counts."""
    s = "s"
    u1, u2, u3, x = user(s, "u1"), user(s, "u2"), user(s, "u3"), user(s, "x")
    first = compaction_commit(s, [u1, u2], CompactionResult(compacted_events=(u2,)), _always, "s")
    assert first is not None
    second = compaction_commit(
        s, [u2, u3], CompactionResult(compacted_events=(x, u3)), _always, "s"
    )
    assert second is not None
    log = [u1, u2, *first, u3, *second]
    assert labels(EventFilter.active().apply(log)) == ["x", "u3"]
    users = EventFilter(event_types=[EventType.USER]).apply(log)
    assert [(e.text, e.archived) for e in users] == [
        ("u1", True),
        ("u2", True),
        ("u3", False),
        ("x", False),
    ]
