"""Concurrent agents sharing a scope never lose one another's edits."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

import pytest
from memory_support import Backend
from pymongo import AsyncMongoClient

from asyncsession.memory import (
    MemoryEntry,
    MemoryFile,
    MemoryStore,
    MemoryStoreError,
    MongoMemoryStore,
)
from asyncsession.tools import AutoMemoryTools

AGENTS = 20


async def _index_lines(store: MemoryStore) -> list[str]:
    file = await store.read("MEMORY.md")
    assert file is not None
    return file.text.splitlines()


async def test_concurrent_inserts_from_separate_instances_all_land(backend: Backend) -> None:
    """Twenty agents inserting into one MEMORY.md, each through its own store, lose no line."""
    first = await backend.tools()
    await first.memory_create("MEMORY.md", "# Index\n")
    agents = [AutoMemoryTools(backend.make("alice")) for _ in range(AGENTS)]
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(agent.memory_insert("MEMORY.md", 1, f"- [M{n}](m{n}.md) — hook {n}"))
            for n, agent in enumerate(agents)
        ]
    assert all(
        task.result() == "Successfully inserted text at line 1 in: MEMORY.md" for task in tasks
    )
    lines = await _index_lines(first.store)
    assert lines[0] == "# Index"
    assert sorted(lines[1:]) == sorted(f"- [M{n}](m{n}.md) — hook {n}" for n in range(AGENTS))


async def test_concurrent_str_replaces_all_land(backend: Backend) -> None:
    """Twenty agents each replacing their own placeholder in one file all succeed."""
    first = await backend.tools()
    await first.memory_create("todo.md", "".join(f"slot {n}: open\n" for n in range(AGENTS)))
    agents = [AutoMemoryTools(backend.make("alice")) for _ in range(AGENTS)]
    async with asyncio.TaskGroup() as group:
        for n, agent in enumerate(agents):
            group.create_task(
                agent.memory_str_replace("todo.md", f"slot {n}: open", f"slot {n}: done")
            )
    file = await first.store.read("todo.md")
    assert file is not None
    assert file.text == "".join(f"slot {n}: done\n" for n in range(AGENTS))


async def test_concurrent_creates_have_one_winner(backend: Backend) -> None:
    """When agents race to create one file, exactly one succeeds and its text is kept whole."""
    agents = [AutoMemoryTools(backend.make("alice")) for _ in range(10)]
    async with asyncio.TaskGroup() as group:
        tasks = [
            group.create_task(agent.memory_create("user.md", f"written by {n}\n"))
            for n, agent in enumerate(agents)
        ]
    results = [task.result() for task in tasks]
    winners = [n for n, result in enumerate(results) if result.startswith("Successfully")]
    assert len(winners) == 1
    assert (
        results.count(
            "Error: File already exists: user.md. Use MemoryStrReplace to modify existing files."
        )
        == 9
    )
    file = await agents[0].store.read("user.md")
    assert file is not None
    assert file.text == f"written by {winners[0]}\n"


async def test_edits_race_with_a_rename(backend: Backend) -> None:
    """An edit racing a rename either lands in the moved file or reports the file gone."""
    tools = await backend.tools()
    await tools.memory_create("a.md", "start\n")
    async with asyncio.TaskGroup() as group:
        edit = group.create_task(tools.memory_insert("a.md", 1, "edit"))
        group.create_task(tools.memory_rename("a.md", "b.md"))
    moved = await tools.store.read("b.md")
    assert moved is not None
    assert await tools.store.read("a.md") is None
    if edit.result().startswith("Successfully"):
        assert moved.text == "start\nedit\n"
    else:
        assert edit.result() == "Error: File does not exist: a.md"
        assert moved.text == "start\n"


@pytest.mark.parametrize("steps", [0, 1, 2, 3, 5, 8])
async def test_cancelled_rename_is_all_or_nothing(backend: Backend, steps: int) -> None:
    """A cancelled directory move either has not started or runs to completion, never halfway."""
    tools = await backend.tools()
    names = [f"{n:02}.md" for n in range(15)]
    for name in names:
        await tools.memory_create(f"d/{name}", name)
    task = asyncio.create_task(tools.memory_rename("d", "e"))
    for _ in range(steps):
        await asyncio.sleep(0)
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    listing = {entry.name for entry in await tools.store.list_dir("")}
    assert listing in ({"d"}, {"e"})
    assert [entry.name for entry in await tools.store.list_dir(listing.pop())] == names


@pytest.mark.mongodb
async def test_concurrent_inserts_through_separate_clients(mongo_uri: str, mongo_db: Any) -> None:
    """Agents on separate MongoDB clients, like separate processes, lose no line either."""
    clients: list[AsyncMongoClient[dict[str, Any]]] = [
        AsyncMongoClient(mongo_uri, tz_aware=True) for _ in range(2)
    ]
    try:
        stores = [MongoMemoryStore(client[mongo_db.name], scope="alice") for client in clients]
        await stores[0].ensure_indexes()
        await AutoMemoryTools(stores[0]).memory_create("MEMORY.md", "# Index\n")
        agents = [AutoMemoryTools(stores[n % 2]) for n in range(AGENTS)]
        async with asyncio.TaskGroup() as group:
            for n, agent in enumerate(agents):
                group.create_task(agent.memory_insert("MEMORY.md", 1, f"line {n}"))
        lines = await _index_lines(stores[1])
        assert sorted(lines[1:]) == sorted(f"line {n}" for n in range(AGENTS))
    finally:
        for client in clients:
            await client.close()


class _AlwaysConflicting:
    """A store whose file changes between every read and write."""

    scope = "alice"
    root = "/memories"

    def __init__(self) -> None:
        self.writes = 0

    def with_scope(self, scope: str) -> MemoryStore:
        raise NotImplementedError

    async def stat(self, path: str) -> MemoryEntry | None:
        return MemoryEntry(name=path, is_dir=False, size=1)

    async def read(self, path: str) -> MemoryFile | None:
        return MemoryFile(text="x\n", version=self.writes)

    async def list_dir(self, path: str = "") -> list[MemoryEntry]:
        return []

    async def write(self, path: str, text: str, *, expected_version: int | None) -> MemoryFile:
        self.writes += 1
        raise MemoryStoreError("conflict", path)

    async def delete(self, path: str) -> MemoryEntry:
        raise NotImplementedError

    async def rename(self, old_path: str, new_path: str) -> None:
        self.writes += 1
        raise MemoryStoreError("conflict", old_path)


@pytest.mark.parametrize(
    "call",
    [
        pytest.param(lambda t: t.memory_insert("a.md", 0, "y"), id="insert"),
        pytest.param(lambda t: t.memory_str_replace("a.md", "x", "y"), id="str_replace"),
        pytest.param(lambda t: t.memory_rename("a.md", "b.md"), id="rename"),
    ],
)
async def test_retries_are_bounded(call: Any) -> None:
    """An edit that keeps conflicting gives up after max_attempts with an error for the model."""
    store = _AlwaysConflicting()
    tools = AutoMemoryTools(store, max_attempts=3)
    result = await call(tools)
    assert result == (
        "Error: a.md kept changing under concurrent edits and could not be updated. "
        "View it again and retry."
    )
    assert store.writes == 3


def test_max_attempts_must_be_positive() -> None:
    """At least one attempt is required."""
    with pytest.raises(ValueError, match="max_attempts"):
        AutoMemoryTools(_AlwaysConflicting(), max_attempts=0)


_WRITER = """
import asyncio, sys
from asyncsession.memory import DirectoryMemoryStore
from asyncsession.tools import AutoMemoryTools

