"""Google ADK's own session service tests (``tests/unittests/sessions/test_session_service.py``
of google-adk 2.13), run on ADK's ``InMemorySessionService`` (the reference, with and without
its light-copy feature, as ADK's own fixture runs it) and on ``AdkSessionService`` over both
stores, with the original assertions.

Ported: every test that runs on the ``session_service`` fixture (the service-agnostic ones).
Left out: the tests of ``DatabaseSessionService``/``SqliteSessionService`` internals (engine
options, SQL URLs, read-only factories, rollbacks, stale-session rejection, missing state rows)
and the one that reaches into ``InMemorySessionService.sessions``; the stale-writer behaviour is
covered for ours in ``test_google_adk_service.py``.
"""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions import BaseSessionService
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types


def now() -> float:
    return datetime.now().astimezone(UTC).timestamp()


async def test_get_empty_session(adk_service: BaseSessionService) -> None:
    assert not await adk_service.get_session(
        app_name="my_app", user_id="test_user", session_id="123"
    )


async def test_create_get_session(adk_service: BaseSessionService) -> None:
    app_name, user_id, state = "my_app", "test_user", {"key": "value"}
    session = await adk_service.create_session(app_name=app_name, user_id=user_id, state=state)
    assert session.app_name == app_name
    assert session.user_id == user_id
    assert session.id
    assert session.state == state
    assert session.last_update_time <= now()

    got_session = await adk_service.get_session(
        app_name=app_name, user_id=user_id, session_id=session.id
    )
    assert got_session == session
    assert got_session.last_update_time <= now()

    await adk_service.delete_session(app_name=app_name, user_id=user_id, session_id=session.id)
    assert (
        await adk_service.get_session(app_name=app_name, user_id=user_id, session_id=session.id)
        is None
    )


async def test_create_and_list_sessions(adk_service: BaseSessionService) -> None:
    app_name, user_id = "my_app", "test_user"
    session_ids = ["session" + str(i) for i in range(5)]
    for session_id in session_ids:
        await adk_service.create_session(
            app_name=app_name,
            user_id=user_id,
            session_id=session_id,
            state={"key": "value" + session_id},
        )
    sessions = (await adk_service.list_sessions(app_name=app_name, user_id=user_id)).sessions
    assert len(sessions) == len(session_ids)
    assert {s.id for s in sessions} == set(session_ids)
    for session in sessions:
        assert session.state == {"key": "value" + session.id}


async def test_list_sessions_all_users(adk_service: BaseSessionService) -> None:
    app_name = "my_app"
    for user, sid in (("user1", "session1a"), ("user1", "session1b"), ("user2", "session2a")):
        await adk_service.create_session(
            app_name=app_name, user_id=user, session_id=sid, state={"key": "value" + sid[-2:]}
        )
    sessions_1 = (await adk_service.list_sessions(app_name=app_name, user_id="user1")).sessions
    assert len(sessions_1) == 2
    sessions_1_map = {s.id: s for s in sessions_1}
    assert sessions_1_map["session1a"].state == {"key": "value1a"}
    assert sessions_1_map["session1b"].state == {"key": "value1b"}

    sessions_2 = (await adk_service.list_sessions(app_name=app_name, user_id="user2")).sessions
    assert len(sessions_2) == 1
    assert sessions_2[0].id == "session2a"
    assert sessions_2[0].state == {"key": "value2a"}

    sessions_all = (await adk_service.list_sessions(app_name=app_name, user_id=None)).sessions
    assert len(sessions_all) == 3
    sessions_all_map = {s.id: s for s in sessions_all}
    assert sessions_all_map["session1a"].state == {"key": "value1a"}
    assert sessions_all_map["session1b"].state == {"key": "value1b"}
    assert sessions_all_map["session2a"].state == {"key": "value2a"}


async def test_app_state_is_shared_by_all_users_of_app(adk_service: BaseSessionService) -> None:
    app_name = "my_app"
    session1 = await adk_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"app:k1": "v1"}
    )
    event = Event(
        invocation_id="inv1", author="user", actions=EventActions(state_delta={"app:k2": "v2"})
    )
    await adk_service.append_event(session=session1, event=event)
    session2 = await adk_service.create_session(app_name=app_name, user_id="u2", session_id="s2")
    assert session2.state == {"app:k1": "v1", "app:k2": "v2"}
    session1_got = await adk_service.get_session(app_name=app_name, user_id="u1", session_id="s1")
    assert session1_got is not None
    assert session1_got.state.get("app:k1") == "v1"
    assert session1_got.state.get("app:k2") == "v2"


