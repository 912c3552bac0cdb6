"""Fixtures of the integration tests: a session or history factory per store, tracing off."""

from __future__ import annotations

import asyncio
import tempfile
import uuid
from collections.abc import Callable, Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
from agents import set_tracing_disabled
from agents.memory import Session, SQLiteSession
from agents_support import SessionFactory
from google.adk.features import FeatureName, override_feature_enabled
from google.adk.sessions import BaseSessionService, InMemorySessionService
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_support import ChatHistoryFactory
from pydantic_ai_support import HistoryFactory, ListHistory, SyncHistoryFactory
from pymongo import MongoClient
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, InMemorySessionRepository, MongoSessionRepository
from asyncsession.integrations._loops import own_loop
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.integrations.langchain import LangChainHistory
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.integrations.pydantic_ai import PydanticAIHistory
from asyncsession.service import SessionService


@pytest.fixture(autouse=True, scope="session")
def _no_tracing() -> Iterator[None]:
    """The SDK's tracing would try to export spans; these tests never reach a network."""
    set_tracing_disabled(True)
    yield
    set_tracing_disabled(False)


@pytest.fixture
def memory_service() -> SessionService:
    return DefaultSessionService(InMemorySessionRepository(), allow_system_messages=True)


@pytest.fixture
async def mongo_service(mongo_db: AsyncDatabase[dict[str, Any]]) -> SessionService:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return DefaultSessionService(repository, allow_system_messages=True)


_T = TypeVar("_T")


def on_the_adapters_loop(call: Coroutine[Any, Any, _T]) -> _T:
    """Run ``call`` on the adapters' own loop, as the adapters run a store no loop used first."""
    return asyncio.run_coroutine_threadsafe(call, own_loop()).result()


@pytest.fixture
def unbound_mongo_service(mongo_uri: str) -> Iterator[SessionService]:
    """A service over ``MongoSessionRepository.from_uri``, as a plain sync script builds it: no
    event loop has used its client, so the adapters' own loop takes it (its indexes are made
    there too, as ``asyncsession ensure-indexes`` would make them)."""
    name = f"t_{uuid.uuid4().hex[:16]}"
    repository = MongoSessionRepository.from_uri(mongo_uri, name)
    on_the_adapters_loop(repository.ensure_indexes())
    yield DefaultSessionService(repository, allow_system_messages=True)
    on_the_adapters_loop(repository.aclose())
    with MongoClient(mongo_uri) as client:
        client.drop_database(name)


