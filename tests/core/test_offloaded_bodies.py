"""Offloaded tool outputs through the service: compaction sees previews and leaves bodies
readable; deletes and expiry remove the stored bodies themselves (on MongoDB, the GridFS files
and chunks), on both stores."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    SessionEvent,
)
from asyncsession._offload import DEFAULT_OFFLOAD_THRESHOLD, OffloadedBody
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    TurnWindowCompactionStrategy,
)
from asyncsession.events import utc_now
from asyncsession.filters import EventFilter
from asyncsession.messages import (
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.repository import SessionRepository

OUTPUT = "".join(f"row {n}: é€𝄞\n" for n in range(80_000))  # about 1.3 MiB as JSON


def _turn(session_id: str, n: int, output: str) -> list[SessionEvent]:
    call = ToolCall(id=f"call-{n}", name="dump", arguments="{}")
    answer = ToolResponse(id=f"call-{n}", name="dump", data=output)
    return [
        SessionEvent(session_id=session_id, message=UserMessage(text=f"dump {n}")),
        SessionEvent(session_id=session_id, message=AssistantMessage(tool_calls=(call,))),
        SessionEvent(session_id=session_id, message=ToolResponseMessage(responses=(answer,))),
        SessionEvent(session_id=session_id, message=AssistantMessage(text=f"dumped {n}")),
    ]


class Recording:
    """Keeps the newest turn, noting the size of each event it was handed."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.sizes = [len(event.model_dump_json()) for event in request.events]
        return await TurnWindowCompactionStrategy(max_turns=1).compact(request)


@pytest.fixture
async def mongo_repository(mongo_db: AsyncDatabase[dict[str, Any]]) -> SessionRepository:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return repository


@pytest.fixture(params=["memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def repository(request: pytest.FixtureRequest) -> SessionRepository:
    if request.param == "memory":
        return InMemorySessionRepository()
    return request.getfixturevalue("mongo_repository")  # type: ignore[no-any-return]


async def _files(repository: SessionRepository, session_id: str) -> int:
    """The GridFS files and chunks of ``session_id`` (0 on the in-memory store once its
    session is gone: ``read_body`` is its only view)."""
    if not isinstance(repository, MongoSessionRepository):
        return 0
    database = repository._database  # pyright: ignore[reportPrivateUsage]
    prefix = {"$regex": f"^{session_id}\x00"}
    files = await database["session_bodies.files"].count_documents({"_id": prefix})
    chunks = await database["session_bodies.chunks"].count_documents({"files_id": prefix})
    return files + chunks


async def test_compaction_sees_previews_and_keeps_bodies(repository: SessionRepository) -> None:
    """The strategy is handed each offloaded output as its preview (never the megabytes); what
    it archives stays readable whole, and deleting the session deletes the bodies."""
    service = DefaultSessionService(repository)
    session = await service.create(CreateSessionRequest(user_id="alice"))
    s = session.id
    first, second = _turn(s, 1, OUTPUT), _turn(s, 2, OUTPUT[::-1])
    await service.append_events(s, first)
    await service.append_events(s, second)
    strategy = Recording()
    result = await service.compact(s, lambda _: True, strategy)
    assert result.applied
    assert len(strategy.sizes) == 8
    assert max(strategy.sizes) < DEFAULT_OFFLOAD_THRESHOLD // 8
    assert [e.id for e in await service.get_events(s, EventFilter.active())] == [
        e.id for e in second
    ]
    for whole in (first[2], second[2]):
        assert await repository.read_body(s, whole.id) == whole
    if isinstance(repository, MongoSessionRepository):
        assert await _files(repository, s) > 2
    await service.delete(s)
    assert await repository.read_body(s, first[2].id) is None
    assert await _files(repository, s) == 0


async def test_expiry_removes_bodies_and_spares_live_sessions(
    repository: SessionRepository,
) -> None:
    """``delete_expired_sessions`` removes the expired session's bodies, files and chunks;
    a live session's stay."""
    service = DefaultSessionService(repository)
    gone = await service.create(CreateSessionRequest(user_id="a", time_to_live=timedelta(0)))
    kept = await service.create(CreateSessionRequest(user_id="a"))
    doomed, living = _turn(gone.id, 1, OUTPUT), _turn(kept.id, 1, OUTPUT)
    await repository.append_events(gone.id, doomed)
    await repository.append_events(kept.id, living)
    logged = await repository.find_events(kept.id, EventFilter.all())
    assert OffloadedBody.of(logged[2]) is not None
    assert await service.delete_expired_sessions(utc_now() + timedelta(seconds=1)) == 1
    assert await repository.read_body(gone.id, doomed[2].id) is None
    assert await _files(repository, gone.id) == 0
    assert await repository.read_body(kept.id, living[2].id) == living[2]
