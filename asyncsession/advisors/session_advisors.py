"""``SessionAdvisors``: the session's two advisors, configured together in one call.

A chat client with session memory needs a ``SessionTurnAdvisor`` (once per call: resolves the
session, compacts once the turn is complete) and a ``SessionMemoryAdvisor`` (once per round:
history in, messages out) on the same service. ``SessionAdvisors`` builds both from one set of
options, so the compaction options have one home (the turn advisor) and the two cannot be
configured apart by mistake.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import cast

from ..compaction import CompactionStrategy, TriggerLike
from ..exceptions import UsageError
from ..filters import EventFilter
from ..service import SessionService
from ._session import STORE_QUESTION_DEFAULT, CompactionSubmitter, StoreQuestion
from .base import Advisor
from .contexts import DEFAULT_USER_ID
from .filters import MessageFilter
from .ids import EventIdGenerator
from .memory import SessionMemoryAdvisor
from .turn import SessionTurnAdvisor

__all__ = ["SessionAdvisors"]


class SessionAdvisors:
    """The turn advisor and the memory advisor of one service, configured together.

    Iterate it (or pass it as ``advisors``) to get both, turn advisor first; add the tool loop
    and advisors of your own beside them: ``ChatClient(sdk, advisors=[*session, tools])``.
    The turn advisor owns compaction; the memory advisor never compacts on its own.

    Args:
        service: the session service both advisors use.
        compaction: ``(trigger, strategy)``: compact inline after a complete turn.
        worker: compact in the background instead (a ``CompactionWorker``); its own trigger
            is asked first when it has one.
        default_user_id: the owner of sessions created without a user id in the context.
        event_filter: which stored events make the history (see ``SessionMemoryAdvisor``).
        message_filter: which messages are stored.
        request_event_id_generator: the ids of stored user messages and tool results;
            ``None``: the store chooses.
        response_event_id_generator: the ids of stored replies; ``None``: the store chooses.
        store_question: ``"first"`` (the default) stores the user's message before the model
            call; ``"with_reply"`` stores it with the reply in one write once the call is
            complete (see ``SessionTurnAdvisor``).

    Raises:
        UsageError: both ``compaction`` and ``worker`` are given, ``compaction`` is not a
            ``(trigger, strategy)`` pair, or ``store_question`` is not one of its choices.
    """

    __slots__ = ("memory", "turn")

    def __init__(
        self,
        service: SessionService,
        *,
        compaction: tuple[TriggerLike, CompactionStrategy] | None = None,
        worker: CompactionSubmitter | None = None,
        default_user_id: str = DEFAULT_USER_ID,
        event_filter: EventFilter | None = None,
        message_filter: MessageFilter | None = None,
        request_event_id_generator: EventIdGenerator | None = None,
        response_event_id_generator: EventIdGenerator | None = None,
        store_question: StoreQuestion = STORE_QUESTION_DEFAULT,
    ) -> None:
        trigger: TriggerLike | None = None
        strategy: CompactionStrategy | None = None
        if compaction is not None:
            if worker is not None:
                raise UsageError("give SessionAdvisors compaction or a worker, not both")
            given = cast(object, compaction)  # callers outside the type checker
            if not isinstance(given, tuple) or len(cast(tuple[object, ...], given)) != 2:
                raise UsageError("compaction must be a (trigger, strategy) pair")
            trigger, strategy = compaction
        self.turn: SessionTurnAdvisor = SessionTurnAdvisor(
            service,
            default_user_id=default_user_id,
            compaction_trigger=trigger,
            compaction_strategy=strategy,
            worker=worker,
            store_question=store_question,
        )
        """The turn advisor: resolves the session once per call, compacts after the turn."""
        self.memory: SessionMemoryAdvisor = SessionMemoryAdvisor(
            service,
            default_user_id=default_user_id,
            event_filter=event_filter,
            message_filter=message_filter,
            request_event_id_generator=request_event_id_generator,
            response_event_id_generator=response_event_id_generator,
        )
        """The memory advisor: history in, messages out, once per round; it does not compact."""

    def __iter__(self) -> Iterator[Advisor]:
        """The turn advisor, then the memory advisor."""
        yield self.turn
        yield self.memory

    def __len__(self) -> int:
        return 2

    def __repr__(self) -> str:
        return f"SessionAdvisors(turn={self.turn!r}, memory={self.memory!r})"
