"""``SessionTurnAdvisor``: once per call, around the tool loop.

Before the turn it shares the call's session, resolved lazily: the first advisor that needs it
finds or creates it (with the context's user id and session metadata) and checks its owner when
the context names a user. The ``SessionMemoryAdvisor`` does it in the step that stores the user's
message and reads its window (one step); an advisor of your own in between that needs
the session asks `SessionContexts.session` (which reads the memory advisor's window too, for it
to reuse); and if nobody asked, a before-model hook resolves it right before the model is called
(`CallContext.before_model_call`). So the
owner is checked before the model runs, whatever sits in between, and an advisor that does not
touch the session costs nothing. After the turn, when the final reply asks for no tools, it
compacts the session inline, or hands it to a background worker: the turn owns compaction, and a
``SessionMemoryAdvisor`` with compaction options of its own hands them to the turn when the turn
has none.

By default the memory advisor stores the user's message before the model call, so it survives
a call that fails. With ``store_question="with_reply"`` it stores nothing during the call, and
the turn advisor stores the whole turn (the question, any tool calls and tool results, the
reply) in one write once the call is complete: a write less per turn, and a call that fails,
is cancelled, or whose stream is abandoned stores nothing, the question included.
"""

from __future__ import annotations

from typing import Final

from ..chat import ChatRequest, ChatResponse
from ..compaction import CompactionStrategy, TriggerLike
from ..filters import EventFilter
from ..service import SessionService
from ._return_direct import store_returned_results
from ._session import (
    STORE_QUESTION_DEFAULT,
    TURN_STATE,
    CompactionOptions,
    CompactionSubmitter,
    HistoryReader,
    StoreQuestion,
    TurnState,
    check_service,
    check_store_question,
    known_active_view,
)
from .base import SESSION_TURN_ORDER, BaseAdvisor, CallContext
from .contexts import DEFAULT_USER_ID, SessionContexts

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
            worker's own ``trigger``, when it declares one) is asked first and a quiet one skips
            the submit.
        order: the position in the chain.

    Raises:
        UsageError: only one of ``compaction_trigger`` and ``compaction_strategy`` is set.
    """

    DEFAULT_ORDER: Final = SESSION_TURN_ORDER
    """The default order: outside the tool loop, so it runs once per call."""

    def __init__(
        self,
        service: SessionService,
        *,
        default_user_id: str = DEFAULT_USER_ID,
        compaction_trigger: TriggerLike | None = None,
        compaction_strategy: CompactionStrategy | None = None,
        worker: CompactionSubmitter | None = None,
        store_question: StoreQuestion = STORE_QUESTION_DEFAULT,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self._compaction = CompactionOptions.of(compaction_trigger, compaction_strategy, worker)
        self.store_question: StoreQuestion = check_store_question(store_question)
        """When the user's message is stored: ``"first"`` or ``"with_reply"``."""
        self.service: SessionService = check_service(service, "SessionTurnAdvisor")
        """The session service."""
        self.default_user_id = default_user_id
        """The owner of sessions created without a user id."""
        self.order = order
        """The position in the chain."""

    @property
    def compaction(self) -> CompactionOptions | None:
        """When and how this advisor compacts after a complete turn; ``None``: it does not."""
        return self._compaction

    @property
    def compaction_trigger(self) -> TriggerLike | None:
        """When to compact."""
        return None if self._compaction is None else self._compaction.trigger

    @property
    def compaction_strategy(self) -> CompactionStrategy | None:
        """How to compact."""
        return None if self._compaction is None else self._compaction.strategy

    @property
    def worker(self) -> CompactionSubmitter | None:
        """The background compactor, if any."""
        return None if self._compaction is None else self._compaction.worker

    @property
    def compacts(self) -> bool:
        """Whether this advisor compacts (or hands off) after a complete turn."""
        return self._compaction is not None

    def _read_filter(self, ctx: CallContext) -> EventFilter | None:
        """The history filter of the first history reader on this service inside this advisor,
        if any: whoever resolves the turn then reads the window it needs, and it reuses that."""
        position = next((i for i, a in enumerate(ctx.advisors) if a is self), -1)
        for advisor in ctx.advisors[position + 1 :]:
            if isinstance(advisor, HistoryReader) and advisor.service is self.service:
                return advisor.history_filter(ctx.context)
        return None

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Share the call's session, to be resolved by the first advisor that needs it.

        Raises:
            MissingSessionId: the context has no session id.
        """
        TurnState(
            service=self.service,
            session_id=SessionContexts.session_id(ctx.context),
            context=ctx.context,
            default_user_id=self.default_user_id,
            read_filter=self._read_filter(ctx),
            compaction=self._compaction,
            store_question=self.store_question,
        ).install(ctx)
        return request

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        """Store the results of return-direct tools that ended the turn, after their stored
        tool call (with the rest of the turn, in its one append, when it is stored with the
        reply); compact once the turn is complete (a failed compaction is logged, not
        raised)."""
        turn = ctx.state.get(TURN_STATE)
        if turn is None:
            return response
        # Already resolved, unless an advisor in between answered without calling the model:
        # the session then still exists, and its owner is checked, after every call.
        resolved = await turn.resolve()
        await store_returned_results(ctx, turn, response)
        await turn.commit()
        if response.has_tool_calls or turn.compaction is None:
            return response
        await turn.compaction.after_turn(
            self.service,
            resolved.session,
            known_active_view(resolved.read_filter, resolved.events, turn.appended),
        )
        return response
