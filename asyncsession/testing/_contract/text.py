"""The contract kit: text a store cannot keep is refused, never rewritten.

A string with a lone surrogate (``"\\ud83d"``) does not encode as UTF-8. Wherever it sits in an
event or a session (text, payload, metadata, keys or values, at any depth), the store raises
[`UsageError`][asyncsession.exceptions.UsageError] before it writes anything (the service
refuses them too, before any store sees them).
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from ...events import EventType, Session, SessionEvent
from ...exceptions import UsageError
from ...messages import AssistantMessage, ToolCall, UserMessage
from ._support import ContractBase, boundary, new_id, user

__all__ = ["TextContract", "bad_events"]

LONE: str = "\ud83d"
"""A lone high surrogate: half of an emoji's UTF-16 pair."""


def _nested(bad: str, *, as_key: bool) -> dict[str, JsonValue]:
    inner: dict[str, JsonValue] = {bad: 1} if as_key else {"k": bad}
    return {"outer": [{"deep": inner}]}


def bad_events(session_id: str) -> dict[str, SessionEvent]:
    """One event per place a bad string can hide, by a name for the place."""
    custom = EventType.of("ACME.TEXT")
    return {
        "text": user(session_id, f"hi {LONE}"),
        "payload key": SessionEvent(session_id=session_id, type=custom, payload={LONE: 1}),
        "payload value": SessionEvent(session_id=session_id, type=custom, payload={"k": LONE}),
        "nested payload key": SessionEvent(
            session_id=session_id, type=custom, payload=_nested(LONE, as_key=True)
        ),
        "metadata key": user(session_id, "ok", metadata={LONE: True}),
        "nested metadata value": user(session_id, "ok", metadata=_nested(LONE, as_key=False)),
        "tool call arguments": SessionEvent(
            session_id=session_id,
            message=AssistantMessage(
                tool_calls=[ToolCall(id="c1", name="f", arguments=f'{{"a": "{LONE}"}}')]
            ),
        ),
        "message extra": SessionEvent(
            session_id=session_id, message=UserMessage(text="ok", extra={"name": LONE})
        ),
        "event id": user(session_id, "ok", id=f"e-{LONE}"),
    }


class TextContract(ContractBase):
    """Contract tests for strings that are not UTF-8 text."""

    @pytest.mark.parametrize("place", sorted(bad_events("s")))
    async def test_an_event_with_a_lone_surrogate_is_refused_and_nothing_is_written(
        self, place: str
    ) -> None:
        """Appending such an event (alone or in a batch, versioned or not) raises
        `UsageError` and leaves the log and its version as they were."""
        s = (await self.new_session()).id
        good = user(s, "kept")
        await self.repo.append_event(good)
        bad = bad_events(s)[place]
        fresh = user(s, "never written")
        with pytest.raises(UsageError):
            await self.repo.append_event(bad)
        with pytest.raises(UsageError):
            await self.repo.append_events(s, [fresh, bad])
        with pytest.raises(UsageError):
            await self.repo.append_events(s, [fresh, bad], expected_version=1)
        assert await self.log(s) == [good]
        assert await self.repo.get_event_version(s) == 1
        # The ids were not taken: the good event appends now.
        assert await self.repo.append_events(s, [fresh])
        assert await self.repo.get_event_version(s) == 2

    async def test_a_compaction_inserting_a_lone_surrogate_is_refused(self) -> None:
        """A compaction whose summary holds such a string changes nothing."""
        s = (await self.new_session()).id
        events = [user(s, "a"), user(s, "b")]
        await self.repo.append_events(s, events)
        summary = user(s, LONE)
        edge = boundary(s, [summary, events[1]], [events[0]])
        with pytest.raises(UsageError):
            await self.repo.append_events(s, [summary, edge], 1)
        assert await self.log(s) == events
        assert await self.repo.get_event_version(s) == 1

    @pytest.mark.parametrize("field", ["id", "user_id", "metadata key", "metadata value"])
    async def test_a_session_with_a_lone_surrogate_is_refused(self, field: str) -> None:
        """Saving such a session (either way) raises `UsageError` and stores nothing."""
        values: dict[str, Any] = {"id": new_id(), "user_id": "alice"}
        if field in ("id", "user_id"):
            values[field] = f"{values[field]}-{LONE}"
        else:
            values["metadata"] = {LONE: 1} if field == "metadata key" else {"k": [LONE]}
        session = Session(**values)
        with pytest.raises(UsageError):
            await self.repo.save(session)
        with pytest.raises(UsageError):
            await self.repo.save_if_absent(session)
        if field != "id":
            assert await self.repo.find_by_id(session.id) is None
        if field != "user_id":
            owned = await self.repo.find_by_user_id("alice")
            assert session.id not in {s.id for s in owned}

    async def test_an_existing_session_is_not_updated_with_a_lone_surrogate(self) -> None:
        """An update with bad metadata keeps the session as it was."""
        session = await self.new_session(metadata={"k": "v"})
        with pytest.raises(UsageError):
            await self.repo.save(session.model_copy(update={"metadata": {"k": LONE}}))
        assert await self.repo.find_by_id(session.id) == session

    async def test_valid_non_ascii_text_round_trips(self) -> None:
        """Paired surrogates' characters, NUL-free scripts and emoji are kept exactly."""
        s = (await self.new_session(metadata={"😀": "ü"})).id
        custom = EventType.of("ACME.TEXT")
        events = [
            user(s, "héllo 😀 世界", metadata={"ключ": ["😀"]}),
            SessionEvent(session_id=s, type=custom, payload={"😀": {"ß": "𝄞"}}),
        ]
        await self.repo.append_events(s, events)
        assert await self.log(s) == events
        stored = await self.repo.find_by_id(s)
        assert stored is not None
        assert stored.metadata == {"😀": "ü"}
