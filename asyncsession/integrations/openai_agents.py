"""``AgentsSession``: the OpenAI Agents SDK's ``Session`` protocol on a ``SessionService``.

Needs the SDK: the ``[agents]`` extra (``pip install '.[agents]'`` from a clone). ::

    service = DefaultSessionService(MongoSessionRepository(db))
    session = AgentsSession("conversation-42", service, user_id="alice")
    result = await Runner.run(agent, "Hello", session=session)

The SDK's items are Responses API input items, and they are stored as real message events,
converted by [`items_to_messages`][asyncsession.openai.items_to_messages] (the conversion the
Responses client uses): a user item is a user message, a run of model items (reasoning, text,
function calls, item types we do not interpret) is one assistant message that keeps the items
as given, a run of function-call outputs is one tool message. So compaction, turn-aware windows,
recall search, idempotent appends, compare-and-swap and the tool-call guards all work on an
Agents SDK conversation, and ``get_items`` returns every item exactly as ``add_items`` got it.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

from pydantic import JsonValue

from .._checks import SERVICE_METHODS, require_nonblank, require_object
from .._lifecycle import Closable
from ..compaction import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    CompactionTicket,
    CompactionWorker,
)
from ..compaction_protocols import TriggerLike
from ..events import SessionEvent
from ..exceptions import UsageError
from ..messages import Message
from ..openai import items_to_messages, messages_to_items
from ..service import SessionService
from ._loops import StoreLoop
from ._session import AdapterSession

try:
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.openai_agents needs the OpenAI Agents SDK: "
        "install the [agents] extra (from a clone: pip install '.[agents]')"
    ) from _exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["AgentsSession"]


def _always(request: CompactionRequest) -> bool:
    return True


def _items_of(event: SessionEvent) -> list[dict[str, Any]]:
    """The SDK items an event of the active view holds (one or more)."""
    assert event.message is not None  # the active view holds message events only
    return messages_to_items([event.message])


def _starts_turn(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _fingerprint(messages: Sequence[Message]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.model_dump_json().encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class _PopNewest:
    """A one-off strategy: archive the newest active event and keep all but its last item."""

    def __init__(self) -> None:
        self.popped: dict[str, Any] | None = None

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        events = request.events
        self.popped = None
        if not events:
            return CompactionResult.unchanged(events)
        newest = events[-1]
        items = _items_of(newest)
        self.popped = items[-1]
        rest = tuple(
            SessionEvent(
                session_id=newest.session_id,
                timestamp=newest.timestamp,
                message=message,
                metadata=dict(newest.metadata),
            )
            for message in items_to_messages(items[:-1])
        )
        return CompactionResult(compacted_events=(*events[:-1], *rest), archived_events=(newest,))


class _ArchiveAll:
    """A one-off strategy: archive every active event."""

    def __init__(self) -> None:
        self.archived = 0

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.archived = len(request.events)
        if not request.events:
            return CompactionResult.unchanged(request.events)
        return CompactionResult(compacted_events=(), archived_events=request.events)


class AgentsSession(Closable):
    """An OpenAI Agents SDK ``Session`` whose history is a session of a ``SessionService``.

    Pass it to ``Runner.run``, ``Runner.run_streamed`` or ``Runner.run_sync`` as ``session=``.
    Any service works: ``DefaultSessionService`` over the in-memory or the MongoDB repository,
    or a store of your own. One ``AgentsSession`` object may serve concurrent runs, and several
    objects (in several processes) may share one session id.

    **Owners.** Given a ``user_id``, the session object uses only that user's session:
    ``get_items``, ``add_items``, ``pop_item``, ``clear_session`` and ``compact`` on another
    user's session raise `AccessDenied` and touch nothing. A session it creates is owned by
    ``user_id`` (by ``session_id`` when none is given; then any session is used).

    **Storage.** Each ``add_items`` call converts its batch into messages and appends them as one
    batch of events (one version), creating the session on the first write. ``get_items`` reads
    the active view: what compaction archived is left out, a summary turn it wrote is included
    (as a user and an assistant item).

    **Append-only.** Nothing is ever deleted. ``pop_item`` archives the newest event and returns
    its last item; when that event held more items (an assistant reply with reasoning and
    several function calls), the others are written back as a new event in the same
    compare-and-swap, so the active view loses exactly one item. ``clear_session`` archives every
    active event: ``get_items`` is then empty, while the archived items stay in the log for
    recall search and audits (``SessionService.delete`` removes a session for good). Both retry
    when another writer moved the session's version in between, so a concurrent append is never
    lost, and both run to their end when the caller is cancelled.

    **Idempotency.** Event ids are random, so concurrent ``add_items`` calls (several runs of one
    session) each store their items once, whatever they contain. A batch whose write failed (a
    lost acknowledgement, a timeout, a dropped connection) keeps its ids: retrying
    ``add_items`` with the same items on this object reuses them, so a write that did land is a
    replay and nothing is stored twice. Ids are not derived from the items alone on purpose:
    equal items are often genuinely repeated (a user saying "yes" twice, a scripted model's
    fixed item ids), and a content hash would silently drop the second one. A retry from
    another process is not recognised.

    **Limits.** ``get_items(limit)`` returns exactly the newest ``limit`` items, as the SDK's own
    sessions do (``session_settings.limit`` when ``limit`` is ``None``). With
    ``whole_turns=True`` the window is extended back to the user item that starts its turn, so the
    model is never sent a function-call output without its call.

    **Compaction.** Give a ``trigger`` and a ``strategy`` to compact inline, or a
    ``CompactionWorker`` to compact in the background. The Runner calls
    [`run_compaction`][asyncsession.integrations.openai_agents.AgentsSession.run_compaction]
    after it stored a model response; you may call
    [`compact`][asyncsession.integrations.openai_agents.AgentsSession.compact] yourself.

    System and developer items are stored only by a service built with
    ``allow_system_messages=True``; otherwise ``add_items`` raises ``UsageError``.

    **Event loops and closing.** Every call runs on the event loop the store belongs to (a
    MongoDB client belongs to the first loop that uses it; when a loop that may end, such as
    ``Runner.run_sync`` in a worker thread, would be the first, the adapters' own loop, a
    background thread, takes it), so ``Runner.run_sync`` in any thread and ``asyncio.run``
    around single calls work on MongoDB as on the in-memory store.
    [`close`][asyncsession.integrations.openai_agents.AgentsSession.close] (idempotent; also
    ``async with``) ends the session object: it forgets its retry state and later calls raise
    ``UsageError``. It closes nothing it was given: the service, its store and the worker are
    the caller's to close.

    Args:
        session_id: the session's id (the SDK's ``session_id``).
        service: where the session lives.
        user_id: the user whose session this is; ``None``: any session.
        session_settings: the SDK's settings (``limit``); a ``SessionSettings`` or a dict.
        metadata: metadata of a session this object creates.
        whole_turns: extend limited windows back to the start of their turn.
        trigger: compact inline when this fires (needs ``strategy``).
        strategy: what inline compaction does (needs ``trigger``).
        worker: compact through this worker instead (its own trigger and strategy apply).

    Raises:
        UsageError: a blank id, only one of ``trigger`` and ``strategy``, or both inline
            compaction and a worker.
    """

    session_id: str
    """The session's id."""
    session_settings: SessionSettings | None
    """The SDK's session settings: ``limit`` applies when ``get_items`` gets none."""

    def __init__(
        self,
        session_id: str,
        service: SessionService,
        *,
        user_id: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        whole_turns: bool = False,
        trigger: TriggerLike | None = None,
        strategy: CompactionStrategy | None = None,
        worker: CompactionWorker | None = None,
    ) -> None:
        require_nonblank(session_id, "session_id")
        require_object(service, "service", "a SessionService", methods=SERVICE_METHODS)
        if user_id is not None:
            require_nonblank(user_id, "user_id")
        if (trigger is None) != (strategy is None):
            raise UsageError("inline compaction needs both a trigger and a strategy")
        if worker is not None and trigger is not None:
            raise UsageError("compact inline (trigger and strategy) or through a worker, not both")
        if worker is not None:
            require_object(worker, "worker", "a CompactionWorker", methods=("submit",))
        self.session_id = session_id
        self.service = service
        """The service the session lives in."""
        self.user_id: str = user_id or session_id
        """The owner of a session this object creates."""
        self.metadata: dict[str, JsonValue] = dict(metadata or {})
        """Metadata of a session this object creates."""
        self.whole_turns = whole_turns
        """Whether limited windows are extended back to the start of their turn."""
        self.session_settings = (
            coerce_session_settings(dict(session_settings))
            if isinstance(session_settings, Mapping)
            else session_settings or SessionSettings()
        )
        self._trigger = trigger
        self._strategy = strategy
        self._worker = worker
        self._session = AdapterSession(
            service, session_id, user_id=user_id, creator=self.user_id, metadata=self.metadata
        )
        self._loop = StoreLoop(service, f"AgentsSession {session_id!r}")

    def __repr__(self) -> str:
        return f"AgentsSession(session_id={self.session_id!r})"

    # --- lifecycle -----------------------------------------------------------------------------

    async def close(self) -> None:
        """End this session object; closing again does nothing. The service stays open."""
        await self.aclose()

    async def _release(self) -> None:
        self._session.forget_retries()

    def _closed_error(self) -> UsageError:
        return UsageError(
            f"AgentsSession {self.session_id!r} is closed; create a new one to keep using "
            "the session"
        )

    # --- the protocol --------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The active items, oldest first; with a limit, the newest ``limit`` of them.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        return await self._loop.run(self._read(limit))

    async def _read(self, limit: int | None) -> list[TResponseInputItem]:
        events = await self._session.active(limit)
        items = [item for event in events for item in _items_of(event)]
        if limit is not None and len(items) > limit:
            cut = len(items) - limit
            while self.whole_turns and cut > 0 and not _starts_turn(items[cut]):
                cut -= 1
            items = items[cut:]
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items as one batch of message events.

        A retry of a batch that failed on this object stores nothing twice (see the class
        docs). The write runs to its end if the caller is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a system or developer item while the service stores none.
        """
        self._check_open()
        if not items:
            return
        try:
            messages = items_to_messages(cast("list[Mapping[str, Any]]", items))
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"session {self.session_id!r} cannot store these items: {exc}"
            ) from exc

        def build(ids: Sequence[str]) -> list[SessionEvent]:
            return [
                SessionEvent(id=event_id, session_id=self.session_id, message=message)
                for event_id, message in zip(ids, messages, strict=True)
            ]

        write = self._session.append_retrying(
            _fingerprint(messages), len(messages), build, lambda _: str(uuid.uuid4())
        )
        await self._loop.run(write, write=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Archive the newest item and return it; ``None`` when the active view is empty.

        Nothing is deleted: the item's event is archived (see the class docs).

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        return await self._loop.run(self._pop(), write=True)

    async def _pop(self) -> TResponseInputItem | None:
        while True:
            strategy = _PopNewest()
            result = await self._session.compact(_always, strategy)
            if result is None or strategy.popped is None:
                return None
            if result.applied:
                return cast("TResponseInputItem", strategy.popped)
            # Another writer moved the version between the read and the swap: read again.

    async def clear_session(self) -> None:
        """Archive every active event, so the session's history is empty (nothing is deleted).

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        await self._loop.run(self._clear(), write=True)

    async def _clear(self) -> None:
        while True:
            strategy = _ArchiveAll()
            result = await self._session.compact(_always, strategy)
            if result is None or strategy.archived == 0 or result.applied:
                return

    async def compact(self) -> CompactionResult | CompactionTicket | None:
        """Compact now: inline (the result), through the worker (its ticket), or not (``None``).

        ``None`` also when the session does not exist yet.

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        if self._worker is not None:
            if self.user_id != self.session_id:  # a user was given: check it on the store's loop
                await self._loop.run(self._session.exists())
            return self._worker.submit(self.session_id)
        if self._trigger is None or self._strategy is None:
            return None
        return await self._loop.run(
            self._session.compact(self._trigger, self._strategy), write=True
        )

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """The SDK's compaction hook: the Runner calls it after storing a model response.

        Runs [`compact`][asyncsession.integrations.openai_agents.AgentsSession.compact]; the
        SDK's arguments (a response id, ``force``) are not needed, since the session's own log is
        the history, and are ignored.
        """
        await self.compact()
