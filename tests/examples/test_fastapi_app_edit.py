"""The FastAPI example's edit endpoint: a chat UI's "edit and regenerate", end to end over HTTP."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import openai
import pytest
from chat_support import stored
from example_support import ALICE, assert_problem, serving
from fastapi_app import create_app

from asyncsession import DefaultSessionService, EventFilter
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


@pytest.fixture
async def http(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(create_app(openai_client, model="gpt-test", service=service)) as client:
        yield client


async def _chat(http: httpx.AsyncClient, server: ScriptedOpenAIServer) -> list[str]:
    """Two turns in session s1; the ids of their questions."""
    ids: list[str] = []
    for question, answer in (("I like blue.", "Noted."), ("Favourite colour?", "Blue.")):
        server.enqueue(ScriptedReply.text(answer))
        sent = await http.post("/sessions/s1/messages", json={"message": question}, headers=ALICE)
        assert sent.status_code == 200
        ids.append(sent.json()["request_event_ids"][0])
    return ids


async def test_an_edit_rewinds_and_regenerates(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    """Editing the second question replaces it and its reply in the conversation; the old
    ones stay in the log, archived; a retry with the same idempotency key changes nothing."""
    _, second = await _chat(http, server)
    server.enqueue(ScriptedReply.text("Still blue."))
    headers = {**ALICE, "idempotency-key": "edit-1"}
    body = {"message": "Favourite colour, really?"}

    edited = await http.post(f"/sessions/s1/messages/{second}/edit", json=body, headers=headers)
    again = await http.post(f"/sessions/s1/messages/{second}/edit", json=body, headers=headers)

    assert edited.status_code == 200
    assert edited.json()["text"] == "Still blue."
    assert again.json() == edited.json()
    assert len(server.requests) == 3
    history = await http.get("/sessions/s1/messages", headers=ALICE)
    assert [m["content"] for m in history.json()] == [
        "I like blue.", "Noted.", "Favourite colour, really?", "Still blue.",
    ]  # fmt: skip
    archived = [e.text for e in await service.get_events("s1", EventFilter.all()) if e.archived]
    assert archived == ["Favourite colour?", "Blue."]


async def test_an_edit_into_a_fork_keeps_both_conversations(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient, service: DefaultSessionService
) -> None:
    first, _ = await _chat(http, server)
    server.enqueue(ScriptedReply.text("Red is nice."))
    body = {"message": "I like red.", "fork_to": "s1-red"}

    edited = await http.post(f"/sessions/s1/messages/{first}/edit", json=body, headers=ALICE)

    assert edited.status_code == 200
    assert await stored(service, "s1") == [
        "U:I like blue.", "A:Noted.", "U:Favourite colour?", "A:Blue.",
    ]  # fmt: skip
    history = await http.get("/sessions/s1-red/messages", headers=ALICE)
    assert [m["content"] for m in history.json()] == ["I like red.", "Red is nice."]


async def test_an_edit_of_someone_elses_or_an_unknown_message_is_refused(
    server: ScriptedOpenAIServer, http: httpx.AsyncClient
) -> None:
    _, second = await _chat(http, server)
    body = {"message": "x"}
    foreign = await http.post(
        f"/sessions/s1/messages/{second}/edit", json=body, headers={"x-user-id": "mallory"}
    )
    assert_problem(foreign, 403, "AccessDenied")
    unknown = await http.post("/sessions/s1/messages/nope/edit", json=body, headers=ALICE)
    assert_problem(unknown, 422, "UsageError")
    missing = await http.post(f"/sessions/s9/messages/{second}/edit", json=body, headers=ALICE)
    assert_problem(missing, 404, "SessionNotFound")
    assert len(server.requests) == 2
