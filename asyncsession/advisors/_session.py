"""What the session advisors share: resolving the session, shielded writes, compaction, and
the turn's deferred writes (``store_question="with_reply"``)."""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal, Protocol, cast, get_args, runtime_checkable

from pydantic import JsonValue

from .._checks import require_service
from .._server_compaction import commit_compacted_turn
from .._shield import shielded
from .._text import check_event_text
from ..compaction_protocols import (
    CompactionRequest,
    CompactionStrategy,
    TriggerLike,
    check_strategy,
    check_trigger,
    should_compact,
)
from ..events import Session, SessionEvent
from ..exceptions import AccessDenied, SessionExists, SessionNotFound, UsageError
from ..filters import EventFilter
from ..messages import Message
from ..service import SessionService, new_event_id
from .base import CallContext, StateKey
from .contexts import CALL_SESSION, SessionContexts

__all__ = [
    "TURN_STATE",
    "CompactionOptions",
    "CompactionSubmitter",
    "HistoryReader",
    "STORE_QUESTION_DEFAULT",
    "Resolved",
    "StoreQuestion",
    "TurnState",
    "check_compaction_pair",
    "check_service",
    "check_store_question",
    "compact_after_turn",
    "open_turn",
    "resolve_session",
]

logger = logging.getLogger("asyncsession.advisors")

StoreQuestion = Literal["first", "with_reply"]
"""When a turn stores the user's message: ``"first"``, before the model call (with the window
read, so it survives a failed call), or ``"with_reply"``, together with the reply in one
write once the turn is complete (nothing is stored for a turn that fails)."""
STORE_QUESTION_DEFAULT: Final[StoreQuestion] = "first"
"""The default: the question is stored before the model is called."""


def check_store_question(value: object) -> StoreQuestion:
    """``value``, if it is one of the `StoreQuestion` choices.

    Raises:
        UsageError: any other value.
    """
    choices = get_args(StoreQuestion)
    if not isinstance(value, str) or value not in choices:
        raise UsageError(f"store_question must be one of {choices!r}, not {value!r}")
    return cast(StoreQuestion, value)


@runtime_checkable
class CompactionSubmitter(Protocol):
    """Anything that compacts sessions in the background, like ``CompactionWorker``.

    ``submit`` may be a plain or an ``async`` method; it should return quickly.
    """

    def submit(self, session_id: str) -> object:
        """Queue ``session_id`` for compaction."""
        ...