@pytest.fixture(params=["memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def sync_service(request: pytest.FixtureRequest) -> SessionService:
    """A service on each store, for sync tests: no event loop runs in the test's thread."""
    if request.param == "memory":
        return DefaultSessionService(InMemorySessionRepository(), allow_system_messages=True)
    return request.getfixturevalue("unbound_mongo_service")  # type: ignore[no-any-return]


@pytest.fixture(params=["memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def service(request: pytest.FixtureRequest) -> SessionService:
    """A service on each store."""
    return request.getfixturevalue(f"{request.param}_service")  # type: ignore[no-any-return]


@pytest.fixture
def make_session(service: SessionService) -> SessionFactory:
    """Builds an ``AgentsSession`` on the store under test."""

    def make(session_id: str, **options: Any) -> Session:
        return AgentsSession(session_id, service, **options)

    return make


@pytest.fixture
def sqlite_factory() -> Iterator[SessionFactory]:
    """Builds the SDK's own ``SQLiteSession`` on one database file: the reference."""
    with tempfile.TemporaryDirectory() as directory:
        opened: list[SQLiteSession] = []

        def make(session_id: str, **options: Any) -> Session:
            session = SQLiteSession(session_id, Path(directory) / "reference.db", **options)
            opened.append(session)
            return session

        yield make
        for session in opened:
            session.close()


@pytest.fixture(
    params=["sqlite", "memory", pytest.param("mongo", marks=pytest.mark.mongodb)],
)
def any_session(request: pytest.FixtureRequest) -> SessionFactory:
    """Builds a session of the SDK's reference backend or of ours, on each store."""
    if request.param == "sqlite":
        return request.getfixturevalue("sqlite_factory")  # type: ignore[no-any-return]
    service: SessionService = request.getfixturevalue(f"{request.param}_service")

    def make(session_id: str, **options: Any) -> Session:
        return AgentsSession(session_id, service, **options)

    return make


def _histories(request: pytest.FixtureRequest, mongo: str, make: Callable[..., Any]) -> Any:
    """A factory of the reference (param ``list``/``control``: one in-process history per id)
    or of ``make(session_id, service)`` over the in-memory store or ``mongo`` (a fixture)."""
    if request.param in ("list", "control"):
        reference: dict[str, Any] = {}
        return lambda session_id: reference.setdefault(session_id, make(session_id, None))
    service: SessionService = request.getfixturevalue(
        mongo if request.param == "mongo" else "memory_service"
    )
    return lambda session_id: make(session_id, service)


def _pydantic_ai(session_id: str, service: SessionService | None) -> Any:
    return ListHistory() if service is None else PydanticAIHistory(session_id, service)


def _langchain(session_id: str, service: SessionService | None) -> Any:
    return (
        InMemoryChatMessageHistory() if service is None else LangChainHistory(session_id, service)
    )


@pytest.fixture(params=["list", "memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def any_history(request: pytest.FixtureRequest) -> HistoryFactory:
    """Builds a Pydantic AI history: the in-process list (the reference) or ours, on each store."""
    return _histories(request, "mongo_service", _pydantic_ai)  # type: ignore[no-any-return]


@pytest.fixture(params=["list", "memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def any_sync_history(request: pytest.FixtureRequest) -> SyncHistoryFactory:
    """The same histories for sync callers (``agent.run_sync``): no event loop runs in the
    test's thread, and the MongoDB store is one no loop has used (``from_uri``)."""
    return _histories(request, "unbound_mongo_service", _pydantic_ai)  # type: ignore[no-any-return]


@pytest.fixture(params=["control", "memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def any_chat_history(request: pytest.FixtureRequest) -> ChatHistoryFactory:
    """LangChain's ``InMemoryChatMessageHistory`` (the reference) or ``LangChainHistory`` on
    each store, for async tests (the MongoDB client belongs to the test's loop)."""
    return _histories(request, "mongo_service", _langchain)  # type: ignore[no-any-return]


@pytest.fixture(params=["control", "memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def sync_chat_history(request: pytest.FixtureRequest) -> ChatHistoryFactory:
    """The same histories for sync tests, as a plain script has them: no event loop runs in the
    test's thread, and the MongoDB store is one no loop has used (``from_uri``)."""
    return _histories(request, "unbound_mongo_service", _langchain)  # type: ignore[no-any-return]


@pytest.fixture(
    params=[
        "control",
        pytest.param(  # ADK warns that the feature is a work in progress
            "control-light-copy", marks=pytest.mark.filterwarnings("ignore:.WIP. feature")
        ),
        "memory",
        pytest.param("mongo", marks=pytest.mark.mongodb),
    ],
)
def adk_service(request: pytest.FixtureRequest) -> Iterator[BaseSessionService]:
    """ADK's ``InMemorySessionService`` (the reference, also with ADK's light-copy feature on,
    as ADK's own tests run it) or ``AdkSessionService`` on each store."""
    if request.param == "control":
        yield InMemorySessionService()
    elif request.param == "control-light-copy":
        override_feature_enabled(FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, True)
        yield InMemorySessionService()
        override_feature_enabled(FeatureName.IN_MEMORY_SESSION_SERVICE_LIGHT_COPY, False)
    else:
        yield AdkSessionService(request.getfixturevalue(f"{request.param}_service"))
