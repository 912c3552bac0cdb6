"""Google ADK ``MongoDbSessionService`` (``google-adk[mongodb]``), driven as its Runner does.

A turn is ``get_session(config=GetSessionConfig(num_recent_events=20))``, then ``append_event``
of the user's event and of the model's event. The service runs the sync PyMongo driver in
``asyncio.to_thread``; the counted ``MongoClient`` is the one handed to it. Imported only when a
run asks for this system.
"""

from __future__ import annotations

import importlib.metadata
import time
from collections.abc import Sequence
from typing import Any, ClassVar

from pymongo import MongoClient

from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, StoreUnavailable, Target

try:
    from google.adk.errors._stale_session_error import StaleSessionError
    from google.adk.errors.already_exists_error import AlreadyExistsError
    from google.adk.events.event import Event
    from google.adk.events.event_actions import EventActions, EventCompaction
    from google.adk.integrations.mongodb import MongoDbSessionService
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.adk.sessions.session import Session
    from google.genai import types
except ImportError as exc:  # not a dependency of the library: only .venv-bench has it
    raise StoreUnavailable(f"google-adk[mongodb] not installed ({exc}); use scripts/bench") from exc

__all__ = ["GoogleAdkStore"]

APP = "bench"
USER = "bench-user"
SESSIONS = "sessions"
EVENTS = "events"
MAX_RETRIES = 10_000


def to_event(message: Message, invocation_id: str) -> Event:
    """The event the Runner appends for ``message`` (the user's, or the model's reply)."""
    if message.role == "user":
        return Event(
            invocation_id=invocation_id,
            author="user",
            content=types.Content(role="user", parts=[types.Part(text=message.text)]),
        )
    return Event(
        invocation_id=invocation_id,
        author="assistant",
        content=types.Content(role="model", parts=[types.Part(text=message.text)]),
    )


def event_text(event: Event) -> str | None:
    """The text of a message event; ``None`` for compaction and other events."""
    if event.content is None or not event.content.parts:
        return None
    return event.content.parts[0].text


