"""The store backends the memory tests run on, and what a test needs around each."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from asyncsession.memory import (
    DirectoryMemoryStore,
    MemoryStore,
    MemoryStoreError,
    MongoMemoryStore,
)
from asyncsession.tools import AutoMemoryTools

SECRET = "TOP-SECRET-OUTSIDE-THE-SCOPE"


@contextmanager
def refused(
    reason: str, match: str | None = None
) -> Iterator[pytest.ExceptionInfo[MemoryStoreError]]:
    """Expect a `MemoryStoreError` of ``reason`` (and a message matching ``match``)."""
    with pytest.raises(MemoryStoreError, match=match) as info:
        yield info
    assert info.value.reason == reason


@dataclass
class Backend:
    """One store implementation under test, with what a test needs around it."""

    kind: str
    make: Callable[..., MemoryStore]
    """``make(scope="alice", **limits)`` builds a fresh store instance for a scope."""
    snapshot_outside: Callable[[], Awaitable[Any]]
    """Everything outside alice's scope, for before/after comparisons."""
    outside_dir: Path
    """A directory outside every scope, holding a secret file (and, for Mongo, unused)."""

    async def store(self, scope: str = "alice", **limits: Any) -> MemoryStore:
        store = self.make(scope, **limits)
        if isinstance(store, MongoMemoryStore):
            await store.ensure_indexes()
        return store

    async def tools(self, scope: str = "alice", **limits: Any) -> AutoMemoryTools:
        return AutoMemoryTools(await self.store(scope, **limits))


def directory_backend(tmp_path: Path) -> Backend:
    root = tmp_path / "memories"
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)
    alice_dir = root / "alice"

    def make(scope: str = "alice", **limits: Any) -> MemoryStore:
        return DirectoryMemoryStore(root, scope=scope, **limits)

    async def snapshot_outside() -> Any:
        seen: dict[str, Any] = {}
        for dirpath, dirnames, filenames in os.walk(tmp_path):
            here = Path(dirpath)
            if here == alice_dir or alice_dir in here.parents:
                continue
            for name in dirnames + filenames:
                path = here / name
                if path == alice_dir:
                    continue
                st = path.lstat()
                content = path.read_bytes() if path.is_file() and not path.is_symlink() else None
                seen[str(path)] = (st.st_mode, st.st_size, st.st_mtime_ns, content)
        return seen

    return Backend("directory", make, snapshot_outside, outside)


def mongo_backend(tmp_path: Path, db: Any) -> Backend:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text(SECRET)

    def make(scope: str = "alice", **limits: Any) -> MemoryStore:
        return MongoMemoryStore(db, scope=scope, **limits)

    async def snapshot_outside() -> Any:
        seen: dict[str, Any] = {}
        for name in sorted(await db.list_collection_names()):
            docs = [doc async for doc in db[name].find({})]
            seen[name] = sorted(
                repr(sorted(doc.items())) for doc in docs if doc.get("scope") != "alice"
            )
        return seen

    return Backend("mongo", make, snapshot_outside, outside)