async def test_user_state_is_shared_only_by_user_sessions(
    adk_service: BaseSessionService,
) -> None:
    app_name = "my_app"
    session1 = await adk_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"user:k1": "v1"}
    )
    event = Event(
        invocation_id="inv1", author="user", actions=EventActions(state_delta={"user:k2": "v2"})
    )
    await adk_service.append_event(session=session1, event=event)
    session1b = await adk_service.create_session(app_name=app_name, user_id="u1", session_id="s1b")
    assert session1b.state == {"user:k1": "v1", "user:k2": "v2"}
    session2 = await adk_service.create_session(app_name=app_name, user_id="u2", session_id="s2")
    assert session2.state == {}


async def test_session_state_is_not_shared(adk_service: BaseSessionService) -> None:
    app_name = "my_app"
    session1 = await adk_service.create_session(
        app_name=app_name, user_id="u1", session_id="s1", state={"sk1": "v1"}
    )
    event = Event(
        invocation_id="inv1", author="user", actions=EventActions(state_delta={"sk2": "v2"})
    )
    await adk_service.append_event(session=session1, event=event)
    session1_got = await adk_service.get_session(app_name=app_name, user_id="u1", session_id="s1")
    assert session1_got is not None
    assert session1_got.state.get("sk1") == "v1"
    assert session1_got.state.get("sk2") == "v2"
    session1b = await adk_service.create_session(app_name=app_name, user_id="u1", session_id="s1b")
    assert session1b.state == {}


async def test_temp_state_is_not_persisted_in_state_or_events(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1", session_id="s1")
    event = Event(
        invocation_id="inv1",
        author="user",
        actions=EventActions(state_delta={"temp:k1": "v1", "sk": "v2"}),
    )
    await adk_service.append_event(session=session, event=event)
    assert session.state.get("temp:k1") == "v1"
    assert session.state.get("sk") == "v2"
    assert "temp:k1" not in event.actions.state_delta
    assert event.actions.state_delta.get("sk") == "v2"


async def test_temp_state_visible_across_sequential_events(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1", session_id="s_seq")
    event1 = Event(
        invocation_id="inv1",
        author="agent1",
        actions=EventActions(state_delta={"temp:output": "result_from_a1"}),
    )
    await adk_service.append_event(session=session, event=event1)
    assert session.state.get("temp:output") == "result_from_a1"
    assert "temp:output" not in event1.actions.state_delta


async def test_get_session_respects_user_id(adk_service: BaseSessionService) -> None:
    app_name = "my_app"
    session1 = await adk_service.create_session(app_name=app_name, user_id="u1", session_id="s1")
    await adk_service.append_event(session1, Event(invocation_id="inv1", author="user"))
    await adk_service.create_session(app_name=app_name, user_id="u2", session_id="s1")
    session2_got = await adk_service.get_session(app_name=app_name, user_id="u2", session_id="s1")
    assert session2_got is not None
    assert session2_got.user_id == "u2"
    assert len(session2_got.events) == 0


async def test_create_session_with_existing_id_raises_error(
    adk_service: BaseSessionService,
) -> None:
    await adk_service.create_session(
        app_name="my_app", user_id="test_user", session_id="existing_session"
    )
    with pytest.raises(AlreadyExistsError):
        await adk_service.create_session(
            app_name="my_app", user_id="test_user", session_id="existing_session"
        )


async def test_append_event_bytes(adk_service: BaseSessionService) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="user")
    test_content = types.Content(
        role="user",
        parts=[types.Part.from_bytes(data=b"test_image_data", mime_type="image/png")],
    )
    test_grounding_metadata = types.GroundingMetadata(
        search_entry_point=types.SearchEntryPoint(sdk_blob=b"test_sdk_blob")
    )
    event = Event(
        invocation_id="invocation",
        author="user",
        content=test_content,
        grounding_metadata=test_grounding_metadata,
    )
    await adk_service.append_event(session=session, event=event)
    assert session.events[0].content == test_content

    got = await adk_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
    assert got is not None
    events = got.events
    assert len(events) == 1
    assert events[0].content == test_content
    assert events[0].grounding_metadata == test_grounding_metadata


async def test_append_event_complete(adk_service: BaseSessionService) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="user")
    event = Event(
        invocation_id="invocation",
        author="user",
        content=types.Content(role="user", parts=[types.Part(text="test_text")]),
        turn_complete=True,
        partial=False,
        actions=EventActions(artifact_delta={"file": 0}, transfer_to_agent="agent", escalate=True),
        long_running_tool_ids={"tool1"},
        error_code="error_code",
        error_message="error_message",
        interrupted=True,
        grounding_metadata=types.GroundingMetadata(web_search_queries=["query1"]),
        usage_metadata=types.GenerateContentResponseUsageMetadata(
            prompt_token_count=1, candidates_token_count=1, total_token_count=2
        ),
        citation_metadata=types.CitationMetadata(),
        custom_metadata={"custom_key": "custom_value"},
        timestamp=1700000000.123,
        input_transcription=types.Transcription(text="input transcription", finished=True),
        output_transcription=types.Transcription(text="output transcription", finished=True),
    )
    await adk_service.append_event(session=session, event=event)
    assert (
        await adk_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
        == session
    )


