"""asyncsession, driven the two ways our docs show a chat turn: in memory, or on MongoDB.

- ``asyncsession`` (the plain API): a turn is what a user following the docs writes by hand:
  ``service.get_events(session_id, EventFilter(last_n=20, ...))`` for the window, then
  ``service.append_message`` for the user message and again for the reply.
- ``asyncsession-after-reply``: the turn stored after the reply, as the peers store it: a
  snapshot of the window, then one append of the question and the reply at the version read
  (one commit): 2 commands on MongoDB.
- ``asyncsession-question-first``: the question stored before the model call, under a lease,
  and the reply after it: a snapshot, the question's append with a lease at the version read,
  the reply's at the next version: 3 commands on MongoDB.
- ``asyncsession-advisors``: a turn is one ``ChatClient.call(..., session_id=...)`` on a client
  with session memory and the same 20-message window (``event_filter``; what the turn runs: a
  snapshot read, the question, the reply), on a
  real ``openai.AsyncOpenAI`` client whose HTTP transport is an in-process stub model
  (``httpx.MockTransport``) answering with the turn's reply: no server, no network, the
  SDK's request building and response parsing included.
- ``asyncsession-advisors-after-reply``: the same ``ChatClient.call`` with
  ``store_question="with_reply"``: a window read before the model call, then one append of the
  question and the reply after it (the peers' order, on the chat client).

The other scenarios (contention, lost acknowledgements, compaction) use versioned appends with
stable event ids: the compare-and-swap and the idempotency key they are about.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from datetime import timedelta
from typing import Any, ClassVar, Literal

from pymongo import AsyncMongoClient

from asyncsession import (
    AssistantMessage,
    DefaultSessionService,
    EventFilter,
    EventType,
    InMemorySessionRepository,
    Session,
    SessionEvent,
    SessionRepository,
    UserMessage,
)
from asyncsession.compaction_protocols import CompactionRecord
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC, utc_now
from asyncsession.openai import ChatClient
from asyncsession.repository import Lease

from .._commands import CommandCounter
from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, StorageStats, StoreUnavailable, Target
from ._stub_model import STUB_MODEL, StubModel

__all__ = [
    "AsyncSessionAdvisorAfterReplyStore",
    "AsyncSessionAdvisorStore",
    "AsyncSessionAfterReplyStore",
    "AsyncSessionQuestionFirstStore",
    "AsyncSessionStore",
]

USER_ID = "bench-user"
LEASE_TTL = timedelta(seconds=10)
MAX_RETRIES = 10_000

Mode = Literal["plain", "advisors", "after-reply", "question-first", "advisors-after-reply"]


def window_filter(size: int) -> EventFilter:
    """The model's view, newest ``size`` events: what a turn loads."""
    return EventFilter(exclude_archived=True, active_view=True, last_n=size)


def to_event(session_id: str, message: Message) -> SessionEvent:
    """The event for ``message``; its id is derived from the tag, so a retry reuses it."""
    body = (
        UserMessage(text=message.text)
        if message.role == "user"
        else AssistantMessage(text=message.text)
    )
    return SessionEvent(id=f"{session_id}:{message.tag}", session_id=session_id, message=body)


