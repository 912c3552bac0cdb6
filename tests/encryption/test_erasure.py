"""Erasing a user (`erase_user`): complete, final from the key's deletion on, finished after
any interruption."""

from __future__ import annotations

import asyncio
import os
import sys
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from bson import Binary
from encryption_support import LOCAL_KEY, encrypted, options_for

from asyncsession import (
    AssistantMessage,
    EventFilter,
    InMemorySessionRepository,
    MongoSessionRepository,
    Session,
    SessionEvent,
    UserMessage,
)
from asyncsession.encryption import EncryptionOptions, UserKeys
from asyncsession.encryption._keys import key_name
from asyncsession.exceptions import ContentErased, StorageError
from asyncsession.memory import DirectoryMemoryStore, MemoryStore, MongoMemoryStore
from asyncsession.repository import SessionRepository
from asyncsession.repository._erasure import Ledger, UserEraser

WORKER = Path(__file__).with_name("erase_worker.py")
BODIES = ("session_bodies.files", "session_bodies.chunks")
ALICE_SESSIONS = ("a1", "a2", "a3")


@dataclass
class World:
    """The stores of one test, alice's and bob's data in them, and a "backup" of alice's."""

    repository: SessionRepository
    ledger: Ledger
    keys: UserKeys
    memories: MemoryStore
    backup: Binary
    """A value of alice's, encrypted with her key, as a backup would keep it."""

    def eraser(self, repository: SessionRepository | None = None) -> UserEraser:
        """The erasure the store's ``erase_user`` runs (over ``repository``, when given: a store
        that fails on purpose)."""
        return UserEraser(repository or self.repository, self.ledger, self.keys, self.memories)


async def _seed(
    repository: SessionRepository, ledger: Ledger, keys: UserKeys, memories: MemoryStore
) -> World:
    for session_id, user_id in [*((s, "alice") for s in ALICE_SESSIONS), ("b1", "bob")]:
        await repository.save(
            Session(id=session_id, user_id=user_id, metadata={"topic": f"{user_id}'s health"})
        )
        await repository.append_events(
            session_id,
            [
                SessionEvent(session_id=session_id, message=UserMessage(text=f"{user_id} asks")),
                SessionEvent(session_id=session_id, message=AssistantMessage(text="answer")),
                SessionEvent(
                    session_id=session_id, message=AssistantMessage(text=f"{user_id} " * 600)
                ),  # over the offload threshold: kept in the bodies bucket
            ],
        )
    alice = memories.with_scope("alice")
    await alice.write("MEMORY.md", "alice's index", expected_version=None)
    await alice.write("health/allergies.md", "penicillin", expected_version=None)
    await memories.with_scope("bob").write("MEMORY.md", "bob's index", expected_version=None)
    backup = await keys.encrypt("alice", "alice's words in last night's backup")
    return World(repository, ledger, keys, memories, backup)


@pytest.fixture
async def mongo_world(mongo_client: Any, mongo_db: Any) -> World:
    """Alice and bob on the test server: sessions, events, encrypted memories, data keys."""
    keys = UserKeys(options_for(mongo_db), mongo_client)
    repository = MongoSessionRepository(mongo_db, **encrypted(keys))
    await repository.ensure_indexes()
    memories = MongoMemoryStore(mongo_db, scope="-", encryption=keys)
    await memories.ensure_indexes()
    return await _seed(repository, Ledger(mongo_db["erasures"]), keys, memories)


async def _assert_alice_erased(world: World) -> None:
    repository = world.repository
    assert await repository.find_by_user_id("alice") == []
    for session_id in ALICE_SESSIONS:
        assert await repository.find_by_id(session_id) is None
        assert await repository.find_events(session_id, EventFilter()) == []
    assert await world.memories.with_scope("alice").list_dir("") == []
    assert not await world.keys.has_key("alice")
    with pytest.raises(ContentErased):
        await world.keys.decrypt("alice", world.backup)
    assert await world.ledger.pending() == []
    # bob is untouched
    assert [s.id for s in await repository.find_by_user_id("bob")] == ["b1"]
    assert len(await repository.find_events("b1", EventFilter())) == 3
    bob = await world.memories.with_scope("bob").read("MEMORY.md")
    assert bob is not None
    assert bob.text == "bob's index"