@runtime_checkable
class TriggeredSubmitter(CompactionSubmitter, Protocol):
    """A declared capability: a background compactor that says when it compacts (its trigger).

    ``CompactionWorker`` is one: the turn advisor asks the trigger first when the call already
    knows the whole active view, and a quiet trigger skips the submit.
    """

    @property
    def trigger(self) -> TriggerLike | None:
        """When this compactor compacts; ``None`` if it does not say."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionOptions:
    """When and how a turn compacts once it is complete: the one place the options live.

    Either ``trigger`` and ``strategy`` together (compact inline), or a ``worker`` (hand the
    session to it, asking ``trigger`` or the worker's own trigger first).
    """

    trigger: TriggerLike | None = None
    """When to compact."""
    strategy: CompactionStrategy | None = None
    """How to compact (inline)."""
    worker: CompactionSubmitter | None = None
    """The background compactor, if any."""

    @classmethod
    def of(
        cls,
        trigger: TriggerLike | None,
        strategy: CompactionStrategy | None,
        worker: CompactionSubmitter | None = None,
    ) -> CompactionOptions | None:
        """The options, or ``None`` when nothing compacts.

        Raises:
            UsageError: only one of ``trigger`` and ``strategy`` is set.
        """
        check_compaction_pair(trigger, strategy)
        if trigger is None and worker is None:
            return None
        return cls(trigger=trigger, strategy=strategy, worker=worker)

    def first_trigger(self) -> TriggerLike | None:
        """The trigger asked before compacting: this one, else the worker's own."""
        if self.trigger is None and isinstance(self.worker, TriggeredSubmitter):
            return self.worker.trigger
        return self.trigger

    async def after_turn(
        self,
        service: SessionService,
        session: Session,
        known_events: Sequence[SessionEvent] | None,
    ) -> None:
        """Compact (or hand to the worker) once a turn is complete; failures are logged."""
        await compact_after_turn(
            service,
            session,
            trigger=self.first_trigger(),
            strategy=self.strategy,
            worker=self.worker,
            known_events=known_events,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """A session resolved for a call, with the events of the read that resolved it."""

    session: Session
    """The session (found or just created)."""
    events: tuple[SessionEvent, ...] | None
    """The events of ``read_filter``; ``None`` when only the session was read."""
    read_filter: EventFilter | None
    """The filter of the read; ``None`` for a read of the session alone."""


async def resolve_session(
    service: SessionService,
    context: Mapping[str, Any],
    session_id: str,
    *,
    read_filter: EventFilter | None,
    default_user_id: str,
) -> Resolved:
    """Find or create the session in the read that also fetches its window, check the owner.

    One read for an existing session (``get_snapshot``: session, version and window together);
    for a new one the read finds nothing, the session is created, and its window is known to
    be empty.

    Raises:
        AccessDenied: the context names a user who does not own the session.
    """
    user_id = SessionContexts.user_id(context)
    resolved = await _read(service, session_id, read_filter)
    if resolved is None:
        request = SessionContexts.create_request(
            session_id, context, default_user_id=default_user_id
        )
        try:
            session = await shielded(service.create(request))
        except SessionExists:  # a concurrent call created it first: use theirs
            resolved = await _read(service, session_id, read_filter)
            if resolved is None:
                raise SessionNotFound(session_id) from None
        else:
            events = () if read_filter is not None else None
            return Resolved(session=session, events=events, read_filter=read_filter)
    if user_id is not None and resolved.session.user_id != user_id:
        raise AccessDenied(session_id, user_id)
    return resolved


async def open_turn(
    service: SessionService,
    context: Mapping[str, Any],
    session_id: str,
    message: Message,
    *,
    read_filter: EventFilter,
    event_id: str | None,
    default_user_id: str,
) -> tuple[Resolved, SessionEvent]:
    """Check the owner, store the user's message and read the window before it, in one step.

    On a store with native turns (`asyncsession.repository.TurnRepository`) this is the whole
    database work before the model call; a turn refused for its owner stores nothing. A missing
    session is created in the same step, owned by the context's user (or ``default_user_id``).
    With ``event_id=None`` the service draws the message's id from the store.

    Raises:
        AccessDenied: the context names a user who does not own the session.
    """
    event, snapshot = await shielded(
        service.start_turn(
            session_id,
            message,
            read_filter,
            event_id=event_id,
            user_id=SessionContexts.user_id(context),
            create=SessionContexts.create_request(
                session_id, context, default_user_id=default_user_id
            ),
        )
    )
    resolved = Resolved(session=snapshot.session, events=snapshot.events, read_filter=read_filter)
    return resolved, event


async def _read(
    service: SessionService, session_id: str, read_filter: EventFilter | None
) -> Resolved | None:
    if read_filter is None:
        session = await service.find_by_id(session_id)
        return None if session is None else Resolved(session=session, events=None, read_filter=None)
    snapshot = await service.get_snapshot(session_id, read_filter)
    if snapshot is None:
        return None
    return Resolved(session=snapshot.session, events=snapshot.events, read_filter=read_filter)


@runtime_checkable
class HistoryReader(Protocol):
    """An advisor whose history read can also resolve the turn (``SessionMemoryAdvisor``).

    The turn advisor reads the session with this advisor's filter, so that whoever resolves the
    turn first also reads the window this advisor needs, and it can reuse that read.
    """

    @property
    def service(self) -> SessionService:
        """The service the history is read from."""
        ...

    def history_filter(self, context: Mapping[str, Any]) -> EventFilter:
        """The filter the history is read with for a call with this advisor context."""
        ...


@dataclass(slots=True, kw_only=True)
class TurnState:
    """The call's session, resolved once by the first advisor that needs it, and who compacts.

    The turn advisor creates it pending and owns it: it resolves the session, by default with
    a read of its own, or with the step of the first advisor that needs the session and passes
    one (the memory advisor stores the user's message and reads its window in that step); if
    nobody did, a before-model hook resolves it right before the model is called, so the owner
    is always checked and the session always exists before the model runs, whatever sits in
    between. The turn also owns compaction: ``compaction`` holds the options it compacts with
    once the turn is complete; a memory advisor with options of its own hands them over when
    the turn has none.

    With ``store_question="with_reply"`` the memory advisor stores nothing during the call: it
    hands every message it would store (the question, the tool calls and results of a tool
    loop, the replies) to `defer`, and the turn advisor writes them all in one append with
    `commit` once the call is complete. A call that fails or is cancelled before then stores
    nothing.
    """

    service: SessionService
    """The service the turn advisor resolves the session with."""
    session_id: str
    """The call's session id."""
    context: Mapping[str, Any]
    """The advisor context the session is created from (user id, metadata)."""
    default_user_id: str
    """The owner of a session created without a user id in the context."""
    read_filter: EventFilter | None
    """The window read along with the session when resolved here (the history filter of a
    memory advisor on the same service), or ``None`` to read the session alone."""
    compaction: CompactionOptions | None
    """How the turn compacts once it is complete; ``None``: it does not."""
    resolved: Resolved | None = None
    """The session and the window read with it; ``None`` while the turn is pending."""
    store_question: StoreQuestion = STORE_QUESTION_DEFAULT
    """When the user's message is stored: before the model call, or with the reply."""
    appended: list[SessionEvent] = field(default_factory=list[SessionEvent])
    """The events memory advisors appended during the call, in order (deferred ones too)."""
    deferred: list[SessionEvent] = field(default_factory=list[SessionEvent])
    """The events waiting for `commit` (``store_question="with_reply"``), in order."""
    covered: frozenset[str] | None = None
    """The ids a deferred reply the server compacted during covers (the events its request
    was built from, deferred ones included); ``None`` while no deferred reply was compacted."""
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, repr=False)

    @property
    def is_pending(self) -> bool:
        """Whether nobody has resolved the session yet."""
        return self.resolved is None

    @property
    def stores_with_reply(self) -> bool:
        """Whether the call's messages are stored together once the call is complete."""
        return self.store_question == "with_reply"

    async def defer(
        self,
        message: Message,
        event_id: str | None,
        metadata: Mapping[str, JsonValue] | None = None,
        *,
        covers: frozenset[str] | None = None,
    ) -> SessionEvent:
        """The event ``message`` will be stored as, queued for `commit`.

        The id is ``event_id``, else one drawn from the service, as ``append_message`` draws
        it; a text the store would refuse is refused now, before the model is called. A reply
        the server compacted during names the ids its compaction item ``covers``: the commit
        then archives them (see `commit`).

        Raises:
            InvalidText: the message holds a string that does not encode as UTF-8.
        """
        if event_id is None:
            event_id = await new_event_id(self.service, self.session_id)
        event = SessionEvent(
            id=event_id, session_id=self.session_id, message=message, metadata=dict(metadata or {})
        )
        check_event_text(event)
        self.deferred.append(event)
        if covers is not None:
            self.covered = covers | (self.covered or frozenset())
        return event

    async def commit(self) -> None:
        """Store the deferred events in one append (one version); nothing if none wait.

        Ids the session already has are replays, skipped by the store, so a retried request
        whose ids are fixed stores nothing twice. When a deferred reply was compacted by the
        server, the append is the compare-and-swap that also archives what its item covers and
        writes the ``COMPACTION`` record (the deferred events it covers are written archived);
        a lost compare-and-swap is retried on a fresh read, and after the last attempt the
        events are appended plainly, nothing archived.
        """
        if not self.deferred:
            return
        events, self.deferred = self.deferred, []
        covered, self.covered = self.covered, None
        if covered is None:
            await shielded(self.service.append_events(self.session_id, events))
        else:
            await shielded(commit_compacted_turn(self.service, events, covered))

    async def resolve(self, step: Callable[[], Awaitable[Resolved]] | None = None) -> Resolved:
        """Resolve the session once (find or create, check the owner), with its window.

        Args:
            step: the caller's own step that resolves the session, run instead of this turn's
                read if the session is still pending (not run otherwise).

        Raises:
            AccessDenied: the context's user does not own the session.
        """
        async with self._lock:
            if self.resolved is None:
                if step is not None:
                    self.resolved = await step()
                else:
                    self.resolved = await resolve_session(
                        self.service,
                        self.context,
                        self.session_id,
                        read_filter=self.read_filter,
                        default_user_id=self.default_user_id,
                    )
            return self.resolved

    async def session(self) -> Session:
        """The call's session, resolved on first use (see `resolve`)."""
        return (await self.resolve()).session

    async def _resolve_before_model(self) -> None:
        if self.resolved is None:
            await self.resolve()

    def install(self, ctx: CallContext) -> None:
        """Share this turn with the call's advisors (and with `SessionContexts.session`), and
        resolve it before the model is called if nobody did."""
        ctx.state[TURN_STATE] = self
        ctx.state[CALL_SESSION] = self
        ctx.before_model_call(self._resolve_before_model)


TURN_STATE: StateKey[TurnState] = StateKey("asyncsession.advisors.turn")
"""Where the turn advisor leaves its `TurnState`."""


def check_compaction_pair(trigger: TriggerLike | None, strategy: CompactionStrategy | None) -> None:
    """Raise ``UsageError`` unless trigger and strategy are both set or both unset, and each
    set one is what it claims to be."""
    if (trigger is None) != (strategy is None):
        raise UsageError(
            "compaction_trigger and compaction_strategy must be set together (or neither)"
        )
    if trigger is not None and strategy is not None:
        check_trigger(trigger, "compaction_trigger")
        check_strategy(strategy, "compaction_strategy")


def check_service(service: SessionService, advisor: str) -> SessionService:
    """``service``, refusing ``None`` when the advisor is built rather than inside a call.

    Raises:
        UsageError: ``service`` is ``None``.
    """
    if cast(object, service) is None:
        raise UsageError(f"{advisor} needs a SessionService, not None")
    return require_service(service, f"{advisor}'s service")


def known_active_view(
    read_filter: EventFilter | None,
    events: Sequence[SessionEvent] | None,
    appended: Sequence[SessionEvent],
) -> list[SessionEvent] | None:
    """The active view as far as this call knows it, or ``None`` when the read was partial.

    Only a read of the whole active view (``EventFilter.active()``), plus what this call
    appended, is the active view; any other filter or window leaves events out.
    """
    if read_filter != EventFilter.active() or events is None:
        return None
    seen = {event.id for event in events}
    return [*events, *(event for event in appended if event.id not in seen)]


async def compact_after_turn(
    service: SessionService,
    session: Session,
    *,
    trigger: TriggerLike | None,
    strategy: CompactionStrategy | None,
    worker: CompactionSubmitter | None,
    known_events: Sequence[SessionEvent] | None,
) -> None:
    """Compact (or hand to the worker) once a turn is complete; failures are logged, not raised.

    When the call already knows the whole active view, the trigger is asked about it first, so
    a quiet trigger reads and writes nothing. The service asks it again on what it reads,
    so a trigger that fires here but not on the fresh read is harmless.
    """
    try:
        if trigger is not None and known_events is not None:
            request = CompactionRequest.of(session, known_events)
            if not await should_compact(trigger, request):
                return
        if worker is not None:
            submitted = worker.submit(session.id)
            if inspect.isawaitable(submitted):
                await submitted
            return
        if trigger is not None and strategy is not None:
            await service.compact(session.id, trigger, strategy)
    except Exception:
        # The chat call succeeded and its turn is stored; the next turn tries again.
        logger.warning("Compaction of session %r failed", session.id, exc_info=True)
