"""Fixtures for the memory tests: every store-agnostic test runs on both stores."""

from __future__ import annotations

from pathlib import Path

import pytest
from memory_support import Backend, directory_backend, mongo_backend

from asyncsession.memory import MemoryStore
from asyncsession.tools import AutoMemoryTools


@pytest.fixture(
    params=[
        pytest.param("directory", id="directory"),
        pytest.param("mongo", id="mongo", marks=pytest.mark.mongodb),
    ]
)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Backend:
    """Each memory store in turn: a directory under ``tmp_path`` and the Mongo test server."""
    if request.param == "directory":
        return directory_backend(tmp_path)
    return mongo_backend(tmp_path, request.getfixturevalue("mongo_db"))


@pytest.fixture
async def store(backend: Backend) -> MemoryStore:
    """Alice's store on the current backend."""
    return await backend.store()


@pytest.fixture
async def tools(store: MemoryStore) -> AutoMemoryTools:
    """The memory tools over alice's store."""
    return AutoMemoryTools(store)
