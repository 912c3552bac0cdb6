"""`TracingSessionService`: a span per compaction, around any session service."""

from __future__ import annotations

from .._telemetry import span
from ..compaction import CompactionStrategy, TriggerLike
from ..compaction_protocols import CompactionResult
from ..service import DelegatingSessionService

__all__ = ["TracingSessionService"]


class TracingSessionService(DelegatingSessionService):
    """Forwards everything to ``delegate``; a compaction runs in a ``compaction`` span.

    The span's attributes: ``asyncsession.session.id`` (also as ``gen_ai.conversation.id``), the
    strategy and trigger classes, and the outcome: ``asyncsession.compaction.applied``,
    ``.archived_events`` and
    ``.tokens_saved`` (estimated), and ``.error`` when the strategy fell back. Give this service
    to the advisors and the ``CompactionWorker`` so their compactions are traced; wrap the
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
            result = await self.delegate.compact(session_id, trigger, strategy)
            traced.set_many(
                {
                    "asyncsession.compaction.applied": result.applied,
                    "asyncsession.compaction.archived_events": result.archived_event_count,
                    "asyncsession.compaction.tokens_saved": result.tokens_estimated_saved,
                    "asyncsession.compaction.error": result.error,
                }
            )
        return result
