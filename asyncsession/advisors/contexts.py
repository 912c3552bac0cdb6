"""The advisor-context keys of the session advisors, and ``SessionContexts`` to read them.

The caller routes a call to a session through the advisor context (``context={...}`` on
``ChatClient.call``/``stream``). [`SessionContexts`][asyncsession.advisors.contexts.SessionContexts]
reads it exactly as the session advisors do, so an advisor of your own names and creates the session
the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol, cast

from pydantic import JsonValue

from ..events import CreateSessionRequest, Session
from ..exceptions import MissingSessionId, UsageError
from ..filters import EventFilter
from .base import CallContext, StateKey

__all__ = [
    "DEFAULT_USER_ID",
    "EVENT_FILTER_CONTEXT_KEY",
    "REQUEST_EVENT_IDS_CONTEXT_KEY",
    "RESPONSE_EVENT_IDS_CONTEXT_KEY",
    "SESSION_ID_CONTEXT_KEY",
    "SESSION_METADATA_CONTEXT_KEY",
    "USER_ID_CONTEXT_KEY",
    "CallSession",
    "SessionContexts",
]

SESSION_ID_CONTEXT_KEY: Final = "chat_memory_conversation_id"
"""Routes the call to a session. Required on every call through the session advisors."""
USER_ID_CONTEXT_KEY: Final = "chat_memory_user_id"
"""The owner of a session created by the call; when set, also enforced on existing sessions."""
EVENT_FILTER_CONTEXT_KEY: Final = "chat_memory_event_filter_id"
"""An ``EventFilter`` merged over the memory advisor's own for this call; ``None`` is ignored."""
SESSION_METADATA_CONTEXT_KEY: Final = "chat_memory_session_metadata"
"""A mapping stored as the metadata of a session the call creates."""
REQUEST_EVENT_IDS_CONTEXT_KEY: Final = "chat_memory_request_event_ids"
"""Set by the memory advisor: the ids of the events it stored for the request side of the call
(the user message, then each round's tool results), in order."""
RESPONSE_EVENT_IDS_CONTEXT_KEY: Final = "chat_memory_response_event_ids"
"""Set by the memory advisor: the ids of the events it stored for the model's replies (each
round's tool-call message, then the final reply), in order."""
DEFAULT_USER_ID: Final = "default-user"
"""The owner of sessions created without a user id in the context."""


class CallSession(Protocol):
    """The session of one call, resolved once by whichever advisor needs it first."""

    async def session(self) -> Session:
        """The session: found or created, its owner checked."""
        ...


CALL_SESSION: StateKey[CallSession] = StateKey("asyncsession.advisors.session")
"""Where a ``SessionTurnAdvisor`` leaves the call's lazily resolved session."""


class SessionContexts:
    """Read the session advisors' keys from an advisor context, as the advisors do."""

    @staticmethod
    async def session(ctx: CallContext) -> Session:
        """The call's session, for an advisor of your own that needs it.

        The ``SessionTurnAdvisor`` further out leaves the session unresolved until an advisor
        needs it: the first to ask resolves it (finds or creates it and checks the owner, once
        per call) and every later one gets the same session. An advisor that never asks costs
        nothing; the memory advisor then resolves the session in the step that starts the turn.

        Raises:
            UsageError: no ``SessionTurnAdvisor`` runs further out in this call.
            MissingSessionId: the context has no session id.
            AccessDenied: the context's user does not own the session.
        """
        call_session = ctx.state.get(CALL_SESSION)
        if call_session is None:
            raise UsageError(
                "SessionContexts.session needs a SessionTurnAdvisor further out in the chain "
                "(a lower order than the advisor that asks)"
            )
        return await call_session.session()

    @staticmethod
    def session_id(context: Mapping[str, Any]) -> str:
        """The session id of the call.

        Raises:
            MissingSessionId: the context has no session id; there is deliberately no shared
                fallback session, which would merge the history of different users.
        """
        value = context.get(SESSION_ID_CONTEXT_KEY)
        if value is None or (isinstance(value, str) and not value.strip()):
            raise MissingSessionId(
                "No session id found in the advisor context. Set "
                f"{SESSION_ID_CONTEXT_KEY!r} (SESSION_ID_CONTEXT_KEY) on every call, e.g. "
                f"client.call(..., context={{SESSION_ID_CONTEXT_KEY: session_id}})"
            )
        if not isinstance(value, str):
            raise UsageError(
                f"The session id under {SESSION_ID_CONTEXT_KEY!r} must be a string, not "
                f"{type(value).__name__}"
            )
        return value

    @staticmethod
    def user_id(context: Mapping[str, Any]) -> str | None:
        """The user id of the call, or ``None`` when absent or blank."""
        value = context.get(USER_ID_CONTEXT_KEY)
        if value is None or (isinstance(value, str) and not value.strip()):
            return None
        if not isinstance(value, str):
            raise UsageError(
                f"The user id under {USER_ID_CONTEXT_KEY!r} must be a string, not "
                f"{type(value).__name__}"
            )
        return value

    @staticmethod
    def metadata(context: Mapping[str, Any]) -> dict[str, JsonValue]:
        """The metadata for a session the call creates (empty when absent)."""
        value = context.get(SESSION_METADATA_CONTEXT_KEY)
        if value is None:
            return {}
        if not isinstance(value, Mapping):
            raise UsageError(
                f"The session metadata under {SESSION_METADATA_CONTEXT_KEY!r} must be a "
                f"mapping, not {type(value).__name__}"
            )
        entries = cast(Mapping[object, JsonValue], value)
        return {str(key): item for key, item in entries.items()}

    @staticmethod
    def event_filter(context: Mapping[str, Any]) -> EventFilter | None:
        """The per-call ``EventFilter``, or ``None``."""
        value = context.get(EVENT_FILTER_CONTEXT_KEY)
        if value is None:
            return None
        if not isinstance(value, EventFilter):
            raise UsageError(
                f"The value under {EVENT_FILTER_CONTEXT_KEY!r} must be an EventFilter, not "
                f"{type(value).__name__}"
            )
        return value

    @staticmethod
    def create_request(
        session_id: str,
        context: Mapping[str, Any],
        *,
        default_user_id: str = DEFAULT_USER_ID,
    ) -> CreateSessionRequest:
        """The request the session advisors create a missing session with."""
        return CreateSessionRequest(
            id=session_id,
            user_id=SessionContexts.user_id(context) or default_user_id,
            metadata=SessionContexts.metadata(context),
        )
