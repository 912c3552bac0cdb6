"""Forks under encryption: a fork reads its parent's sealed events with the owner's key, and
erasing the owner erases the forks, the retained parent and their offloaded bodies too."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import InMemorySessionRepository, MongoSessionRepository, Session
from asyncsession.encryption import EncryptionOptions
from asyncsession.events import SessionEvent
from asyncsession.filters import EventFilter
from asyncsession.messages import ToolResponse, ToolResponseMessage
from asyncsession.repository import SessionRepository
from asyncsession.testing._contract._support import labels, user


@pytest.fixture(params=["memory", pytest.param("mongo", marks=pytest.mark.mongodb)])
def repository(
    request: pytest.FixtureRequest,
) -> InMemorySessionRepository | MongoSessionRepository:
    """An encrypting store of each kind (the MongoDB one on a fresh test database)."""
    key = EncryptionOptions.generate_local_key()
    if request.param == "memory":
        return InMemorySessionRepository(encryption=EncryptionOptions.local(key))
    mongo_db: AsyncDatabase[dict[str, Any]] = request.getfixturevalue("mongo_db")
    setting = EncryptionOptions.local(key, key_vault_namespace=f"{mongo_db.name}.keyvault")
    return MongoSessionRepository(mongo_db, encryption=setting)


async def test_erasing_the_owner_erases_the_forks_and_the_parent_they_kept(
    repository: InMemorySessionRepository | MongoSessionRepository,
) -> None:
    store: SessionRepository = repository
    if isinstance(repository, MongoSessionRepository):
        await repository.ensure_indexes()
    await store.save(Session(id="p", user_id="alice", metadata={"secret": "s"}))
    big = SessionEvent(
        session_id="p",
        message=ToolResponseMessage(
            responses=(ToolResponse(id="c", name="t", data="x" * 300_000),)
        ),
    )
    await store.append_events("p", [user("p", "hello"), big])
    fork = await store.fork("p", Session(id="p-b", user_id="alice", metadata={"k": "v"}))
    await store.append_events("p-b", [user("p-b", "more")], 1)
    assert labels(await store.find_events("p-b", EventFilter.last_n(5)))[0] == "hello"
    stored = await store.find_by_id("p-b")
    assert stored is not None
    assert (stored.metadata, stored.forked_from) == ({"k": "v"}, fork.forked_from)
    await store.delete("p")  # retained for the fork
    whole = await store.read_body("p-b", big.id)
    assert whole is not None
    assert isinstance(whole.message, ToolResponseMessage)
    assert whole.message.responses[0].data == "x" * 300_000

    report = await repository.erase_user("alice")

    assert report.sessions_deleted == 1
    assert await store.find_by_user_id("alice") == []
    assert await store.find_by_id("p-b") is None
    assert await store.find_events("p-b", EventFilter.all()) == []
    assert await store.save_if_absent(Session(id="p", user_id="bob"))  # nothing of it is kept
    assert await store.find_events("p", EventFilter.all()) == []
    if isinstance(repository, MongoSessionRepository):
        database = repository._database  # pyright: ignore[reportPrivateUsage]
        assert await database["session_bodies.files"].count_documents({}) == 0
        assert await database["session_commits"].count_documents({}) == 0
