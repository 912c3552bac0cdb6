"""Strings that are not UTF-8 text: refused with `UsageError` before any store writes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import openai
import pytest

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    Session,
    SessionEvent,
    UsageError,
    UserMessage,
)
from asyncsession._text import check_event_text
from asyncsession.openai import ChatClient
from asyncsession.testing._contract.text import LONE, bad_events


class RecordingStore(InMemorySessionRepository):
    """A user's own store, modelled as one that checks nothing itself: it records every write
    and then stores it (bypassing the in-memory store's own checks)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    async def save_if_absent(self, session: Session) -> bool:
        self.writes.append("save_if_absent")
        return True

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
    ) -> bool:
        self.writes.append("append_events")
        return True

    async def append_event(self, event: SessionEvent) -> None:
        self.writes.append("append_event")


def test_invalid_text_is_a_usage_error_that_says_where() -> None:
    """The error is ours, says where the string is and where in it, and prints safely."""
    event = SessionEvent(id="e", session_id="s", message=UserMessage(text="fine"))
    with pytest.raises(UsageError) as caught:
        check_event_text(event.model_copy(update={"metadata": {"k": f"ab{LONE}"}}))
    error = caught.value
    assert isinstance(error, ValueError)
    assert "event 'e': metadata['k'] holds" in str(error)
    assert "at index 2" in str(error)
    assert "\\ud83d" in str(error)
    str(error).encode("utf-8")  # the message itself is always valid text


@pytest.mark.parametrize("place", sorted(bad_events("s")))
async def test_the_service_refuses_bad_events_before_a_users_store_sees_them(
    place: str,
) -> None:
    """A store that checks nothing is protected by the service: nothing reaches it."""
    store = RecordingStore()
    service = DefaultSessionService(store)
    bad = bad_events("s")[place]
    with pytest.raises(UsageError) as caught:
        await service.append_event(bad)
    with pytest.raises(UsageError):
        await service.append_events("s", [bad])
    assert store.writes == []
    assert "event " in str(caught.value)  # names the place


async def test_the_service_refuses_a_bad_message_at_the_start_of_a_turn() -> None:
    """A chat turn and ``append_message`` refuse too, before any command."""
    store = RecordingStore()
    service = DefaultSessionService(store)
    chat = _chat(service)
    with pytest.raises(UsageError):
        await chat.call(UserMessage(text=LONE), session_id="s")
    with pytest.raises(UsageError):
        await service.append_message("s", UserMessage(text=f"x{LONE}"))
    assert store.writes == []


@pytest.mark.parametrize(
    "values",
    [
        {"user_id": f"u{LONE}"},
        {"user_id": "u", "id": f"s{LONE}"},
        {"user_id": "u", "metadata": {LONE: 1}},
        {"user_id": "u", "metadata": {"k": {"n": [LONE]}}},
    ],
)
async def test_the_service_refuses_a_bad_session(values: dict[str, Any]) -> None:
    """Creating a session with such a string writes nothing, on the first turn too."""
    store = RecordingStore()
    service = DefaultSessionService(store)
    request = CreateSessionRequest(**values)
    with pytest.raises(UsageError):
        await service.create(request)
    with pytest.raises(UsageError):
        await _chat(service).call(
            "hi",
            session_id="s" if request.id is None else request.id,
            user_id=request.user_id,
            metadata=request.metadata,
        )
    assert store.writes == []


def _chat(service: DefaultSessionService) -> ChatClient:
    """A client whose model is never reached: the turns here are refused before it."""
    unused = openai.AsyncOpenAI(api_key="unused", base_url="http://unused.test/v1")
    return ChatClient(unused, model="m", sessions=service)


async def test_text_with_paired_surrogates_is_kept() -> None:
    """Only lone surrogates are refused: an emoji (a surrogate pair in UTF-16) is fine."""
    service = DefaultSessionService(InMemorySessionRepository())
    session = await service.create(CreateSessionRequest(user_id="u", metadata={"😀": "😀"}))
    await service.append_message(session.id, UserMessage(text="😀 \U0001f600"))
    events = await service.get_events(session.id, EventFilter.all())
    assert [e.text for e in events] == ["😀 😀"]


@pytest.mark.parametrize(
    ("metadata", "where"),
    [
        pytest.param({"a": [1, f"x{LONE}"]}, "event 'e': metadata['a'][1]", id="in-a-list"),
        pytest.param({"a": {LONE: 1}}, "event 'e': metadata['a'] (a key)", id="a-nested-key"),
        pytest.param(
            {"a": {"b": [2.0, None, True, LONE]}}, "event 'e': metadata['a']['b'][3]", id="deep"
        ),
    ],
)
def test_the_error_names_the_path_to_the_string(metadata: dict[str, object], where: str) -> None:
    """``where`` is the field, then every key and index down to the string."""
    event = SessionEvent(
        id="e", session_id="s", message=UserMessage(text="fine"), metadata=metadata
    )
    with pytest.raises(UsageError) as caught:
        check_event_text(event)
    assert str(caught.value).startswith(f"{where} holds")
    assert check_event_text(event.model_copy(update={"metadata": {"a": [1, "ok"]}})) is None
