"""What a warm ``ChatClient.call`` touches, in memory and on MongoDB, measured with
``sys.setprofile``.

``python -m benchmarks.measure_turn [--store memory|mongodb|both] [--list]`` starts the local
test server (``ASYNCSESSION_SECANTUSD``) unless ``MONGODB_URI`` is set, and the scripted OpenAI
server; on each store it runs one call on a session with two earlier turns to warm up, then
profiles a second call with session memory and a tool loop. It prints, per store:

- the ``asyncsession`` files and functions (distinct code objects) the profiled call entered,
  ``asyncsession/testing/`` (the scripted model) left out;
- on MongoDB, the hops to the first write: how many ``asyncsession`` frames are on the stack,
  counted from ``ChatClient.call`` inclusive, when the first PyMongo write method is entered.

With ``--list`` it also prints every file and function. The figures count code, not time.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import types
import uuid
from pathlib import Path
from typing import Any

from pymongo import AsyncMongoClient

import asyncsession
from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    SessionRepository,
    UserMessage,
    tool,
)
from asyncsession.openai import ChatClient
from asyncsession.repository.mongo import MongoSessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

PACKAGE = str(Path(asyncsession.__file__).resolve().parent) + os.sep
CALL_FILE = os.path.join("openai", "_client.py")
WRITES = frozenset(
    {
        "bulk_write",
        "find_one_and_update",
        "insert_many",
        "insert_one",
        "replace_one",
        "update_many",
        "update_one",
    }
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class Recorder:
    """Collects the package's code objects entered, and the stack at the first write.

    A write may run in a task of its own (a shielded write): the stack of a task then continues
    with the stack of the code that created it, so the hops follow the call across tasks.
    """

    def __init__(self) -> None:
        self.codes: set[types.CodeType] = set()
        self.first_write: list[types.CodeType] | None = None
        self._task_parents: dict[int, list[types.CodeType]] = {}

    def _stack(self, frame: types.FrameType | None) -> list[types.CodeType]:
        """The package's frames from ``ChatClient.call`` down to ``frame``, outermost first."""
        stack: list[types.CodeType] = []
        current = frame
        while current is not None:
            code = current.f_code
            if code.co_filename.startswith(PACKAGE):
                stack.append(code)
            if code.co_name == "call" and code.co_filename.endswith(CALL_FILE):
                return stack[::-1]
            current = current.f_back
        task = asyncio.current_task()
        parent = [] if task is None else self._task_parents.get(id(task.get_coro()), [])
        return parent + stack[::-1]

    def __call__(self, frame: types.FrameType, event: str, arg: Any) -> None:
        if event != "call":
            return
        code = frame.f_code
        if code.co_filename.startswith(PACKAGE):
            self.codes.add(code)
        elif code.co_name in ("create_task", "ensure_future") and "asyncio" in code.co_filename:
            coro = frame.f_locals.get("coro", frame.f_locals.get("coro_or_future"))
            if coro is not None and id(coro) not in self._task_parents:
                self._task_parents[id(coro)] = self._stack(frame.f_back)
        elif (
            self.first_write is None
            and code.co_name in WRITES
            and "pymongo" in code.co_filename
            and frame.f_back is not None
            and frame.f_back.f_code.co_filename.startswith(PACKAGE)
        ):
            self.first_write = self._stack(frame.f_back)


def label(code: types.CodeType) -> str:
    return f"{code.co_filename[len(PACKAGE) :]}:{code.co_qualname}"


TESTING = PACKAGE + "testing" + os.sep


def counted(code: types.CodeType) -> bool:
    """A code object of the package, the scripted model (``testing/``) left out."""
    return code.co_filename.startswith(PACKAGE) and not code.co_filename.startswith(TESTING)


async def profile_turn(repository: SessionRepository) -> Recorder:
    """Two earlier turns, a warm-up call, then the profiled call, on ``repository``."""
    service = DefaultSessionService(repository)
    await service.create(CreateSessionRequest(id="s", user_id="measure"))
    for turn in range(2):
        await service.append_message("s", UserMessage(text=f"question {turn}"))
        await service.append_message("s", AssistantMessage(text=f"answer {turn}"))
    async with ScriptedOpenAIServer() as server:
        client = ChatClient(
            server.client(), model="measure-model", sessions=service, tools=[lookup]
        )
        server.enqueue(ScriptedReply.text("warm"))
        await client.call("Warm up", session_id="s")
        server.enqueue(ScriptedReply.text("measured"))
        recorder = Recorder()
        sys.setprofile(recorder)
        try:
            await client.call("Go", session_id="s")
        finally:
            sys.setprofile(None)
    return recorder


def report(store: str, recorder: Recorder, show: bool) -> None:
    codes = {code for code in recorder.codes if counted(code)}
    files = sorted({code.co_filename[len(PACKAGE) :] for code in codes})
    print(f"## {store}")
    print(f"asyncsession files entered: {len(files)}")
    print(f"asyncsession functions entered: {len(codes)}")
    if store == "mongodb":
        hops = len(recorder.first_write) if recorder.first_write is not None else None
        print(f"hops from ChatClient.call to the first write: {hops}")
    if show:
        print("\n### Files")
        print("\n".join(files))
        print("\n### Functions")
        print("\n".join(sorted(label(code) for code in codes)))
        if recorder.first_write:
            print("\n### Stack at the first write")
            print("\n".join(label(code) for code in recorder.first_write))
    print()


async def measure_memory(show: bool) -> None:
    report("memory", await profile_turn(InMemorySessionRepository()), show)


async def measure_mongodb(uri: str, show: bool) -> None:
    database = f"measure_{uuid.uuid4().hex[:12]}"
    mongo: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    try:
        repository = MongoSessionRepository(mongo[database])
        await repository.ensure_indexes()
        recorder = await profile_turn(repository)
    finally:
        await mongo.drop_database(database)
        await mongo.close()
    print(f"MongoDB: {uri.split('@')[-1].split('?')[0]}")
    report("mongodb", recorder, show)


def main() -> None:
    parser = argparse.ArgumentParser(description="What a warm ChatClient.call touches.")
    parser.add_argument("--store", choices=("memory", "mongodb", "both"), default="both")
    parser.add_argument("--list", action="store_true", help="print every file and function")
    args = parser.parse_args()
    if args.store in ("memory", "both"):
        asyncio.run(measure_memory(args.list))
    if args.store == "memory":
        return
    uri = os.environ.get("MONGODB_URI")
    server: Any = None
    if uri is None:
        from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

        executable = find_server_executable()
        if executable is None:
            sys.exit("needs MONGODB_URI or ASYNCSESSION_SECANTUSD")
        server = LocalMongoServer(executable)
        server.start()
        uri = server.uri(w="majority", journal="true")
    try:
        asyncio.run(measure_mongodb(uri, args.list))
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