@pytest.mark.mongodb
async def test_erasure_is_complete_and_final(mongo_world: World, mongo_db: Any) -> None:
    """Key, sessions, events and memory files of alice go; bob stays; a second run finds
    nothing left to do."""
    report = await mongo_world.eraser().erase_user("alice")
    assert (report.keys_deleted, report.sessions_deleted, report.memory_entries_deleted) == (
        1,
        3,
        2,
    )
    assert not report.resumed
    await _assert_alice_erased(mongo_world)
    await _no_trace_of_alice(mongo_db)
    assert await mongo_db["memories"].count_documents({"scope": "alice"}) == 0
    again = await mongo_world.eraser().erase_user("alice")
    assert (again.keys_deleted, again.sessions_deleted, again.memory_entries_deleted) == (0, 0, 0)


async def test_the_in_memory_stores_erase_the_same_way(tmp_path: Path) -> None:
    """The in-memory session store with in-process keys runs the same erasure."""
    keys = UserKeys(options_for(None))
    world = await _seed(
        InMemorySessionRepository(**encrypted(keys)),
        Ledger(),
        keys,
        DirectoryMemoryStore(tmp_path, scope="-"),
    )
    report = await world.eraser().erase_user("alice")
    assert (report.keys_deleted, report.sessions_deleted) == (1, 3)
    await _assert_alice_erased(world)


class _Failing:
    """A session store whose first ``delete`` fails, as a lost server would make it."""

    def __init__(self, inner: SessionRepository) -> None:
        self._inner = inner
        self.failures = 1

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete(self, session_id: str) -> None:
        if self.failures:
            self.failures -= 1
            raise StorageError("the server went away")
        await self._inner.delete(session_id)


@pytest.mark.mongodb
@pytest.mark.parametrize("finisher", ["next call", "sweep"])
async def test_a_failed_erasure_is_final_and_finished_later(
    mongo_world: World, finisher: str
) -> None:
    """A store failure after the key's deletion: alice's content is already unreadable, the
    erasure stays pending, and the next call (or the sweep) completes it."""
    failing: Any = _Failing(mongo_world.repository)
    with pytest.raises(StorageError):
        await mongo_world.eraser(failing).erase_user("alice")
    pending = await mongo_world.ledger.pending()
    assert [(user, sorted(sessions)) for user, sessions in pending] == [
        ("alice", list(ALICE_SESSIONS))
    ]
    with pytest.raises(ContentErased):
        await mongo_world.keys.decrypt("alice", mongo_world.backup)
    if finisher == "next call":
        reports = [await mongo_world.eraser().erase_user("alice")]
    else:
        reports = await mongo_world.eraser().finish_pending()
    assert [(r.user_id, r.resumed, r.keys_deleted) for r in reports] == [("alice", True, 0)]
    await _assert_alice_erased(mongo_world)


class _Held:
    """A session store whose ``delete`` waits until released."""

    def __init__(self, inner: SessionRepository) -> None:
        self._inner = inner
        self.reached = asyncio.Event()
        self.release = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def delete(self, session_id: str) -> None:
        self.reached.set()
        await self.release.wait()
        await self._inner.delete(session_id)


@pytest.mark.mongodb
async def test_a_cancelled_erasure_runs_to_its_end(mongo_world: World) -> None:
    """The caller is cancelled while sessions are being deleted: the erasure still finishes
    before the cancellation reaches the caller."""
    held: Any = _Held(mongo_world.repository)
    task = asyncio.create_task(mongo_world.eraser(held).erase_user("alice"))
    await held.reached.wait()
    task.cancel()
    await asyncio.sleep(0)
    held.release.set()
    with pytest.raises(asyncio.CancelledError):
        await task
    await _assert_alice_erased(mongo_world)


