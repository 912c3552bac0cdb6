"""Helpers of the chat tests: the scripted model and a real OpenAI client on it, a counting
store, each store in turn, labels, leak checks."""

from __future__ import annotations

import asyncio
import functools
import gc
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

import openai
import pytest

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.messages import Message
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer

MODEL = "gpt-test"
T = TypeVar("T")


def _counted(name: str, method: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    @functools.wraps(method)
    async def counted(self: CountingRepository, *args: Any, **kwargs: Any) -> T:
        self.calls[name] += 1
        return await method(self, *args, **kwargs)

    return counted


class CountingRepository(InMemorySessionRepository):
    """The in-memory store, counting its calls per method: the database work of a chat call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[str] = Counter()

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())


for _name in (
    "save",
    "save_if_absent",
    "find_by_id",
    "find_by_user_id",
    "find_by_metadata",
    "delete",
    "delete_expired_sessions",
    "append_events",
    "find_events",
    "find_events_by_user_id",
    "get_event_version",
    "read_snapshot",
    "acquire_lease",
    "release_lease",
):
    setattr(CountingRepository, _name, _counted(_name, getattr(InMemorySessionRepository, _name)))


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
def openai_client(server: ScriptedOpenAIServer) -> openai.AsyncOpenAI:
    return server.client()


@pytest.fixture
def repository() -> CountingRepository:
    return CountingRepository()


@pytest.fixture
def service(repository: CountingRepository) -> DefaultSessionService:
    return DefaultSessionService(repository, allow_system_messages=True)


@pytest.fixture(
    params=[
        pytest.param("memory", id="memory"),
        pytest.param("mongo", id="mongo", marks=pytest.mark.mongodb),
    ]
)
def store_repository(
    request: pytest.FixtureRequest,
) -> InMemorySessionRepository | MongoSessionRepository:
    """The repository of each store in turn: in memory, then MongoDB on a fresh test database."""
    if request.param == "memory":
        return InMemorySessionRepository()
    return MongoSessionRepository(request.getfixturevalue("mongo_db"))


@pytest.fixture
async def store(
    store_repository: InMemorySessionRepository | MongoSessionRepository,
) -> DefaultSessionService:
    """A session service on each store in turn (the MongoDB store with its indexes)."""
    if isinstance(store_repository, MongoSessionRepository):
        await store_repository.ensure_indexes()
    return DefaultSessionService(store_repository)


async def session_with_turns(service: DefaultSessionService, turns: int) -> str:
    """A new session of ``alice`` holding ``question n`` / ``answer n`` for each of ``turns``."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for n in range(turns):
        await service.append_message(session.id, UserMessage(text=f"question {n}"))
        await service.append_message(session.id, AssistantMessage(text=f"answer {n}"))
    return session.id


def turn(session_id: str, user_id: str | None = None, **extra: Any) -> dict[str, Any]:
    """The keywords of a call on ``session_id`` (``**turn(...)``)."""
    return {"session_id": session_id, "user_id": user_id, **extra}


def label(message: Message) -> str:
    """A short label: ``U:text``, ``A:text``, ``A[name,...]``, ``T[id->data,...]``, ``S:text``."""
    if isinstance(message, UserMessage):
        return f"U:{message.text}"
    if isinstance(message, SystemMessage):
        return f"S:{message.text}"
    if isinstance(message, AssistantMessage):
        if message.tool_calls:
            return "A[" + ",".join(call.name for call in message.tool_calls) + "]"
        return f"A:{message.text}"
    assert isinstance(message, ToolResponseMessage)
    return "T[" + ",".join(f"{r.name}->{r.data}" for r in message.responses) + "]"


async def stored(service: DefaultSessionService, session_id: str) -> list[str]:
    """Labels of every message event of the session's log, in order."""
    events = await service.get_events(session_id)
    return [label(e.message) for e in events if e.message is not None]


def sent(messages: list[dict[str, Any]]) -> list[str]:
    """Labels of the OpenAI message dicts a request carried."""
    labels: list[str] = []
    for m in messages:
        role = m["role"]
        if role == "user":
            labels.append(f"U:{m['content']}")
        elif role in ("system", "developer"):
            labels.append(f"S:{m['content']}")
        elif role == "assistant":
            if m.get("tool_calls"):
                names = ",".join(c["function"]["name"] for c in m["tool_calls"])
                labels.append(f"A[{names}]")
            else:
                labels.append(f"A:{m['content']}")
        else:
            labels.append(f"T:{m['tool_call_id']}->{m['content']}")
    return labels


def assert_no_leaks() -> None:
    """No task of ours is left running and no generator of ours is left unfinished.

    An async generator that is dropped while suspended would be finalised later in a task the
    event loop creates; one still suspended after ``gc.collect()`` is such a leak.
    """
    with warnings.catch_warnings():
        # What this checks is our tasks and generators. A collection also finalises whatever
        # else is garbage by now, such as the socket of a connection uvicorn (the examples'
        # loopback server) dropped when a test's client went away mid-stream, whose
        # ResourceWarning would otherwise fail this check at random.
        warnings.simplefilter("ignore", ResourceWarning)
        gc.collect()
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is current:
            continue
        code = getattr(task.get_coro(), "cr_code", None)
        filename = getattr(code, "co_filename", "")
        for package in ("asyncsession/advisors", "asyncsession/_turn", "asyncsession/openai"):
            assert package not in filename, f"leaked task {task!r}"
    loop = asyncio.get_running_loop()
    for generator in list(getattr(loop, "_asyncgens", ())):
        filename = generator.ag_code.co_filename
        if "asyncsession" in filename:
            assert generator.ag_frame is None, f"unfinished generator {generator!r}"


async def ask(client: Any, user: str, *, streaming: bool, **kwargs: Any) -> Any:
    """One call through ``client``, on the call path or the stream path read to the end."""
    if not streaming:
        return await client.call(user, **kwargs)
    async with client.stream(user, **kwargs) as stream:
        async for _ in stream:
            pass
    return stream.response


PATHS = [pytest.param(False, id="call"), pytest.param(True, id="stream")]
"""Parametrize a test over both shapes of a chat call: ``streaming`` is False, then True."""

CLIENTS = [pytest.param(ChatClient, id="chat"), pytest.param(ResponsesClient, id="responses")]
"""Parametrize a test over both OpenAI clients: Chat Completions, then the Responses API."""
