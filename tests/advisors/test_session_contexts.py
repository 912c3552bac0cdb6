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


@pytest.mark.parametrize(
    "name",
    [
        "SESSION_ID_CONTEXT_KEY",
        "USER_ID_CONTEXT_KEY",
        "EVENT_FILTER_CONTEXT_KEY",
        "SESSION_METADATA_CONTEXT_KEY",
        "REQUEST_EVENT_IDS_CONTEXT_KEY",
        "RESPONSE_EVENT_IDS_CONTEXT_KEY",
    ],
)
def test_the_context_keys_are_memory_advisor_attributes(name: str) -> None:
    """``SessionMemoryAdvisor.<KEY>`` (where the reference documents them) is the module's key,
    on the class and on an instance."""
    from asyncsession import DefaultSessionService, InMemorySessionRepository
    from asyncsession.advisors import SessionMemoryAdvisor, contexts

    advisor = SessionMemoryAdvisor(DefaultSessionService(InMemorySessionRepository()))
    assert getattr(SessionMemoryAdvisor, name) == getattr(contexts, name)
    assert getattr(advisor, name) == getattr(contexts, name)


def test_the_reference_spelling_routes_a_call() -> None:
    """A context built with the class attributes reads like one built with the module keys."""
    from asyncsession.advisors import SessionMemoryAdvisor

    context = {
        SessionMemoryAdvisor.SESSION_ID_CONTEXT_KEY: "s",
        SessionMemoryAdvisor.USER_ID_CONTEXT_KEY: "alice",
    }
    assert SessionContexts.session_id(context) == "s"
    assert SessionContexts.user_id(context) == "alice"


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
