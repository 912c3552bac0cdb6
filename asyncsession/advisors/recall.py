"""``SessionRecallAdvisor``: offer the recall tools, bound to the call's session and user.

``conversation_search`` searches the call's own session, archived turns included, so the model
can recall what compaction took out of its view. ``cross_session_search`` (off by default)
searches every session of the call's user. Both are bound per call from the context — the
model never names a session or a user — and both match terms literally, never as a regex.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Final

from ..chat import ChatRequest
from ..service import SessionService
from ..tools.recall import ConversationSearch, CrossSessionSearch
from .base import HIGHEST_PRECEDENCE, BaseAdvisor, CallContext
from .contexts import SESSION_ID_CONTEXT_KEY, SessionContexts
from .tools import Tool

__all__ = ["SessionRecallAdvisor"]


def _arguments(raw: str) -> dict[str, Any] | str:
    try:
        values = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return f"Error: the arguments are not valid JSON ({exc.msg})."
    if not isinstance(values, dict):
        return "Error: the arguments must be a JSON object."
    return {str(key): value for key, value in values.items()}  # pyright: ignore[reportUnknownVariableType]


class SessionRecallAdvisor(BaseAdvisor):
    """Offer ``conversation_search`` (and optionally ``cross_session_search``) on every call.

    Args:
        service: the session service the tools read from.
        cross_session: also offer ``cross_session_search`` over the call user's sessions (the
            call must carry a user id; calls without one get only ``conversation_search``).
        page_size: results per page.
        order: the position in the chain (outside the tool loop, which runs the tools).
    """

    DEFAULT_ORDER: Final = HIGHEST_PRECEDENCE + 250

    def __init__(
        self,
        service: SessionService,
        *,
        cross_session: bool = False,
        page_size: int = 10,
        order: int = DEFAULT_ORDER,
    ) -> None:
        self.conversation = ConversationSearch(service, page_size=page_size)
        self.service = service
        self.cross_session = cross_session
        self.page_size = page_size
        self.order = order

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Add the recall tools, bound to this call's session (and user)."""
        bound = {SESSION_ID_CONTEXT_KEY: SessionContexts.session_id(ctx.context)}
        tools = [_tool(self.conversation, context=bound)]
        user_id = SessionContexts.user_id(ctx.context)
        if self.cross_session and user_id is not None:
            tools.append(_tool(CrossSessionSearch(self.service, user_id, page_size=self.page_size)))
        present = {t.name for t in request.tools}
        added = tuple(t for t in tools if t.name not in present)
        return dataclasses.replace(request, tools=(*request.tools, *added))


def _tool(search: ConversationSearch | CrossSessionSearch, **bound: Any) -> Tool:
    """``search`` as a tool taking the model's JSON arguments, with ``bound`` fixed (the model
    can never pass its own ``context``)."""

    async def function(raw: str) -> str:
        values = _arguments(raw)
        if isinstance(values, str):
            return values
        values.pop("context", None)
        try:
            return await search(**values, **bound)
        except TypeError as exc:
            return f"Error: invalid arguments for {search.name}: {exc}"

    return Tool(
        name=search.name,
        description=search.description,
        parameters=search.parameters,
        function=function,
    )