async def main(root: str, who: str, count: int) -> None:
    tools = AutoMemoryTools(DirectoryMemoryStore(root, scope="alice"), max_attempts=1)
    done = 0
    while done < count:
        result = await tools.memory_insert("MEMORY.md", 1, f"{who}-{done}")
        if result.startswith("Error"):  # a conflict: this process retries, the line is not in
            await asyncio.sleep(0)
            continue
        print(f"{who}-{done}", flush=True)  # acknowledged: it must be in the file
        done += 1

asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
"""


async def test_writers_in_separate_processes_lose_no_acknowledged_line(tmp_path: Any) -> None:
    """Four processes inserting into one file of one directory scope: every insert a process
    was told succeeded is in the file (the scope's lock file serialises check and replace)."""
    import sys

    from asyncsession.memory import DirectoryMemoryStore

    store = DirectoryMemoryStore(tmp_path, scope="alice")
    await AutoMemoryTools(store).memory_create("MEMORY.md", "# Index\n")
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _WRITER,
            str(tmp_path),
            f"p{n}",
            "40",
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(4)
    ]
    acknowledged: list[str] = []
    for process in processes:
        out, _ = await process.communicate()
        assert process.returncode == 0
        acknowledged += out.decode().split()
    assert len(acknowledged) == 160
    lines = await _index_lines(store)
    assert sorted(lines[1:]) == sorted(acknowledged)
