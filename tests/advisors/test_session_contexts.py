"""SessionContexts: reading the session advisors' keys from an advisor context."""

from __future__ import annotations

import pytest

from asyncsession import CreateSessionRequest, EventFilter
from asyncsession.advisors import (
    EVENT_FILTER_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    SESSION_METADATA_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    SessionContexts,
)
from asyncsession.exceptions import MissingSessionId, UsageError


def test_the_context_keys_have_the_seeds_values() -> None:
    """The key strings are the reference's."""
    assert SESSION_ID_CONTEXT_KEY == "chat_memory_conversation_id"
    assert USER_ID_CONTEXT_KEY == "chat_memory_user_id"
    assert EVENT_FILTER_CONTEXT_KEY == "chat_memory_event_filter_id"


@pytest.mark.parametrize("value", [None, "", "   "])
def test_a_missing_or_blank_session_id_is_refused(value: str | None) -> None:
    """No usable session id raises MissingSessionId, never a fallback."""
    context = {} if value is None else {SESSION_ID_CONTEXT_KEY: value}
    with pytest.raises(MissingSessionId):
        SessionContexts.session_id(context)


def test_values_of_the_wrong_type_are_usage_errors() -> None:
    """Each key holds its own type."""
    with pytest.raises(UsageError, match="must be a string"):
        SessionContexts.session_id({SESSION_ID_CONTEXT_KEY: 7})
    with pytest.raises(UsageError, match="must be a string"):
        SessionContexts.user_id({USER_ID_CONTEXT_KEY: 7})
    with pytest.raises(UsageError, match="must be a mapping"):
        SessionContexts.metadata({SESSION_METADATA_CONTEXT_KEY: ["x"]})
    with pytest.raises(UsageError, match="must be an EventFilter"):
        SessionContexts.event_filter({EVENT_FILTER_CONTEXT_KEY: "last 5"})


def test_the_create_request_is_the_one_the_advisors_use() -> None:
    """Session id, the context's user (else the default) and the context's metadata."""
    context = {USER_ID_CONTEXT_KEY: "ann", SESSION_METADATA_CONTEXT_KEY: {"plan": "pro"}}

    request = SessionContexts.create_request("s1", context)
    anonymous = SessionContexts.create_request("s2", {USER_ID_CONTEXT_KEY: " "})

    assert request == CreateSessionRequest(id="s1", user_id="ann", metadata={"plan": "pro"})
    assert anonymous.user_id == "default-user"
    assert SessionContexts.event_filter({EVENT_FILTER_CONTEXT_KEY: None}) is None
    window = EventFilter.last_n(3)
    assert SessionContexts.event_filter({EVENT_FILTER_CONTEXT_KEY: window}) is window