class AsyncSessionStore:
    """The asyncsession adapter; ``target=None`` runs on the in-memory repository."""

    name: ClassVar[str] = "asyncsession"
    writer_policies: ClassVar[tuple[str, ...]] = ("cas-retry", "plain-append")
    mode: ClassVar[Mode] = "plain"

    def __init__(self, target: Target | None, *, seed_batch: int = 2) -> None:
        self.target = target
        self.seed_batch = seed_batch
        self.counter: CommandCounter | None = None
        self._mongo: MongoStoreBase | None = None
        self._client: AsyncMongoClient[dict[str, Any]] | None = None
        self.repository: SessionRepository = InMemorySessionRepository()
        self.service = DefaultSessionService(self.repository)
        self._model: StubModel | None = None
        self._chat: ChatClient | None = None

    async def start(self) -> None:
        """Open the Mongo repository (when there is a target) and create its indexes."""
        if self.target is None:
            return
        try:
            from asyncsession.repository.mongo import MongoSessionRepository
        except ImportError as exc:
            raise StoreUnavailable(
                f"asyncsession.repository.mongo is not importable yet ({exc})"
            ) from exc
        self._mongo = MongoStoreBase(self.target)
        self.counter = CommandCounter()
        self._client = AsyncMongoClient(
            self.target.uri, event_listeners=[self.counter], tz_aware=True
        )
        repository = MongoSessionRepository(self._client[self.target.db_name])
        await repository.ensure_indexes()
        self.repository = repository
        self.service = DefaultSessionService(repository)

    def _chat_client(self, window: int) -> ChatClient:
        """A chat client with session memory on a real ``openai`` client whose transport is the
        stub model; the turn loads the same window as every other system (its default loads
        the whole active view, which compaction keeps short in a real app)."""
        if self._chat is None:
            self._model = StubModel()
            self._chat = ChatClient(
                self._model.client,
                model=STUB_MODEL,
                sessions=self.service,
                store_question="with_reply" if self.mode == "advisors-after-reply" else "first",
                event_filter=window_filter(window),
            )
        return self._chat

    async def aclose(self) -> None:
        """Close the repository (it borrows the client) and the clients."""
        if self._model is not None:
            await self._model.aclose()
        close = getattr(self.repository, "aclose", None)
        if close is not None:
            await close()
        if self._client is not None:
            await self._client.close()
        if self._mongo is not None:
            await self._mongo.close_admin()

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """Create the session and append ``messages`` in batches of ``seed_batch``.

        Seeded through the store's own append path (one commit per batch) rather than by
        copying its layout.
        """
        await self.repository.save(Session(id=session_id, user_id=USER_ID))
        events = [to_event(session_id, m) for m in messages]
        for start in range(0, len(events), self.seed_batch):
            await self.repository.append_events(session_id, events[start : start + self.seed_batch])

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """One snapshot read of the window."""
        snapshot = await self.service.get_snapshot(session_id, window_filter(size))
        assert snapshot is not None, session_id
        return [e.text or "" for e in snapshot.events]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """The plain API turn: read the window, append the question, append the reply."""
        if self.mode in ("advisors", "advisors-after-reply"):
            return await self._advisor_turn(session_id, turn, window)
        if self.mode in ("after-reply", "question-first"):
            return await self._versioned_turn(session_id, turn, window)
        history = await self.service.get_events(session_id, window_filter(window))
        assert len(history) <= window, session_id
        await self.service.append_message(session_id, UserMessage(text=turn.user.text))
        await self.service.append_message(session_id, AssistantMessage(text=turn.reply.text))
        return 0

    async def _versioned_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """A snapshot of the window, then the turn's appends at the version it read: the
        question and the reply in one (after-reply), or the question under a lease and then
        the reply (question-first). A lost race reads again (a retry)."""
        retries = 0
        while True:
            snapshot = await self.service.get_snapshot(session_id, window_filter(window))
            assert snapshot is not None, session_id
            assert len(snapshot.events) <= window + 2, session_id
            question = SessionEvent(session_id=session_id, message=UserMessage(text=turn.user.text))
            reply = SessionEvent(
                session_id=session_id, message=AssistantMessage(text=turn.reply.text)
            )
            version = snapshot.version
            if self.mode == "after-reply":
                if await self.repository.append_events(session_id, [question, reply], version):
                    return retries
            else:
                lease = Lease(holder=question.id, expires_at=utc_now() + LEASE_TTL)
                if await self.repository.append_events(
                    session_id, [question], version, lease=lease
                ):
                    if await self.repository.append_events(session_id, [reply], version + 1):
                        return retries
                    await self.repository.append_events(session_id, [reply])
                    return retries + 1
            retries += 1

    async def _advisor_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """One ``ChatClient.call`` with session memory."""
        chat = self._chat_client(window)
        assert self._model is not None
        self._model.replies[turn.user.tag] = turn.reply.text
        reply = await chat.call(turn.user.text, session_id=session_id, user_id=USER_ID)
        assert reply.text == turn.reply.text, (reply.text[:40], turn.reply.tag)
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """Every message event, archived ones included."""
        events = await self.service.get_events(session_id, EventFilter.all())
        return [e.text or "" for e in events if e.is_message]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer that has read the window and holds the version it saw."""
        snapshot = await self.service.get_snapshot(session_id, window_filter(window))
        assert snapshot is not None, session_id
        return _Writer(self, session_id, policy, window, snapshot.version)

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Append the turn, then send the same batch with the same expected version again."""
        events = [to_event(session_id, turn.user), to_event(session_id, turn.reply)]
        version = await self.service.get_event_version(session_id)
        first = await self.service.append_events(session_id, events, version)
        # The acknowledgement of `first` is lost: the application only knows the version it
        # read, so it retries the identical call.
        retry = await self.service.append_events(session_id, events, version)
        errors = [] if first else ["first write refused"]
        if not retry:
            errors.append("retry returned False (conflict)")
        return errors

    async def storage(self) -> StorageStats | None:
        """``collStats`` of our collections; ``None`` in memory."""
        return None if self._mongo is None else await self._mongo.storage()

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """Take all but the newest ``keep`` messages out of the view, with a summary turn
        before the rest: one commit of the summary turn and the ``COMPACTION`` boundary.

        This is what a summarizing strategy produces; the summary text is fixed so no model is
        called.
        """
        snapshot = await self.service.get_snapshot(session_id, EventFilter.active())
        assert snapshot is not None, session_id
        events = list(snapshot.events)
        cut = max(0, len(events) - keep)
        while cut < len(events) and not events[cut].is_turn_start:
            cut += 1
        if cut == 0 or cut >= len(events):
            return "appended summary turn + boundary (nothing to compact)"
        meta: dict[str, Any] = {SYNTHETIC: True, COMPACTION_SOURCE: "benchmark"}
        summary_turn = (
            SessionEvent(
                session_id=session_id,
                message=UserMessage(text="Summarize the conversation we had so far."),
                metadata=meta,
            ),
            SessionEvent(
                session_id=session_id, message=AssistantMessage(text=summary), metadata=meta
            ),
        )
        view = [*summary_turn, *events[cut:]]
        record = CompactionRecord(
            covered=tuple(e.id for e in events[:cut]),
            kept=tuple(e.id for e in events[cut:]),
            summaries=tuple(e.id for e in summary_turn),
            view=tuple(e.id for e in view),
        )
        boundary = SessionEvent(
            session_id=session_id, type=EventType.COMPACTION, payload=record.to_payload()
        )
        commit = [*summary_turn, boundary]
        if not await self.repository.append_events(session_id, commit, snapshot.version):
            raise RuntimeError("compaction lost its compare-and-swap")
        return "non-destructive: appended summary turn + boundary"

    def describe(self) -> dict[str, Any]:
        """Version and repository."""
        return {
            "package": "asyncsession",
            "version": importlib.metadata.version("asyncsession"),
            "repository": type(self.repository).__name__,
            "seed_batch": self.seed_batch,
            "longest_prompt_messages": 0 if self._model is None else self._model.longest_prompt,
            "turn": (
                "ChatClient.call with session memory (stub model)"
                if self.mode == "advisors"
                else "ChatClient.call with session memory, store_question='with_reply' (stub model)"
                if self.mode == "advisors-after-reply"
                else "read_snapshot + append_events([question, reply], version)"
                if self.mode == "after-reply"
                else "read_snapshot + question (leased) at version + reply at version + 1"
                if self.mode == "question-first"
                else "get_events(last_n=window) + 2 x append_message"
            ),
        }


