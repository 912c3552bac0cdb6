"""CompactionPlan: deriving a plan from a strategy's result, and the reference merge."""

from __future__ import annotations

import pytest

from asyncsession import (
    AssistantMessage,
    CompactionPlan,
    CompactionResult,
    Insert,
    InvalidCompactionPlan,
    UsageError,
    UserMessage,
)
from asyncsession.testing.contract import labels, summary_turn, synthetic, user


def test_the_worked_example_of_the_spec() -> None:
    """``Σold U1 A1 U2 A2 U3 A3`` to ``[Σnew U3 A3]`` archives the rest and inserts before U3."""
    s = "s"
    old = synthetic(s, AssistantMessage(text="old"))
    u1, a1, u2, a2, u3, a3 = (user(s, t) for t in ("U1", "A1", "U2", "A2", "U3", "A3"))
    active = [old, u1, a1, u2, a2, u3, a3]
    new = synthetic(s, AssistantMessage(text="new"))
    result = CompactionResult(compacted_events=(new, u3, a3), archived_events=(u1, a1, u2, a2))
    plan = CompactionPlan.of(s, active, result)
    assert plan.archive_ids == {old.id, u1.id, a1.id, u2.id, a2.id}
    assert plan.inserts == (Insert.before(u3.id, [new]),)
    merged = plan.apply_to(active)
    assert labels(merged) == ["Σ:old", "U1", "A1", "U2", "A2", "Σ:new", "U3", "A3"]
    assert [e.archived for e in merged] == [True] * 5 + [False] * 3


def test_runs_of_new_events_anchor_on_the_next_existing_event_or_append() -> None:
    """Each run of new events goes before the next kept event; a trailing run is appended."""
    s = "s"
    u1, u2 = user(s, "u1"), user(s, "u2")
    x, y, z = user(s, "x"), user(s, "y"), user(s, "z")
    plan = CompactionPlan.of(s, [u1, u2], CompactionResult(compacted_events=(x, u1, y, u2, z)))
    assert plan.inserts == (
        Insert.before(u1.id, [x]),
        Insert.before(u2.id, [y]),
        Insert.at_end([z]),
    )
    assert not plan.archive_ids
    assert labels(plan.apply_to([u1, u2])) == ["x", "u1", "y", "u2", "z"]
    assert [e.text for e in plan.inserted_events] == ["x", "y", "z"]


def test_an_unchanged_result_is_an_empty_plan() -> None:
    """Keeping every event and adding none plans nothing."""
    s = "s"
    log = [user(s, "a"), user(s, "b")]
    plan = CompactionPlan.of(s, log, CompactionResult.unchanged(log))
    assert plan.is_empty
    assert plan.apply_to(log) == log


def test_a_modified_copy_of_an_existing_event_is_not_rewritten() -> None:
    """Only the position of new events matters; existing events are never rewritten."""
    s = "s"
    u1 = user(s, "u1")
    changed = u1.model_copy(update={"message": UserMessage(text="changed")})
    plan = CompactionPlan.of(s, [u1], CompactionResult(compacted_events=(changed,)))
    assert plan.is_empty


def test_a_new_event_of_another_session_is_refused() -> None:
    """A result that smuggles in another session's event raises."""
    with pytest.raises(UsageError, match="not of session"):
        CompactionPlan.of("s", [], CompactionResult(compacted_events=(user("other", "x"),)))


def test_apply_to_refuses_unknown_ids_and_changes_nothing() -> None:
    """Unknown archive or anchor ids raise InvalidCompactionPlan naming them."""
    log = [user("s", "a")]
    with pytest.raises(InvalidCompactionPlan) as info:
        CompactionPlan(archive_ids=frozenset({"nope"})).apply_to(log)
    assert info.value.unknown_ids == ("nope",)
    with pytest.raises(InvalidCompactionPlan):
        CompactionPlan(inserts=(Insert.before("missing", [user("s", "x")]),)).apply_to(log)
    assert not log[0].archived


def test_inserts_validate_their_shape() -> None:
    """An insert needs events and a non-blank anchor."""
    with pytest.raises(UsageError):
        Insert.at_end([])
    with pytest.raises(UsageError):
        Insert.before(" ", summary_turn("s", "x"))
    assert Insert.at_end([user("s", "x")]).is_append
