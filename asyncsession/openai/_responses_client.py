"""``ResponsesClient``: Responses API calls and streams, through the advisors of ``ChatClient``."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from openai import AsyncOpenAI

from ..advisors.base import Advisor, CallContext, ChunkStream
from ..chat import ChatOptions, ChatRequest, ChatResponse
from ..messages import Message
from ._chat_client import BaseChatClient, MessagesLike
from ._responses_convert import DEFAULT_INCLUDE
from ._responses_items import items_to_messages
from ._responses_model import ResponsesModelStream, complete_response

__all__ = ["ResponsesClient"]


class ResponsesClient(BaseChatClient):
    """The Responses API (``client.responses.create``) over a borrowed ``openai.AsyncOpenAI``.

    It takes the arguments, advisors, context keys and options of ``ChatClient`` and raises the
    same errors; the advisors and the session log cannot tell the two apart. What differs is
    the wire: the prompt goes as input items (see
    [`messages_to_items`][asyncsession.openai.messages_to_items]), reasoning items come back on
    the assistant message and are replayed in the next request, and a stream yields one chunk
    per semantic event (``chunk.raw`` is the SDK's event).

    The session is the history: every call sends ``store=False`` and asks for
    ``reasoning.encrypted_content`` (pass ``include=()`` for a model without reasoning, which
    refuses it). ``previous_response_id`` is never sent; if you pass one in
    ``ChatOptions.extra_body``, the server prepends that response's history to the input the
    memory advisor already replays, so do it only without a memory advisor.

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        advisors: advisors of every call, e.g. the session and tool advisors.
        default_messages: messages that start every prompt (ours, or Responses input items).
        default_options: model parameters of every call; a call's options override them
            (``stop`` and ``seed`` do not exist on this API and raise ``UsageError``).
        default_context: advisor-context entries of every call; a call's override them.
        store: whether OpenAI stores the responses (default ``False``).
        include: the ``include`` list of every request.
        context_management: the ``context_management`` of every request, e.g.
            ``[{"type": "compaction", "compact_threshold": 200_000}]``: the server then compacts
            during a response that reaches the threshold. The memory advisor stores a reply
            that carries a ``compaction`` item with the archive of the events the request sent
            (system messages aside), in one compare-and-swap, so later requests start at the
            item; within a call, and for a history passed in, the messages before the newest
            such reply (system messages aside) are not sent either, the item stands for them.
    """

    def __init__(
        self,
        openai_client: AsyncOpenAI,
        *,
        model: str,
        advisors: Iterable[Advisor] = (),
        default_messages: MessagesLike = (),
        default_options: ChatOptions | None = None,
        default_context: Mapping[str, Any] | None = None,
        store: bool = False,
        include: Sequence[str] = DEFAULT_INCLUDE,
        context_management: Sequence[Mapping[str, Any]] = (),
    ) -> None:
        super().__init__(
            openai_client,
            model=model,
            advisors=advisors,
            default_messages=default_messages,
            default_options=default_options,
            default_context=default_context,
        )
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
