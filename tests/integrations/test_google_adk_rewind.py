"""ADK's rewind (``Runner.rewind_async``) on ``AdkSessionService``, with ADK's
``InMemorySessionService`` as the reference: the same session state after the rewind (the
rewound keys restored, keys set later removed, as ADK removes them), the same events, and the
same contents sent to the model on the next run."""

from __future__ import annotations

from typing import Any

import pytest
from adk_support import ScriptedModel
from google.adk.agents import LlmAgent
from google.adk.errors.not_found_error import NotFoundError
from google.adk.runners import Runner
from google.adk.sessions import BaseSessionService, InMemorySessionService
from google.genai import types

from asyncsession import EventFilter
from asyncsession.compaction import TurnCountTrigger, TurnWindowCompactionStrategy
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.service import SessionService

Shape = tuple[str, str | None, bool, dict[str, Any]]


def _text(content: types.Content | None) -> str | None:
    if content is None or not content.parts:
        return None
    return content.parts[0].text


async def _run(runner: Runner, text: str) -> str:
    """One turn; returns its invocation id."""
    message = types.Content(role="user", parts=[types.Part(text=text)])
    invocation = ""
    async for event in runner.run_async(user_id="u", session_id="s", new_message=message):
        invocation = event.invocation_id
    return invocation


async def _rewound(adk: BaseSessionService) -> tuple[list[list[str | None]], Any, list[Shape]]:
    """Three turns (each stores its reply in the state), a rewind before the second, a turn
    more: what the model was sent on each call, the state, and the events' shapes."""
    replies = [types.Content(role="model", parts=[types.Part(text=f"r{n}")]) for n in range(5)]
    model = ScriptedModel(model="scripted", replies=replies, sent=[])
    agent = LlmAgent(name="a", model=model, output_key="last")
    runner = Runner(app_name="app", agent=agent, session_service=adk)
    await adk.create_session(app_name="app", user_id="u", session_id="s", state={"topic": "x"})
    await _run(runner, "one")
    second = await _run(runner, "two")
    third = await _run(runner, "three")
    assert second != third
    await runner.rewind_async(user_id="u", session_id="s", rewind_before_invocation_id=second)
    middle = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert middle is not None
    state_after_rewind = dict(middle.state)
    await _run(runner, "two, again")
    got = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert got is not None
    sent = [[_text(content) for content in call] for call in model.sent]
    shapes: list[Shape] = [
        (
            event.author,
            _text(event.content),
            event.actions.rewind_before_invocation_id == second,
            dict(event.actions.state_delta),
        )
        for event in got.events
    ]
    return sent, (state_after_rewind, dict(got.state)), shapes


async def test_a_rewind_reads_as_on_adks_in_memory_service(service: SessionService) -> None:
    expected = await _rewound(InMemorySessionService())  # type: ignore[no-untyped-call]
    got = await _rewound(AdkSessionService(service))
    assert got == expected
    sent, (state_after_rewind, state), shapes = got
    # What the reference does, spelled out: the model is not sent the rewound turns, the
    # state is the one before the second turn (the initial key removed, as ADK removes it).
    assert sent[-1] == ["one", "r0", "two, again"]
    assert state_after_rewind == {"topic": None, "last": "r0"}
    assert state == {"topic": None, "last": "r3"}
    assert [shape[2] for shape in shapes].count(True) == 1


async def test_a_rewind_to_an_unknown_invocation_is_adks_error(service: SessionService) -> None:
    adk = AdkSessionService(service)
    model = ScriptedModel(model="scripted", replies=[], sent=[])
    runner = Runner(app_name="app", agent=LlmAgent(name="a", model=model), session_service=adk)
    await adk.create_session(app_name="app", user_id="u", session_id="s")
    with pytest.raises(NotFoundError):
        await runner.rewind_async(user_id="u", session_id="s", rewind_before_invocation_id="nope")
    events = await service.get_events(adk.session_key("app", "u", "s"), EventFilter.all())
    assert events == []


async def test_a_session_our_compaction_and_rewind_touched_still_reads_in_adk(
    service: SessionService,
) -> None:
    """Our own boundaries (a compaction's and a rewind's, appended through the service, not
    ADK) are not ADK events: `get_session` reads the messages around them, as ADK would."""
    adk = AdkSessionService(service)
    replies = [types.Content(role="model", parts=[types.Part(text=f"r{n}")]) for n in range(4)]
    model = ScriptedModel(model="scripted", replies=replies, sent=[])
    runner = Runner(app_name="app", agent=LlmAgent(name="a", model=model), session_service=adk)
    await adk.create_session(app_name="app", user_id="u", session_id="s")
    for text in ("one", "two", "three"):
        await _run(runner, text)
    key = adk.session_key("app", "u", "s")
    result = await service.compact(key, TurnCountTrigger(2), TurnWindowCompactionStrategy(2))
    assert result.applied
    got = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert got is not None
    assert [_text(event.content) for event in got.events] == ["two", "r1", "three", "r2"]
    first = (await service.get_events(key, EventFilter.all()))[0]
    await service.rewind(key, to=first.id)
    got = await adk.get_session(app_name="app", user_id="u", session_id="s")
    assert got is not None
    assert [_text(event.content) for event in got.events] == ["one"]