async def _no_trace_of_alice(database: Any) -> None:
    """Nothing of alice's sessions is left in any collection of the store, raw."""
    assert await database["sessions"].count_documents({"user_id": "alice"}) == 0
    commits = {"session": {"$in": list(ALICE_SESSIONS)}}
    assert await database["session_commits"].count_documents(commits) == 0
    names = await database["session_bodies.files"].distinct("metadata.session")
    assert not set(names) & set(ALICE_SESSIONS)
    chunks = await database["session_bodies.chunks"].find({}, {"files_id": 1}).to_list()
    assert not [c for c in chunks if str(c["files_id"]).split("\x00")[0] in ALICE_SESSIONS]
    assert await database["session_bodies.chunks"].count_documents({}) >= 1  # bob's are kept
    assert await database["erasures"].count_documents({}) == 0


STEPS = [
    ("record", "next call"),  # the ledger holds alice
    ("sessions", "sweep"),  # ... with her sessions' ids
    ("key", "next call"),  # her data key is deleted
    ("commits", "sweep"),  # inside the first session's delete: its commits are gone
    ("chunks", "next call"),  # ... and the chunks of its offloaded bodies
    ("session", "sweep"),  # the first session is deleted
    ("memories", "next call"),  # the first memory entry is deleted
]


@pytest.mark.mongodb
@pytest.mark.parametrize(("step", "finisher"), STEPS)
async def test_an_erasure_killed_at_each_step_is_finished(
    mongo_uri: str,
    mongo_client: Any,
    mongo_world: World,
    mongo_db: Any,
    step: str,
    finisher: str,
) -> None:
    """``kill -9`` of the erasing process right after each step (an OS process killed between
    two commands): the erasure is pending; from the key step on, alice's content is
    unreadable to a cold process (what is left of her sessions reads as ContentErased); the
    next call or the sweep finishes it, and nothing of hers is left in any collection."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        str(WORKER),
        mongo_uri,
        mongo_db.name,
        step,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    async with asyncio.timeout(60):
        stdout, _ = await process.communicate()
    assert process.returncode == -9, stdout
    assert [user for user, _ in await mongo_world.ledger.pending()] == ["alice"]
    key_gone = step not in ("record", "sessions")
    assert await mongo_world.keys.has_key("alice") is not key_gone
    left = await mongo_db["sessions"].distinct("_id", {"user_id": "alice"})
    assert len(left) == (2 if step == "session" else 0 if step == "memories" else 3)
    if key_gone:  # this process still holds the key for up to key_cache_ttl; a cold one:
        cold = UserKeys(mongo_world.keys.options, mongo_client)
        with pytest.raises(ContentErased):
            await cold.decrypt("alice", mongo_world.backup)
        reader = MongoSessionRepository(mongo_db, **encrypted(cold))
        for session_id in left:
            with pytest.raises(ContentErased):
                await reader.find_by_id(session_id)
            if step != "commits" or session_id != "a1":
                with pytest.raises(ContentErased):
                    await reader.find_events(session_id, EventFilter())
    if finisher == "next call":
        reports = [await mongo_world.eraser().erase_user("alice")]
    else:
        reports = await mongo_world.eraser().finish_pending()
    assert [(r.user_id, r.resumed) for r in reports] == [("alice", True)]
    await _assert_alice_erased(mongo_world)
    await _no_trace_of_alice(mongo_db)


@pytest.mark.mongodb
async def test_other_processes_stop_reading_within_the_key_cache_ttl(
    mongo_client: Any, mongo_db: Any
) -> None:
    """A key deleted by another process (here: straight from the key vault) is still used by
    a process that holds it, for at most ``key_cache_ttl``; then its content is erased."""
    ttl = timedelta(seconds=1)
    setting = EncryptionOptions.local(
        LOCAL_KEY, key_vault_namespace=f"{mongo_db.name}.keyvault", key_cache_ttl=ttl
    )
    keys = UserKeys(setting, mongo_client)
    value = await keys.encrypt("alice", "cached")
    deleted_at = time.monotonic()
    await mongo_db["keyvault"].delete_many({"keyAltNames": key_name("alice")})
    assert await keys.decrypt("alice", value) == "cached"  # held in this process
    while True:
        try:
            await keys.decrypt("alice", value)
        except ContentErased:
            break
        assert time.monotonic() - deleted_at < ttl.total_seconds() + 5
        await asyncio.sleep(0.05)  # time passing is what is tested: the cache's expiry
    assert time.monotonic() - deleted_at >= ttl.total_seconds() * 0.9
