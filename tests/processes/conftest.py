"""Writers in OS processes of their own, against one session store on the test server."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from collections.abc import AsyncIterator
from typing import Any

import pytest
from process_support import PROCESSES, SCRIPT, Writer
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository


@pytest.fixture
async def service(mongo_db: AsyncDatabase[dict[str, Any]]) -> DefaultSessionService:
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    return DefaultSessionService(repository)


@pytest.fixture
async def writers(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]], service: DefaultSessionService
) -> AsyncIterator[list[Writer]]:
    """Four writer processes on the test's database, each with a client of its own."""
    started: list[Writer] = []
    try:
        for _ in range(PROCESSES):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                str(SCRIPT),
                mongo_uri,
                mongo_db.name,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
            started.append(Writer(process))
        for writer in started:
            assert writer.process.stdout is not None
            async with asyncio.timeout(60):
                assert json.loads(await writer.process.stdout.readline()) == {"ready": True}
        yield started
    finally:
        for writer in started:
            if writer.process.returncode is None:
                assert writer.process.stdin is not None
                writer.process.stdin.close()
        for writer in started:
            try:
                async with asyncio.timeout(30):
                    await writer.process.wait()
            except TimeoutError:
                writer.process.kill()
                await writer.process.wait()
