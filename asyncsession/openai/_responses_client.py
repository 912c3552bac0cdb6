"""``ResponsesClient``: Responses API calls and streams, with the turn and advisors of
``ChatClient``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from openai import AsyncOpenAI

from ..advisors import CallContext, ChunkStream
from ..chat import ChatRequest, ChatResponse
from ..messages import Message
from ._client import BaseChatClient, ClientOptions
from ._responses_convert import DEFAULT_INCLUDE
from ._responses_items import items_to_messages
from ._responses_model import ResponsesModelStream, complete_response

__all__ = ["ResponsesClient"]


class ResponsesClient(BaseChatClient):
    """The Responses API (``client.responses.create``) over a borrowed ``openai.AsyncOpenAI``.

    It takes the arguments of ``ChatClient`` (see
    [`BaseChatClient`][asyncsession.openai.BaseChatClient]) and raises the same errors; the turn,
    the advisors and the session log cannot tell the two apart. What differs is the wire: the
    prompt goes as input items (see [`messages_to_items`][asyncsession.openai.messages_to_items]),
    reasoning items come back on the assistant message and are replayed in the next request,
    and a stream yields one chunk per semantic event (``chunk.raw`` is the SDK's event).
    ``default_messages`` and ``messages=`` may be Responses input items.

    The session is the history: every call sends ``store=False`` and asks for
    ``reasoning.encrypted_content`` (pass ``include=()`` for a model without reasoning, which
    refuses it). ``previous_response_id`` is never sent; if you pass one in
    ``ChatOptions.extra_body``, the server prepends that response's history to the input the
    turn already replays, so do it only without session memory.

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        store: whether OpenAI stores the responses (default ``False``).
        include: the ``include`` list of every request.
        context_management: the ``context_management`` of every request, e.g.
            ``[{"type": "compaction", "compact_threshold": 200_000}]``: the server then compacts
            during a response that reaches the threshold. The turn stores a reply that carries
            a ``compaction`` item as a compaction of the session covering exactly what the
            request sent, so every later request sends the active view, starting at the item.
        **options: the arguments of ``ChatClient`` (``sessions``, ``tools``, ``advisors``, ...;
            ``stop`` and ``seed`` options do not exist on this API and raise ``UsageError``).
    """

    def __init__(
        self,
        openai_client: AsyncOpenAI,
        *,
        model: str,
        store: bool = False,
        include: Sequence[str] = DEFAULT_INCLUDE,
        context_management: Sequence[Mapping[str, Any]] = (),
        **options: Unpack[ClientOptions],
    ) -> None:
        super().__init__(openai_client, model=model, **options)
        self.store = store
        """Whether OpenAI stores the responses."""
        self.include: tuple[str, ...] = tuple(include)
        """The ``include`` list of every request."""
        self.context_management: tuple[dict[str, Any], ...] = tuple(
            dict(entry) for entry in context_management
        )
        """The ``context_management`` entries of every request."""

    @staticmethod
    def _convert_dicts(messages: list[dict[str, Any]]) -> list[Message]:
        """Messages given as dicts are Responses API input items."""
        return items_to_messages(messages)

    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        return await complete_response(
            self.openai_client,
            request,
            self.model,
            store=self.store,
            include=self.include,
            context_management=self.context_management,
        )

    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        return ResponsesModelStream(
            self.openai_client,
            request,
            self.model,
            store=self.store,
            include=self.include,
            context_management=self.context_management,
        )
