"""Edit and regenerate: the step a chat call with ``replace=`` takes before its turn.

The call replaces an earlier user message of a session and gets a new reply. By **rewind** (one
session) the step appends a ``REWIND`` boundary to just before the replaced message, so the turn
that follows reads the history up to it and stores the new question and reply after it; the old
ones stay in the log, archived. By **fork** (``fork_to``: both kept) the step forks the session
just before the replaced message into ``fork_to``, and the turn runs there; the original is not
touched. With a request id the rewind's event id is fixed, so a retry replays the step and the
turn replays its stored reply; a fork is made once per ``fork_to`` however often it is asked.
"""

from __future__ import annotations

import hashlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from ..chat import CallContext, ChatChunk, ChatRequest, ChatResponse, ChunkStream
from ..exceptions import AccessDenied, SessionNotFound, UsageError
from ..service import SessionService

__all__ = ["Edit", "EditedStream"]


Run = Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]]
Open = Callable[[CallContext, ChatRequest], ChunkStream]


@dataclass(frozen=True, slots=True, kw_only=True)
class Edit:
    """Replace the user message ``replace`` of ``session_id`` before the turn runs."""

    service: SessionService
    """The sessions."""
    session_id: str
    """The session holding the message replaced."""
    replace: str
    """The event id of the user message replaced."""
    fork_to: str | None = None
    """The id of the fork the turn runs in (``None``: rewind ``session_id`` instead)."""
    user_id: str | None = None
    """The caller, checked as the session's owner before anything is written."""
    request_id: str | None = None
    """The call's request id, which fixes the rewind's event id."""

    @classmethod
    def of(
        cls,
        service: SessionService | None,
        session_id: str | None,
        replace: str | None,
        fork_to: str | None,
        user_id: str | None,
        request_id: str | None,
    ) -> Edit | None:
        """The edit step of a call with ``replace`` (``None`` without).

        Raises:
            UsageError: ``fork_to`` without ``replace``, or ``replace`` without session memory
                or an explicit ``session_id``.
        """
        if replace is None:
            if fork_to is not None:
                raise UsageError("fork_to needs replace=<the event id of the message replaced>")
            return None
        if service is None or session_id is None:
            raise UsageError("replace needs a client with session memory and a session_id")
        return cls(
            service=service,
            session_id=session_id,
            replace=replace,
            fork_to=fork_to,
            user_id=user_id,
            request_id=request_id,
        )

    def before_call(self, run: Run) -> Run:
        """``run`` (the turn on the call path) with this step before it."""

        async def edited(ctx: CallContext, request: ChatRequest) -> ChatResponse:
            await self.apply()
            return await run(ctx, request)

        return edited

    def before_stream(self, open_turn: Open) -> Open:
        """``open_turn`` (the turn on the stream path) with this step before it."""
        return lambda ctx, request: EditedStream(self, lambda: open_turn(ctx, request))

    async def apply(self) -> None:
        """Rewind or fork the session so that the turn's history ends just before ``replace``.

        Raises:
            SessionNotFound: the session does not exist.
            AccessDenied: ``user_id`` does not own it; nothing was written.
            UsageError: the session has no event ``replace``.
        """
        service = self.service
        session = await service.find_by_id(self.session_id)
        if session is None:
            raise SessionNotFound(self.session_id)
        if self.user_id is not None and session.user_id != self.user_id:
            raise AccessDenied(self.session_id, self.user_id)
        if self.fork_to is not None:
            await service.fork(self.session_id, before=self.replace, fork_id=self.fork_to)
            return
        event_id = None
        if self.request_id is not None:
            text = f"{len(self.session_id)}:{self.session_id}:{self.request_id}:rewind"
            event_id = f"rewind-{hashlib.sha256(text.encode()).hexdigest()}"
        await service.rewind(self.session_id, before=self.replace, event_id=event_id)


class EditedStream(ChunkStream):
    """The chunks of a turn that an edit step goes before: the step runs when the first chunk
    is asked for, then the turn's stream opens."""

    __slots__ = ("_edit", "_inner", "_open")

    def __init__(self, edit: Edit, open_turn: Callable[[], ChunkStream]) -> None:
        super().__init__()
        self._edit = edit
        self._open = open_turn
        self._inner: ChunkStream | None = None

    async def __anext__(self) -> ChatChunk:
        if self._inner is None:
            await self._edit.apply()
            self._inner = self._open()
        return await self._inner.__anext__()

    async def aclose(self) -> None:
        """Close the turn's stream, if it opened."""
        if self._inner is not None:
            await self._inner.aclose()

    def _produced(self) -> ChatResponse | None:
        if self._inner is None:
            return None
        try:
            return self._inner.response
        except UsageError:
            return None
