"""Sessions, events and event types."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from pydantic import ValidationError

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    EventType,
    Session,
    SessionEvent,
    ToolCall,
    UserMessage,
)
from asyncsession.events import DEFAULT_TIME_TO_LIVE, SYNTHETIC


@pytest.mark.parametrize(
    "name", ["A", "ACME.AUDIT", "X1_2.Y", "A" * 64, "ACME." + "Z" * 59, "USER"]
)
def test_valid_event_type_names_are_accepted(name: str) -> None:
    """Upper-case letters, digits, '_' and '.', starting with a letter, up to 64 characters."""
    assert EventType.of(name).name == name


@pytest.mark.parametrize(
    "name", ["", "acme", "1ACME", "_X", ".X", "ACME-AUDIT", "ACME AUDIT", "A" * 65, "ÄCME", "Acme"]
)
def test_invalid_event_type_names_raise_a_clear_value_error(name: str) -> None:
    """A name that breaks the rule is a ValueError that states the rule."""
    with pytest.raises(ValueError, match="upper-case letters"):
        EventType.of(name)


def test_event_types_compare_by_name_and_message_types_map() -> None:
    """Equal names are equal types; message types know their message type."""
    assert EventType.of("ACME.A") == EventType.of("ACME.A")
    assert len({EventType.of("ACME.A"), EventType.of("ACME.A")}) == 1
    assert EventType.of("USER") == EventType.USER
    assert EventType.USER.is_message
    assert not EventType.of("ACME.A").is_message
    with pytest.raises(AttributeError):
        EventType.USER.name = "X"  # type: ignore[misc]


def test_an_event_takes_its_type_from_its_message() -> None:
    """The type defaults to the message's type; id and timestamp default too."""
    event = SessionEvent(session_id="s", message=UserMessage(text="hi"))
    assert event.type == EventType.USER
    assert event.is_turn_start
    assert event.id
    assert event.timestamp.tzinfo is not None


def test_a_custom_event_carries_a_json_payload_and_no_message() -> None:
    """Custom events have a payload; message events do not; types must match."""
    audit = EventType.of("ACME.AUDIT")
    event = SessionEvent(session_id="s", type=audit, payload={"action": "exported"})
    assert not event.is_message
    assert event.text is None
    assert SessionEvent(session_id="s", type=audit).payload == {}
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", type=audit, message=UserMessage(text="x"))
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", type=EventType.USER)
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", type=EventType.ASSISTANT, message=UserMessage(text="x"))
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", message=UserMessage(text="x"), payload={"a": 1})
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s")
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", type=audit, payload={"not json": object()})


def test_naive_datetimes_are_rejected_and_aware_ones_become_utc_millis() -> None:
    """Timestamps must be aware; they are stored in UTC to the millisecond."""
    with pytest.raises(ValidationError):
        SessionEvent(session_id="s", message=UserMessage(text="x"), timestamp=datetime(2026, 1, 1))  # noqa: DTZ001
    plus_two = timezone(timedelta(hours=2))
    event = SessionEvent(
        session_id="s",
        message=UserMessage(text="x"),
        timestamp=datetime(2026, 1, 1, 12, 0, 0, 123456, tzinfo=plus_two),
    )
    assert event.timestamp == datetime(2026, 1, 1, 10, 0, 0, 123000, tzinfo=UTC)
    assert event.timestamp.tzinfo is UTC


@pytest.mark.parametrize("bad", ["", "   ", "x" * 256, "a\x00b"])
def test_ids_must_be_non_empty_bounded_strings(bad: str) -> None:
    """Session, user and event ids are non-empty, at most 255 characters, without NUL."""
    with pytest.raises(ValidationError):
        Session(id=bad, user_id="u")
    with pytest.raises(ValidationError):
        Session(user_id=bad)
    with pytest.raises(ValidationError):
        SessionEvent(id=bad, session_id="s", message=UserMessage(text="x"))


def test_event_flags() -> None:
    """Synthetic, tool-call and archive flags read as the reference does."""
    call = SessionEvent(
        session_id="s", message=AssistantMessage(tool_calls=[ToolCall(id="1", name="f")])
    )
    assert call.has_tool_calls
    assert not call.is_turn_start
    summary = SessionEvent(
        session_id="s", message=UserMessage(text="x"), metadata={SYNTHETIC: True}
    )
    assert summary.is_synthetic
    assert summary.is_turn_start
    archived = summary.as_archived()
    assert archived.archived
    assert archived.id == summary.id
    assert archived.as_archived() is archived


def test_a_session_defaults_to_sixty_days_and_may_never_expire() -> None:
    """A session built without an expiry lives 60 days; ``expires_at=None`` never expires."""
    created = datetime(2026, 1, 1, tzinfo=UTC)
    session = Session(user_id="u", created_at=created)
    assert session.expires_at == created + DEFAULT_TIME_TO_LIVE
    forever = Session(user_id="u", expires_at=None)
    assert forever.expires_at is None
    assert not forever.is_expired(datetime(3000, 1, 1, tzinfo=UTC))
    assert session.is_expired(created + timedelta(days=61))


def test_a_create_request_validates_its_fields() -> None:
    """A blank id means "generate one"; a blank user is refused; any TTL is accepted."""
    assert CreateSessionRequest(id="  ", user_id="u").id is None
    with pytest.raises(ValidationError):
        CreateSessionRequest(user_id=" ")
    for ttl in (timedelta(0), timedelta(seconds=-60)):
        assert CreateSessionRequest(user_id="u", time_to_live=ttl).time_to_live == ttl
