"""Several OS processes appending to one ADK session on the test server, each through the
session object it read once (so each append first tries the version that object last saw)."""

from __future__ import annotations

import asyncio
from typing import Any

from processes_support import start_writers
from pymongo.asynchronous.database import AsyncDatabase

from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.messages import UserMessage

_WRITER = """
import asyncio, sys
from google.adk.events.event import Event
from google.adk.events.event_actions import EventActions
from google.genai import types
from pymongo import AsyncMongoClient, monitoring
from asyncsession import DefaultSessionService, MongoSessionRepository
from asyncsession.integrations.google_adk import AdkSessionService

class Inserts(monitoring.CommandListener):  # the commits tried on the ADK session
    def __init__(self, key):
        self.key, self.tried = key, 0
    def started(self, event):
        documents = event.command.get("documents") or [{}]
        if event.command_name == "insert" and documents[0].get("session") == self.key:
            self.tried += 1
    def succeeded(self, event): pass
    def failed(self, event): pass

async def main(uri: str, db: str, who: str, count: int) -> None:
    inserts = Inserts("adk/app/u/shared")
    client = AsyncMongoClient(uri, tz_aware=True, event_listeners=[inserts])
    adk = AdkSessionService(DefaultSessionService(MongoSessionRepository(client[db])))
    session = await adk.get_session(app_name="app", user_id="u", session_id="shared")
    assert session is not None
    print("ready", flush=True)
    assert sys.stdin.readline() == "go\\n"  # every writer has read the session by now
    for n in range(count):
        delta = {who: n, f"user:{who}": n, "app:last": who}
        content = types.Content(role="user", parts=[types.Part(text=f"{who}-{n}")])
        event = Event(author="user", content=content, actions=EventActions(state_delta=delta))
        await adk.append_event(session, event)
        assert session.state[who] == n
        print(f"{who}-{n}", flush=True)
    print(f"refused={inserts.tried - count}", flush=True)
    await client.close()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])))
"""

WRITERS = 6
APPENDS = 15


async def test_processes_each_land_once_in_order_with_every_state_update(
    mongo_uri: str, mongo_db: AsyncDatabase[dict[str, Any]]
) -> None:
    """Six processes, fifteen appends each, all at once through the session object each read
    before any of them appended: every event is stored once, each writer's in its order; the
    state after the newest event holds every writer's last update (session and user keys), and
    the state stored with each event every update before it and its own."""
    repository = MongoSessionRepository(mongo_db)
    await repository.ensure_indexes()
    adk = AdkSessionService(DefaultSessionService(repository))
    await adk.create_session(app_name="app", user_id="u", session_id="shared")
    processes = await start_writers(_WRITER, mongo_uri, mongo_db.name, WRITERS, APPENDS, stdin=True)
    for process in processes:  # all have read the session (at version 0) before any appends
        assert process.stdout is not None
        assert await process.stdout.readline() == b"ready\n"
    outs = await asyncio.gather(*(process.communicate(b"go\n") for process in processes))
    assert [process.returncode for process in processes] == [0] * WRITERS
    lines = [line for out, _ in outs for line in out.decode().split()]
    refused = sum(int(line.removeprefix("refused=")) for line in lines if "=" in line)
    acknowledged = [line for line in lines if "=" not in line]
    assert len(acknowledged) == WRITERS * APPENDS
    # every writer but the first to append tried version 0 and was refused at least once
    assert refused >= WRITERS - 1
    got = await adk.get_session(app_name="app", user_id="u", session_id="shared")
    assert got is not None
    texts = [e.content.parts[0].text or "" for e in got.events if e.content and e.content.parts]
    assert sorted(texts) == sorted(acknowledged)
    for n in range(WRITERS):
        mine = [text for text in texts if text.startswith(f"p{n}-")]
        assert mine == [f"p{n}-{i}" for i in range(APPENDS)]
    expected = {f"p{n}": APPENDS - 1 for n in range(WRITERS)}
    assert {k: v for k, v in got.state.items() if ":" not in k} == expected
    assert await adk.get_user_state(app_name="app", user_id="u") == expected
    assert got.state["app:last"] in expected
    events = await adk.service.get_events(adk.session_key("app", "u", "shared"))
    seen: dict[str, int] = {}
    for event in events:  # the state stored with each event: every update before it, its own
        assert isinstance(event.message, UserMessage)
        who, number = event.message.text.split("-")
        seen[who] = int(number)
        assert event.metadata["google_adk_state"] == seen
