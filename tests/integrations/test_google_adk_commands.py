"""What ``AdkSessionService`` sends to MongoDB, command by command: a Runner turn, pinned.

| work | commands |
|---|---|
| ``get_session`` (window of 20): the session, the app's state, the user's state, at once | 3 |
| ``append_event`` through the session object read or written last: the commit | 1 |
| ``append_event`` through a stale object: the refused commit, its find, a read, the commit | 4 |

Counted with PyMongo's command monitoring on the test server.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator

import pytest
from command_counting import CommandCounter, counted_repository
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.adk.sessions.base_session_service import GetSessionConfig
from google.genai import types

from asyncsession import DefaultSessionService
from asyncsession.integrations.google_adk import AdkSessionService

WINDOW = GetSessionConfig(num_recent_events=20)
READ = ("aggregate", "session_commits")
COMMIT = ("insert", "session_commits")


@pytest.fixture
async def counted(mongo_uri: str) -> AsyncIterator[tuple[AdkSessionService, CommandCounter]]:
    async with counted_repository(mongo_uri) as (repository, counter):
        yield AdkSessionService(DefaultSessionService(repository)), counter


def said(role: str, text: str, **delta: object) -> Event:
    content = types.Content(role=role, parts=[types.Part(text=text)])
    actions = EventActions(state_delta=dict(delta))
    return Event(author="user" if role == "user" else "agent", content=content, actions=actions)


@pytest.mark.parametrize("others", [0, 40])
async def test_a_runner_turn_is_three_reads_and_two_commits(
    counted: tuple[AdkSessionService, CommandCounter], others: int
) -> None:
    """``get_session`` then two ``append_event``: 5 commands, however many sessions the app
    has (their list is kept apart from the app's state) and with app and user state set."""
    adk, counter = counted
    for n in range(others):
        await adk.create_session(app_name="app", user_id=f"other{n}", session_id="x")
    await adk.create_session(
        app_name="app", user_id="u", session_id="s", state={"app:a": 1, "user:b": 2}
    )
    for i in range(3):
        counter.clear()
        session = await adk.get_session(app_name="app", user_id="u", session_id="s", config=WINDOW)
        assert session is not None
        assert Counter(counter.take()) == {READ: 3}
        await adk.append_event(session, said("user", f"q{i}", turn=i))
        assert counter.take() == [COMMIT]
        await adk.append_event(session, said("model", f"a{i}"))
        assert counter.take() == [COMMIT]
    got = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert got is not None
    assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
        text for i in range(3) for text in (f"q{i}", f"a{i}")
    ]
    assert got.state == {"turn": 2, "app:a": 1, "user:b": 2}


async def test_a_stale_session_object_reads_once_and_keeps_the_other_writers_state(
    counted: tuple[AdkSessionService, CommandCounter],
) -> None:
    """Another writer (here another service) appended after this object was read: the
    commit at the remembered version is refused, the session read, the event appended on top
    of the other writer's state."""
    adk, counter = counted
    await adk.create_session(app_name="app", user_id="u", session_id="s")
    mine = await adk.get_session(app_name="app", user_id="u", session_id="s", config=WINDOW)
    theirs = await adk.get_session(app_name="app", user_id="u", session_id="s", config=WINDOW)
    assert mine is not None
    assert theirs is not None
    other = AdkSessionService(adk.service)
    await other.append_event(theirs, said("user", "theirs", their_key=1))
    counter.clear()
    await adk.append_event(mine, said("user", "mine", my_key=2))
    assert counter.take() == [COMMIT, ("find", "session_commits"), READ, COMMIT]
    counter.clear()
    await adk.append_event(mine, said("model", "after"))  # the object knows the version now
    assert counter.take() == [COMMIT]
    got = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert got is not None
    assert [e.content.parts[0].text for e in got.events if e.content and e.content.parts] == [
        "theirs",
        "mine",
        "after",
    ]
    assert got.state == {"their_key": 1, "my_key": 2}
