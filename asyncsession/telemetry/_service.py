"""`TracingSessionService`: the standard service, with a span per compaction."""

from __future__ import annotations

from .._telemetry import span
from ..compaction import CompactionStrategy
from ..compaction_protocols import CompactionResult, TriggerLike
from ..service import DefaultSessionService

__all__ = ["TracingSessionService"]


class TracingSessionService(DefaultSessionService):
    """A ``DefaultSessionService`` (same arguments) whose compactions run in a ``compaction``
    span.

    The span's attributes: ``asyncsession.session.id`` (also as ``gen_ai.conversation.id``), the
    strategy and trigger classes, and the outcome: ``asyncsession.compaction.applied``,
    ``.archived_events`` and
    ``.tokens_saved`` (estimated), and ``.error`` when the strategy fell back. Give this service
    to the client and the ``CompactionWorker`` so their compactions are traced; wrap the
    repository in a `TracingSessionRepository` to see the store operations inside.
    """

    async def compact(
        self, session_id: str, trigger: TriggerLike, strategy: CompactionStrategy
    ) -> CompactionResult:
        """Compact inside a ``compaction`` span."""
        attributes = {
            "asyncsession.session.id": session_id,
            "gen_ai.conversation.id": session_id,
            "asyncsession.compaction.strategy": type(strategy).__name__,
            "asyncsession.compaction.trigger": type(trigger).__name__,
        }
        with span("compaction", attributes=attributes) as traced:
            result = await super().compact(session_id, trigger, strategy)
            traced.set_many(
                {
                    "asyncsession.compaction.applied": result.applied,
                    "asyncsession.compaction.archived_events": result.archived_event_count,
                    "asyncsession.compaction.tokens_saved": result.tokens_estimated_saved,
                    "asyncsession.compaction.error": result.error,
                }
            )
        return result
