"""A session-store writer in an OS process of its own, driven over stdin and stdout.

    python writer_proc.py URI DB

It reads one JSON command per line on stdin, runs it through the public service API against
the server, and answers with one JSON line on stdout (``{"error": ...}`` if it raised).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import pickle
import sys
import uuid
from typing import Any

from pymongo import AsyncMongoClient

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    MongoSessionRepository,
    SessionEvent,
    SessionExists,
    UserMessage,
)
from asyncsession.compaction import SlidingWindowCompactionStrategy


def event(sid: str, event_id: str) -> SessionEvent:
    return SessionEvent(id=event_id, session_id=sid, message=UserMessage(text=event_id))


async def run(service: DefaultSessionService, command: dict[str, Any]) -> dict[str, Any]:
    op, sid = command["op"], command.get("sid", "")
    if op == "versioned":
        won = await service.append_events(
            sid, [event(sid, command["event_id"])], expected_version=command["expected"]
        )
        return {"won": won}
    if op == "batch":  # the same events, appended `times` times at once
        events = [event(sid, event_id) for event_id in command["ids"]]
        await asyncio.gather(*(service.append_events(sid, events) for _ in range(command["times"])))
        return {"done": True}
    if op == "stream":  # `count` events in order, `chunk` per append
        ids = [f"{command['prefix']}-{i:04d}" for i in range(command["count"])]
        chunk = command["chunk"]
        for start in range(0, len(ids), chunk):
            await service.append_events(sid, [event(sid, i) for i in ids[start : start + chunk]])
        return {"done": len(ids)}
    if op == "compact":  # until `applied` compactions applied, or `tries` were made
        strategy = SlidingWindowCompactionStrategy(max_events=command["keep"])
        applied = tries = 0
        while applied < command["applied"] and tries < command["tries"]:
            result = await service.compact(sid, lambda _: True, strategy)
            applied += result.applied
            tries += 1
        return {"applied": applied, "tries": tries}
    if op == "messages":  # `count` messages with ids the service picks, in order
        events = [
            await service.append_message(sid, UserMessage(text=f"{command['prefix']}-{i:04d}"))
            for i in range(command["count"])
        ]
        return {"ids": [e.id for e in events]}
    if op == "turns":  # `tasks` tasks, each `count` batches of 1-3 messages, picked ids

        async def task(t: int) -> list[list[str]]:
            batches: list[list[str]] = []
            for b in range(command["count"]):
                texts = [f"{command['prefix']}-t{t}-b{b:03d}-m{m}" for m in range(1 + (t + b) % 3)]
                turn = [UserMessage(text=text) for text in texts]
                batches.append([e.id for e in await service.append_messages(sid, turn)])
            return batches

        return {"tasks": await asyncio.gather(*(task(t) for t in range(command["tasks"])))}
    if op == "rounds":  # per session at once, `count` rounds: read the version, append at it
        repository = service.repository
        assert isinstance(repository, MongoSessionRepository)

        async def rounds(sid: str) -> list[tuple[str, bool]]:
            outcomes: list[tuple[str, bool]] = []
            for _ in range(command["count"]):
                snapshot = await repository.read_snapshot(sid, EventFilter(last_n=1))
                assert snapshot is not None
                event_id = str(uuid.uuid4())
                won = await repository.append_events(
                    sid, [event(sid, event_id)], expected_version=snapshot.version
                )
                outcomes.append((event_id, won))
            return outcomes

        per_session = await asyncio.gather(*(rounds(sid) for sid in command["sids"]))
        return {"outcomes": per_session}
    if op == "compaction":  # a compaction commit another process pickled (hex), at its version
        commit = pickle.loads(bytes.fromhex(command["commit"]))
        assert all(isinstance(e, SessionEvent) for e in commit)
        applied = await service.append_events(sid, commit, expected_version=command["expected"])
        return {"applied": applied}
    if op == "turn":  # a chat turn's first steps: read, create if missing, question at +1
        question = SessionEvent(
            id=command["event_id"], session_id=sid, message=UserMessage(text=command["event_id"])
        )
        while True:
            snapshot = await service.get_snapshot(sid, EventFilter.active())
            if snapshot is None:
                with contextlib.suppress(SessionExists):  # another process created it
                    await service.create(CreateSessionRequest(id=sid, user_id="alice"))
                continue
            if await service.append_events(sid, [question], snapshot.version):
                return {
                    "event_id": question.id,
                    "window": [e.id for e in snapshot.events],
                    "version": snapshot.version + 1,
                    "owner": snapshot.session.user_id,
                }
    if op == "forks":  # `count` forks of the session as it is now, one after another
        forks = [await service.fork(sid) for _ in range(command["count"])]
        return {"forks": [[f.id, f.forked_from.version if f.forked_from else -1] for f in forks]}
    if op == "rewinds":  # `count` rewinds to version `to`, each at the version it read
        records = [await service.rewind(sid, to=command["to"]) for _ in range(command["count"])]
        return {"from": [r.from_version for r in records]}
    if op == "fork_forever":  # forks until killed, printing each one's id once it is made
        while True:
            made = await service.fork(sid)
            print(json.dumps({"fork": made.id}), flush=True)
    raise ValueError(f"unknown op {op!r}")


async def main(uri: str, db_name: str) -> None:
    client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(uri, tz_aware=True)
    service = DefaultSessionService(MongoSessionRepository(client[db_name]))
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    print(json.dumps({"ready": True}), flush=True)
    try:
        while line := await reader.readline():
            try:
                answer = await run(service, json.loads(line))
            except Exception as exc:  # reported to the test, which fails on it
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            print(json.dumps(answer), flush=True)
    finally:
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