class GoogleAdkStore(MongoStoreBase):
    """The google-adk adapter: one service on one counted sync client."""

    name: ClassVar[str] = "google-adk"
    writer_policies: ClassVar[tuple[str, ...]] = ("handle-per-writer", "reload-and-retry")

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        assert self.counter is not None
        self._client: MongoClient[dict[str, Any]] = MongoClient(
            target.uri, event_listeners=[self.counter]
        )
        self.service = MongoDbSessionService(
            database_name=target.db_name, mongo_client=self._client
        )

    async def start(self) -> None:
        """Let the service create its indexes before anything is timed."""
        await self.service.get_session(app_name=APP, user_id=USER, session_id="__warmup__")

    async def aclose(self) -> None:
        """Close both clients (the service borrows the counted one)."""
        await self.service.close()
        self._client.close()
        await self.close_admin()

    async def _get(self, session_id: str, window: int | None) -> Session:
        config = None if window is None else GetSessionConfig(num_recent_events=window)
        session = await self.service.get_session(
            app_name=APP, user_id=USER, session_id=session_id, config=config
        )
        assert session is not None, session_id
        return session

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """``create_session``, then the event documents inserted as ``append_event`` writes them."""
        await self.service.create_session(app_name=APP, user_id=USER, session_id=session_id)
        if not messages:
            return
        base = time.time() - 1.0 - len(messages) * 0.001
        docs: list[dict[str, Any]] = []
        for index, message in enumerate(messages):
            event = to_event(message, f"seed-{index // 2}")
            event.timestamp = base + index * 0.001
            docs.append(
                {
                    "_id": {
                        "app_name": APP,
                        "user_id": USER,
                        "session_id": session_id,
                        "event_id": event.id,
                    },
                    "app_name": APP,
                    "user_id": USER,
                    "session_id": session_id,
                    "timestamp": event.timestamp,
                    "revision": index + 1,
                    "event_data": event.model_dump_json(exclude_none=True),
                }
            )
        await self.insert_chunks(EVENTS, docs)
        await self.admin_db[SESSIONS].update_one(
            {"_id": {"app_name": APP, "user_id": USER, "session_id": session_id}},
            {"$set": {"revision": len(messages), "update_time": docs[-1]["timestamp"]}},
        )

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``get_session`` with ``num_recent_events``."""
        session = await self._get(session_id, size)
        return [t for t in map(event_text, session.events) if t is not None]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the session with its window, append the user's event and the model's."""
        session = await self._get(session_id, window)
        invocation_id = Event.new_id()
        await self.service.append_event(session, to_event(turn.user, invocation_id))
        await self.service.append_event(session, to_event(turn.reply, invocation_id))
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``get_session`` without a config: every event."""
        session = await self._get(session_id, None)
        return [t for t in map(event_text, session.events) if t is not None]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer holding the session handle it loaded."""
        if policy not in self.writer_policies:
            raise ValueError(f"unknown writer policy {policy!r}")
        return _Writer(self, session_id, policy, window, await self._get(session_id, window))

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Append both events; the model event's ack is lost, so it is appended again.

        The application never saw the ack, so its handle still carries the old revision: the
        retry raises ``StaleSessionError``. Following the error's advice (reload, append
        again) then raises ``AlreadyExistsError``, because the event id is the document key:
        ADK does not duplicate, and an application that keeps the event and treats
        ``AlreadyExistsError`` as success gets the right outcome, after two errors.
        """
        session = await self._get(session_id, 20)
        invocation_id = Event.new_id()
        await self.service.append_event(session, to_event(turn.user, invocation_id))
        reply = to_event(turn.reply, invocation_id)
        marker, updated = session._storage_update_marker, session.last_update_time
        await self.service.append_event(session, reply)
        # The ack is lost: the application's handle is as it was before the call.
        session._storage_update_marker, session.last_update_time = marker, updated
        session.events.pop()
        errors: list[str] = []
        try:
            await self.service.append_event(session, reply)
        except (StaleSessionError, AlreadyExistsError) as exc:
            errors.append(type(exc).__name__)
            session = await self._get(session_id, 20)
            try:
                await self.service.append_event(session, reply)
            except (StaleSessionError, AlreadyExistsError) as again:
                errors.append(f"{type(again).__name__} after reload")
        return errors

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """Append the compaction event ADK's summarizer produces; the raw events stay.

        The event is built exactly as ``LlmEventSummarizer`` builds it (author ``user``, an
        ``EventCompaction`` with the covered timestamp range and the summary as model
        content), with the fixed summary instead of a model call, and appended the way the
        Runner appends it.
        """
        session = await self._get(session_id, None)
        covered = session.events[:-keep] if keep else session.events
        if not covered:
            return "append-only: compaction event (nothing to compact)"
        compaction = EventCompaction(
            start_timestamp=covered[0].timestamp,
            end_timestamp=covered[-1].timestamp,
            compacted_content=types.Content(role="model", parts=[types.Part(text=summary)]),
        )
        event = Event(
            author="user",
            actions=EventActions(compaction=compaction),
            invocation_id=Event.new_id(),
        )
        await self.service.append_event(session, event)
        return "non-destructive: appends a compaction event"

    def describe(self) -> dict[str, Any]:
        """Package version."""
        return {"package": "google-adk", "version": importlib.metadata.version("google-adk")}


class _Writer:
    def __init__(
        self, store: GoogleAdkStore, session_id: str, policy: str, window: int, session: Session
    ) -> None:
        self.store = store
        self.session_id = session_id
        self.policy = policy
        self.window = window
        self.session = session

    async def append(self, message: Message) -> AppendOutcome:
        event = to_event(message, Event.new_id())
        conflicts = 0
        while True:
            try:
                await self.store.service.append_event(self.session, event)
                return AppendOutcome(stored=True, conflicts=conflicts)
            except StaleSessionError as exc:
                if self.policy == "handle-per-writer" or conflicts >= MAX_RETRIES:
                    return AppendOutcome(
                        stored=False, conflicts=conflicts, error=type(exc).__name__
                    )
                conflicts += 1
                self.session = await self.store._get(self.session_id, self.window)