async def test_session_last_update_time_updates_on_event(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="user")
    original_update_time = session.last_update_time
    event_timestamp = original_update_time + 10
    event = Event(invocation_id="invocation", author="user", timestamp=event_timestamp)
    await adk_service.append_event(session=session, event=event)
    assert session.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    refreshed = await adk_service.get_session(
        app_name="my_app", user_id="user", session_id=session.id
    )
    assert refreshed is not None
    assert refreshed.last_update_time == pytest.approx(event_timestamp, abs=1e-6)
    assert refreshed.last_update_time > original_update_time


async def test_get_session_with_config(adk_service: BaseSessionService) -> None:
    app_name, user_id = "my_app", "user"
    num_test_events = 5
    session = await adk_service.create_session(app_name=app_name, user_id=user_id)
    for i in range(1, num_test_events + 1):
        await adk_service.append_event(session, Event(author="user", timestamp=i))

    async def get(config: GetSessionConfig | None = None) -> list[Event]:
        got = await adk_service.get_session(
            app_name=app_name, user_id=user_id, session_id=session.id, config=config
        )
        assert got is not None
        return got.events

    assert len(await get()) == num_test_events
    assert not await get(GetSessionConfig(num_recent_events=0))
    num_recent_events = 3
    events = await get(GetSessionConfig(num_recent_events=num_recent_events))
    assert len(events) == num_recent_events
    assert events[0].timestamp == num_test_events - num_recent_events + 1
    after_timestamp = 4.0
    events = await get(GetSessionConfig(after_timestamp=after_timestamp))
    assert len(events) == num_test_events - after_timestamp + 1
    assert events[0].timestamp == after_timestamp
    assert not await get(GetSessionConfig(after_timestamp=num_test_events * 10))
    events = await get(
        GetSessionConfig(after_timestamp=after_timestamp, num_recent_events=num_recent_events)
    )
    assert len(events) == num_test_events - after_timestamp + 1


async def test_partial_events_are_not_persisted(adk_service: BaseSessionService) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="user")
    await adk_service.append_event(session, Event(author="user", partial=True))
    assert len(session.events) == 0
    got = await adk_service.get_session(app_name="my_app", user_id="user", session_id=session.id)
    assert got is not None
    assert len(got.events) == 0


async def test_get_user_state_returns_empty_dict_when_no_state_exists(
    adk_service: BaseSessionService,
) -> None:
    state = await adk_service.get_user_state(app_name="my_app", user_id="u1")
    assert not state


async def test_get_user_state_returns_state_written_via_append_event(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1")
    await adk_service.append_event(
        session,
        Event(
            author="system",
            actions=EventActions(state_delta={"user:profile": {"name": "Alice"}, "session_key": 1}),
        ),
    )
    state = await adk_service.get_user_state(app_name="my_app", user_id="u1")
    assert state == {"profile": {"name": "Alice"}}
    assert "session_key" not in state


async def test_get_user_state_is_not_visible_across_users(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1")
    await adk_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:secret": "only-for-u1"})),
    )
    assert not await adk_service.get_user_state(app_name="my_app", user_id="u2")


async def test_get_user_state_is_not_visible_across_apps(
    adk_service: BaseSessionService,
) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1")
    await adk_service.append_event(
        session,
        Event(author="system", actions=EventActions(state_delta={"user:data": "only-app-a"})),
    )
    assert not await adk_service.get_user_state(app_name="other_app", user_id="u1")


async def test_get_user_state_available_before_session_is_created(
    adk_service: BaseSessionService,
) -> None:
    first_session = await adk_service.create_session(app_name="my_app", user_id="u1")
    await adk_service.append_event(
        first_session,
        Event(author="system", actions=EventActions(state_delta={"user:ctx": {"v": 1}})),
    )
    state = await adk_service.get_user_state(app_name="my_app", user_id="u1")
    assert state == {"ctx": {"v": 1}}


async def test_get_user_state_reflects_latest_write(adk_service: BaseSessionService) -> None:
    session = await adk_service.create_session(app_name="my_app", user_id="u1")
    for counter in (1, 2):
        await adk_service.append_event(
            session,
            Event(author="system", actions=EventActions(state_delta={"user:counter": counter})),
        )
    state = await adk_service.get_user_state(app_name="my_app", user_id="u1")
    assert state["counter"] == 2
