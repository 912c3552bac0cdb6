"""The FastAPI example started the usual ways, as OS processes, offline and on MongoDB."""

from __future__ import annotations

import httpx
import pytest
from example_support import ALICE, app_process, assert_problem, example_commands, read_sse
from fastapi_app import create_app

from asyncsession.testing._mongo_server import LocalMongoServer


async def _first_turn(base_url: str) -> str:
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        response, sent = await read_sse(client, "/sessions/s1/stream", "Hi there")
        assert response.status_code == 200
        assert sent[-1].event == "done", sent
        history = await client.get("/sessions/s1/messages", headers=ALICE)
    assert [m["role"] for m in history.json()] == ["user", "assistant"]
    text: str = sent[-1].json()["text"]
    return text


@pytest.mark.parametrize("mode", list(example_commands()))
async def test_each_usual_start_serves_a_streamed_reply_offline(mode: str) -> None:
    """``uvicorn app``, ``uvicorn --factory``, ``fastapi run`` and ``python`` each start the
    example with no credentials and no MongoDB: the built-in scripted model answers a streamed
    turn, sessions are in memory, and Ctrl-C shuts it down cleanly."""
    async with app_process(example_commands()[mode]) as app:
        text = await _first_turn(app.base_url)

    assert text.startswith("You said: 'Hi there'.")
    assert "the offline scripted model" in app.text
    assert "sessions in memory" in app.text


async def test_the_lifespan_closes_the_offline_model_it_opened() -> None:
    """In process: while the app runs, its scripted model's client is open; after the lifespan
    has ended it is closed, and the app has no chat client."""
    app = create_app()
    async with app.router.lifespan_context(app):
        chat = app.state.runtime.chat
        assert "the offline scripted model" in app.state.runtime.description
        assert not chat.openai_client.is_closed()
    assert chat.openai_client.is_closed()
    assert app.state.runtime.chat is None


@pytest.mark.parametrize(
    "variable",
    [
        pytest.param({"ASYNCSESSION_EXAMPLE_API": "responses"}, id="responses-api"),
    ],
)
async def test_the_environment_switches_the_openai_api(variable: dict[str, str]) -> None:
    """``ASYNCSESSION_EXAMPLE_API=responses`` serves the same turn on the Responses API."""
    async with app_process(example_commands()["uvicorn-app"], variable) as app:
        text = await _first_turn(app.base_url)

    assert text.startswith("You said: 'Hi there'.")


async def test_mongodb_uri_stores_sessions_in_mongodb_through_an_outage(
    private_mongo_server: LocalMongoServer,
) -> None:
    """With ``MONGODB_URI`` the example keeps sessions in MongoDB: a database outage is a 503
    problem with ``Retry-After`` and no host, port or topology in it; after the restart the
    session goes on, and a new app process sees the whole history."""
    database = private_mongo_server
    env = {
        "MONGODB_URI": database.uri(serverSelectionTimeoutMS="1000"),
        "ASYNCSESSION_EXAMPLE_DB": "example_test",
    }
    command = example_commands()["uvicorn-app"]
    async with app_process(command, env) as app:
        assert "sessions in MongoDB" in app.text
        await _first_turn(app.base_url)
        async with httpx.AsyncClient(base_url=app.base_url, timeout=30) as client:
            database.kill()
            for method, path in [
                ("POST", "/sessions/s1/messages"),
                ("POST", "/sessions/s1/stream"),
                ("GET", "/sessions/s1/messages"),
            ]:
                body = {"message": "Again"} if method == "POST" else None
                response = await client.request(method, path, json=body, headers=ALICE)
                assert_problem(response, 503, "StorageUnavailable")
                assert response.headers["retry-after"] == "5"
                for secret in ("127.0.0.1", str(database.port), "Topology", "localhost"):
                    assert secret not in response.text
            database.start()
            again = await client.post(
                "/sessions/s1/messages", json={"message": "Again"}, headers=ALICE
            )
            assert again.status_code == 200, again.text

    async with (
        app_process(command, env) as app,
        httpx.AsyncClient(base_url=app.base_url, timeout=30) as client,
    ):
        history = await client.get("/sessions/s1/messages", headers=ALICE)
    assert [m["content"] for m in history.json() if m["role"] == "user"] == ["Hi there", "Again"]