class AsyncSessionAdvisorStore(AsyncSessionStore):
    """The same store, with the chat turn run by a chat client (see the module)."""

    name: ClassVar[str] = "asyncsession-advisors"
    mode: ClassVar[Mode] = "advisors"

    async def model_call_cpu_ms(self, calls: int = 200) -> float | None:
        """The client CPU of the turn's model call alone (`StubModel.call_cpu_ms`): the part of
        an advisor turn's CPU that any application calling the model pays, with or without a
        session library."""
        return None if self._model is None else await self._model.call_cpu_ms(calls)


class AsyncSessionAdvisorAfterReplyStore(AsyncSessionAdvisorStore):
    """The chat client storing the turn after the reply (see the module)."""

    name: ClassVar[str] = "asyncsession-advisors-after-reply"
    mode: ClassVar[Mode] = "advisors-after-reply"


class AsyncSessionAfterReplyStore(AsyncSessionStore):
    """The turn stored after the reply, at the version read (see the module)."""

    name: ClassVar[str] = "asyncsession-after-reply"
    mode: ClassVar[Mode] = "after-reply"


class AsyncSessionQuestionFirstStore(AsyncSessionStore):
    """The question stored first under a lease, then the reply (see the module)."""

    name: ClassVar[str] = "asyncsession-question-first"
    mode: ClassVar[Mode] = "question-first"


class _Writer:
    def __init__(
        self, store: AsyncSessionStore, session_id: str, policy: str, window: int, version: int
    ) -> None:
        if policy not in AsyncSessionStore.writer_policies:
            raise ValueError(f"unknown writer policy {policy!r}")
        self.store = store
        self.session_id = session_id
        self.policy = policy
        self.window = window
        self.version = version

    async def append(self, message: Message) -> AppendOutcome:
        service = self.store.service
        event = to_event(self.session_id, message)
        if self.policy == "plain-append":
            await service.append_events(self.session_id, [event])
            return AppendOutcome(stored=True)
        conflicts = 0
        while not await service.append_events(self.session_id, [event], self.version):
            conflicts += 1
            if conflicts > MAX_RETRIES:
                return AppendOutcome(stored=False, conflicts=conflicts, error="TooManyConflicts")
            snapshot = await service.get_snapshot(self.session_id, window_filter(self.window))
            assert snapshot is not None
            self.version = snapshot.version
        self.version += 1
        return AppendOutcome(stored=True, conflicts=conflicts)
