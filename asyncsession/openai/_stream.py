"""``ChatStream``: a streamed chat call, as an async context manager around an async iterator
(the streaming guide, ``docs/streaming.md``, gives its semantics)."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
from collections.abc import Mapping
from types import TracebackType
from typing import Any, Self

from .._shield import shielded
from .._turn.chain import close_streams
from ..chat import CallContext, ChatChunk, ChatResponse, ChunkStream
from ..exceptions import UsageError

__all__ = ["ChatStream"]


class _State(enum.Enum):
    UNOPENED = "unopened"
    OPEN = "open"
    CLOSED = "closed"


class ChatStream:
    """A streamed chat call; use it as ``async with client.stream(...) as stream``.

    Iterate it for [`ChatChunk`][asyncsession.chat.ChatChunk] values; read
    [`response`][asyncsession.openai.ChatStream.response] once the iteration has ended.
    Each chunk reaches you as the model sends it. The turn starts with the first chunk asked
    for; it is stored (and compacted) before the iteration ends. Leaving the ``async with``
    block before the end abandons the stream: the model's HTTP stream is closed, the turn's
    lease released, and no part of the reply is stored.
    """

    __slots__ = ("_chunks", "_ctx", "_finished", "_state")

    def __init__(self, ctx: CallContext, chunks: ChunkStream) -> None:
        self._ctx = ctx
        self._chunks = chunks
        self._finished = False
        self._state = _State.UNOPENED

    async def __aenter__(self) -> Self:
        if self._state is not _State.UNOPENED:
            raise UsageError(f"This ChatStream is {self._state.value}; it can be entered only once")
        self._state = _State.OPEN
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> ChatChunk:
        if self._state is not _State.OPEN:
            raise UsageError(
                "Read a ChatStream inside its block: async with client.stream(...) as stream"
                if self._state is _State.UNOPENED
                else "This ChatStream is closed"
            )
        if self._finished:
            raise StopAsyncIteration
        try:
            return await self._chunks.__anext__()
        except StopAsyncIteration:
            self._finished = True
            raise

    @property
    def is_complete(self) -> bool:
        """Whether the stream was read to its end (and so the turn was stored)."""
        return self._finished

    @property
    def context(self) -> Mapping[str, Any]:
        """The advisor context of the call, with what advisors added so far."""
        return self._ctx.context

    @property
    def response(self) -> ChatResponse:
        """The reply the chunks added up to, after every advisor had its say.

        Raises:
            UsageError: the stream was not read to its end.
        """
        if not self._finished:
            raise UsageError("The response is known only once the stream was read to its end")
        return dataclasses.replace(self._chunks.response, context=dict(self._ctx.context))

    async def aclose(self) -> None:
        """Close the stream; an unfinished one is abandoned and its HTTP stream closed."""
        if self._state is _State.CLOSED:
            return
        self._state = _State.CLOSED
        task = asyncio.current_task()
        if not self._finished and task is not None and task.cancelling():
            # Abandoned by a cancelled caller (a client that disconnected): closing the model's
            # HTTP stream must not be cut short by a cancellation delivered again meanwhile.
            await shielded(close_streams(self._ctx))
        else:
            await close_streams(self._ctx)
