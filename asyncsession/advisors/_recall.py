"""``SessionRecallAdvisor``: offer the recall tools, bound to the call's session and user.

``conversation_search`` searches the call's own session, archived turns included, so the model
can recall what compaction took out of its view. ``cross_session_search`` (off by default)
searches every session of the call's user. Both are bound per call from the context — the
model never names a session or a user — and both match terms literally, never as a regex.
The tools themselves are [`conversation_search`][asyncsession.tools.conversation_search] and
[`cross_session_search`][asyncsession.tools.cross_session_search].
"""

from __future__ import annotations

import dataclasses

from .._checks import require_int, require_service
from ..chat import Advisor, CallContext, ChatRequest
from ..exceptions import UsageError
from ..service import SessionService
from ..tools import conversation_search, cross_session_search

__all__ = ["SessionRecallAdvisor"]


class SessionRecallAdvisor(Advisor):
    """Offer ``conversation_search`` (and optionally ``cross_session_search``) on every call.

    Args:
        service: the session service the tools read from.
        cross_session: also offer ``cross_session_search`` over the call user's sessions (the
            call must carry a user id; calls without one get only ``conversation_search``).
        page_size: results per page.

    Raises:
        UsageError: ``service`` is not a session service, or ``page_size`` not an int.
        ValueError: `page_size` is not positive.
    """

    def __init__(
        self,
        service: SessionService,
        *,
        cross_session: bool = False,
        page_size: int = 10,
    ) -> None:
        require_service(service, "SessionRecallAdvisor's service")
        if require_int(page_size, "page_size") <= 0:
            raise ValueError("page_size must be greater than 0")
        self.service = service
        self.cross_session = cross_session
        self.page_size = page_size

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Add the recall tools, bound to this call's session (and user)."""
        session_id = ctx.session_id
        if session_id is None:
            raise UsageError("SessionRecallAdvisor needs a call with a session_id")
        tools = [conversation_search(self.service, session_id, page_size=self.page_size)]
        user_id = ctx.user_id
        if self.cross_session and user_id is not None:
            tools.append(cross_session_search(self.service, user_id, page_size=self.page_size))
        present = {t.name for t in request.tools}
        added = tuple(t for t in tools if t.name not in present)
        return dataclasses.replace(request, tools=(*request.tools, *added))
