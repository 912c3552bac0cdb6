"""``SessionTurnAdvisor``: once per call, around the tool loop.

Before the turn it resolves the session once: it finds or creates it (with the context's user id
and session metadata) and checks its owner when the context names a user, in the same read that
fetches the history window of the ``SessionMemoryAdvisor`` inside it, which then reuses that
read. After the turn, when the final reply asks for no tools, it compacts the session inline,
or hands it to a background worker.
"""

from __future__ import annotations

from typing import Final

from ..chat import ChatRequest, ChatResponse
from ..compaction import CompactionStrategy, TriggerLike
from ..filters import EventFilter
from ..service import SessionService
from ._session import (
    TURN_STATE,
    CompactionSubmitter,
    TurnState,
    check_compaction_pair,
    compact_after_turn,
    known_active_view,
    resolve_session,
)
from .auto_memory import AutoMemoryToolsAdvisor
from .base import HIGHEST_PRECEDENCE, BaseAdvisor, CallContext
from .contexts import DEFAULT_USER_ID, SessionContexts
from .memory import SessionMemoryAdvisor
from .recall import SessionRecallAdvisor
from .tools import ToolCallingAdvisor

_TRANSPARENT: Final = (ToolCallingAdvisor, AutoMemoryToolsAdvisor, SessionRecallAdvisor)
"""Our advisors that may sit between the turn and memory advisors without needing the session
to exist first or changing the user's message."""

__all__ = ["CompactionSubmitter", "SessionTurnAdvisor"]


class SessionTurnAdvisor(BaseAdvisor):
    """Resolves the session once per call and compacts once the turn is complete.

    Args:
        service: the session service.
        default_user_id: the owner of sessions created without a user id in the context.
        compaction_trigger: when to compact (with a strategy).
        compaction_strategy: how to compact (with a trigger).
        worker: compacts in the background instead (a ``CompactionWorker``, or anything with a
            ``submit(session_id)``): after a complete turn the session id is handed to it. When
            the call already knows the whole active view, the trigger (this advisor's, else the
            worker's ``trigger`` attribute) is asked first and a quiet one skips the submit.
        order: the position in the chain.

    Raises:
        UsageError: only one of ``compaction_trigger`` and ``compaction_strategy`` is set.
    """

    DEFAULT_ORDER: Final = HIGHEST_PRECEDENCE + 200
    """The default order: outside the tool loop, so it runs once per call."""

    def __init__(
        self,
        service: SessionService,
        *,
        default_user_id: str = DEFAULT_USER_ID,
        compaction_trigger: TriggerLike | None = None,
        compaction_strategy: CompactionStrategy | None = None,
        worker: CompactionSubmitter | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        check_compaction_pair(compaction_trigger, compaction_strategy)
        self.service = service
        """The session service."""
        self.default_user_id = default_user_id
        """The owner of sessions created without a user id."""
        self.compaction_trigger = compaction_trigger
        """When to compact."""
        self.compaction_strategy = compaction_strategy
        """How to compact."""
        self.worker = worker
        """The background compactor, if any."""
        self.order = order
        """The position in the chain."""

    @property
    def compacts(self) -> bool:
        """Whether this advisor compacts (or hands off) after a complete turn."""
        return self.compaction_trigger is not None or self.worker is not None

    def _read_filter(self, ctx: CallContext) -> EventFilter | None:
        """The history filter of the memory advisor inside this one, if any: one read serves
        the resolve and the history."""
        position = next((i for i, a in enumerate(ctx.advisors) if a is self), -1)
        for advisor in ctx.advisors[position + 1 :]:
            if isinstance(advisor, SessionMemoryAdvisor) and advisor.service is self.service:
                return advisor.history_filter(ctx.context)
        return None

    def _memory_opens_turn(self, ctx: CallContext) -> bool:
        """Whether the memory advisor inside can resolve the session for this advisor.

        It can when it uses the same service and only advisors of ours that neither need the
        session to exist nor change the user's message sit in between; then the resolve, the
        owner check, storing the message and reading the window are one step. With any other
        advisor in between, this advisor resolves first, as the pipeline promises.
        """
        position = next((i for i, a in enumerate(ctx.advisors) if a is self), -1)
        for advisor in ctx.advisors[position + 1 :]:
            if isinstance(advisor, SessionMemoryAdvisor):
                return advisor.service is self.service
            if not isinstance(advisor, _TRANSPARENT):
                return False
        return False

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Resolve the session (find or create, check the owner) and share what was read.

        Raises:
            MissingSessionId: the context has no session id.
            AccessDenied: the context's user does not own the session.
        """
        session_id = SessionContexts.session_id(ctx.context)
        resolved = None
        if not self._memory_opens_turn(ctx):
            resolved = await resolve_session(
                self.service,
                ctx.context,
                session_id,
                read_filter=self._read_filter(ctx),
                default_user_id=self.default_user_id,
            )
        # else the memory advisor inside opens the turn: one step resolves the session, checks
        # the owner, stores the user's message and reads the window (see SessionMemoryAdvisor).
        ctx.state[TURN_STATE] = TurnState(
            service=self.service, resolved=resolved, compacts=self.compacts
        )
        return request

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        """Compact once the turn is complete; a failed compaction is logged, not raised."""
        turn = ctx.state.get(TURN_STATE)
        if response.has_tool_calls or not self.compacts or turn is None or turn.resolved is None:
            return response
        trigger = self.compaction_trigger
        if trigger is None and self.worker is not None:
            # Ask the worker's own trigger first, when it exposes one, to skip a pointless submit.
            trigger = getattr(self.worker, "trigger", None)
        await compact_after_turn(
            self.service,
            turn.resolved.session,
            trigger=trigger,
            strategy=self.compaction_strategy,
            worker=self.worker,
            known_events=known_active_view(
                turn.resolved.read_filter, turn.resolved.events, turn.appended
            ),
        )
        return response
