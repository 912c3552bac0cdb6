"""Helpers for the advisor, ChatClient and example tests: the scripted server and a real OpenAI
client on it, a counting store, each store in turn, labels, leak checks."""

from __future__ import annotations

import asyncio
import gc
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from typing import Any

import openai
import pytest

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    MongoSessionRepository,
    Session,
    SessionEvent,
    SessionSnapshot,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.advisors import SESSION_ID_CONTEXT_KEY, USER_ID_CONTEXT_KEY
from asyncsession.messages import Message
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.repository import Lease, SessionRepository
from asyncsession.testing import ScriptedOpenAIServer

MODEL = "gpt-test"


class CountingRepository(SessionRepository):
    """An in-memory repository that counts calls per method: the database work of a chat call.

    The service starts turns the way it does on any store: read, append, read the version. An
    append that is a compaction (its last event the ``COMPACTION`` boundary) counts as
    ``compaction``.
    """

    def __init__(self) -> None:
        self.inner = InMemorySessionRepository()
        self.calls: Counter[str] = Counter()

    def reset(self) -> None:
        self.calls.clear()

    @property
    def total(self) -> int:
        return sum(self.calls.values())

    async def save(self, session: Session) -> Session:
        self.calls["save"] += 1
        return await self.inner.save(session)

    async def save_if_absent(self, session: Session) -> bool:
        self.calls["save_if_absent"] += 1
        return await self.inner.save_if_absent(session)

    async def find_by_id(self, session_id: str) -> Session | None:
        self.calls["find_by_id"] += 1
        return await self.inner.find_by_id(session_id)

    async def find_by_user_id(self, user_id: str) -> list[Session]:
        self.calls["find_by_user_id"] += 1
        return await self.inner.find_by_user_id(user_id)

    async def find_by_metadata(self, name: str, value: str, *, limit: int = 100) -> list[Session]:
        self.calls["find_by_metadata"] += 1
        return await self.inner.find_by_metadata(name, value, limit=limit)

    async def delete(self, session_id: str) -> None:
        self.calls["delete"] += 1
        await self.inner.delete(session_id)

    async def delete_expired_sessions(self, before: datetime) -> int:
        self.calls["delete_expired_sessions"] += 1
        return await self.inner.delete_expired_sessions(before)

    async def append_event(self, event: SessionEvent) -> None:
        self.calls["append_event"] += 1
        await self.inner.append_event(event)

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        compaction = bool(events) and events[-1].type == EventType.COMPACTION
        self.calls["compaction" if compaction else "append_events"] += 1
        return await self.inner.append_events(session_id, events, expected_version, lease=lease)

    async def find_events(self, session_id: str, filter: EventFilter) -> list[SessionEvent]:
        self.calls["find_events"] += 1
        return await self.inner.find_events(session_id, filter)

    async def find_events_by_user_id(self, user_id: str, filter: EventFilter) -> list[SessionEvent]:
        self.calls["find_events_by_user_id"] += 1
        return await self.inner.find_events_by_user_id(user_id, filter)

    async def get_event_version(self, session_id: str) -> int:
        self.calls["get_event_version"] += 1
        return await self.inner.get_event_version(session_id)

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        self.calls["acquire_lease"] += 1
        return await self.inner.acquire_lease(session_id, version, lease)

    async def release_lease(self, session_id: str, version: int, holder: str) -> None:
        self.calls["release_lease"] += 1
        await self.inner.release_lease(session_id, version, holder)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def read_snapshot(self, session_id: str, filter: EventFilter) -> SessionSnapshot | None:
        self.calls["read_snapshot"] += 1
        return await self.inner.read_snapshot(session_id, filter)


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def openai_client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=server.base_url, api_key="test", max_retries=0
    ) as client:
        yield client


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


def context(session_id: str, user_id: str | None = None, **extra: Any) -> dict[str, Any]:
    """An advisor context routing a call to ``session_id``."""
    values: dict[str, Any] = {SESSION_ID_CONTEXT_KEY: session_id, **extra}
    if user_id is not None:
        values[USER_ID_CONTEXT_KEY] = user_id
    return values


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
    gc.collect()
    current = asyncio.current_task()
    for task in asyncio.all_tasks():
        if task is current:
            continue
        code = getattr(task.get_coro(), "cr_code", None)
        filename = getattr(code, "co_filename", "")
        assert "asyncsession/advisors" not in filename, f"leaked task {task!r}"
        assert "asyncsession/openai" not in filename, f"leaked task {task!r}"
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
