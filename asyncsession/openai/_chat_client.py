"""``ChatClient``: Chat Completions calls and streams through an ordered chain of advisors.

``BaseChatClient`` holds what every API's client shares (the prompt, the advisors, the call and
the stream); a subclass supplies the innermost step, the model request itself.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from openai import AsyncOpenAI, OpenAI

from .._checks import require_message, require_object, require_text
from ..advisors.base import Advisor, CallContext, ChunkStream
from ..advisors.chain import run_call, sort_advisors, start_stream
from ..chat import ChatOptions, ChatRequest, ChatResponse
from ..exceptions import UsageError
from ..messages import Message, UserMessage, messages_from_openai
from ..tools import Tool
from ._chat_model import ModelStream, complete
from .streaming import ChatStream

__all__ = ["BaseChatClient", "ChatClient"]

MessagesLike = Sequence[Message] | Sequence[Mapping[str, Any]]
"""Messages of ours, or dicts of the client's API: Chat Completions message dicts for
``ChatClient``, Responses API input items for ``ResponsesClient``."""


def _to_messages(
    messages: MessagesLike,
    convert: Callable[[list[dict[str, Any]]], list[Message]] = messages_from_openai,
) -> list[Message]:
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Iterable):
        raise UsageError(
            f"messages must be a list of messages or OpenAI message dicts, not "
            f"{type(messages).__name__}; pass a single question as user=..."
        )
    items = list(messages)
    if all(isinstance(item, Mapping) for item in items):
        return convert([dict(item) for item in items])  # pyright: ignore[reportArgumentType]
    if any(isinstance(item, Mapping) for item in items):
        raise UsageError("Pass either messages of ours or OpenAI message dicts, not a mix")
    for item in items:
        require_message(item, "messages[]")
    return items  # type: ignore[return-value]  # no mappings, so messages of ours


class BaseChatClient(ABC):
    """A borrowed ``openai.AsyncOpenAI`` behind ordered advisors; subclasses send the request.

    The client owns nothing: it never closes the ``AsyncOpenAI`` it was given, and a call
    holds no resources once it returned (or its stream's ``async with`` block was left).

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        advisors: advisors of every call, e.g. the session and tool advisors.
        default_messages: messages that start every prompt (say, a system prompt).
        default_options: model parameters of every call; a call's options override them.
        default_context: advisor-context entries of every call; a call's override them.
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
    ) -> None:
        if isinstance(openai_client, OpenAI):
            raise UsageError(
                f"{type(self).__name__} needs an openai.AsyncOpenAI, not the sync openai.OpenAI: "
                "its calls are async (build the client with AsyncOpenAI(...))"
            )
        require_object(openai_client, "openai_client", "an openai.AsyncOpenAI", methods=())
        if not require_text(model, "model"):
            raise UsageError("model must be a non-empty string")
        self.openai_client = openai_client
        """The borrowed SDK client."""
        self.model = model
        """The default model."""
        self.advisors: tuple[Advisor, ...] = tuple(advisors)
        """The advisors of every call, in registration order."""
        self.default_messages: tuple[Message, ...] = tuple(
            _to_messages(default_messages, self._convert_dicts)
        )
        """Messages that start every prompt."""
        self.default_options: ChatOptions = default_options or ChatOptions()
        """Model parameters of every call."""
        self.default_context: dict[str, Any] = dict(default_context or {})
        """Advisor-context entries of every call."""

    def _prepare(
        self,
        user: str | None,
        messages: MessagesLike | None,
        context: Mapping[str, Any] | None,
        advisors: Iterable[Advisor],
        options: ChatOptions | None,
        tools: Iterable[Tool],
        *,
        streaming: bool,
    ) -> tuple[CallContext, ChatRequest]:
        prompt = [*self.default_messages, *_to_messages(messages or (), self._convert_dicts)]
        if user is not None:
            require_text(user, "user")
            prompt.append(UserMessage(text=user))
        if len(prompt) == len(self.default_messages):
            raise UsageError("A chat call needs a user message: pass user=... or messages=[...]")
        ctx = CallContext(
            context={**self.default_context, **(context or {})},
            advisors=sort_advisors([*self.advisors, *advisors]),
            streaming=streaming,
        )
        request = ChatRequest(
            messages=tuple(prompt),
            options=self.default_options.merged_with(options),
            tools=tuple(tools),
        )
        return ctx, request

    async def call(
        self,
        user: str | None = None,
        *,
        messages: MessagesLike | None = None,
        context: Mapping[str, Any] | None = None,
        advisors: Iterable[Advisor] = (),
        options: ChatOptions | None = None,
        tools: Iterable[Tool] = (),
    ) -> ChatResponse:
        """One chat call through the advisors.

        Args:
            user: the user's message, appended to ``messages``.
            messages: further prompt messages (ours, or OpenAI message dicts).
            context: the advisor context, e.g. ``{SESSION_ID_CONTEXT_KEY: session_id}``.
            advisors: advisors for this call only, added to the client's.
            options: model parameters for this call.
            tools: tools offered on this call (run by a ``ToolCallingAdvisor``).

        Raises:
            ChatError: the model call failed (``ChatTimeout`` when it timed out); ``status_code``
                is set for HTTP errors.
            MissingSessionId: a session advisor found no session id in the context.
            AccessDenied: the context's user does not own the session.
            ToolLoopLimitExceeded: the model kept asking for tools.
        """
        ctx, request = self._prepare(
            user, messages, context, advisors, options, tools, streaming=False
        )
        response = await run_call(ctx, request, self._complete)
        return dataclasses.replace(response, context=dict(ctx.context))

    def stream(
        self,
        user: str | None = None,
        *,
        messages: MessagesLike | None = None,
        context: Mapping[str, Any] | None = None,
        advisors: Iterable[Advisor] = (),
        options: ChatOptions | None = None,
        tools: Iterable[Tool] = (),
    ) -> ChatStream:
        """A streamed chat call through the advisors: ``async with client.stream(...) as s``.

        Takes the arguments of `call`. Nothing is sent until the first chunk is asked
        for; errors surface while iterating. See
        [`ChatStream`][asyncsession.openai._chat_client.ChatStream] for the semantics.
        """
        ctx, request = self._prepare(
            user, messages, context, advisors, options, tools, streaming=True
        )
        return ChatStream(ctx, start_stream(ctx, request, self._open_stream))

    @staticmethod
    def _convert_dicts(messages: list[dict[str, Any]]) -> list[Message]:
        """Messages given as dicts: OpenAI Chat Completions message dicts by default."""
        return messages_from_openai(messages)

    @abstractmethod
    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        """The innermost step of the call path: one model request."""

    @abstractmethod
    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        """The innermost step of the stream path: one streamed model request."""


class ChatClient(BaseChatClient):
    """Chat Completions over a borrowed ``openai.AsyncOpenAI``, through ordered advisors.

    ``call`` and ``stream`` are documented on
    [`BaseChatClient`][asyncsession.openai.BaseChatClient], shared with ``ResponsesClient``.

    The client owns nothing: it never closes the ``AsyncOpenAI`` it was given, and a call
    holds no resources once it returned (or its stream's ``async with`` block was left).

    Args:
        openai_client: the SDK client; configure retries and timeouts on it.
        model: the default model.
        advisors: advisors of every call, e.g. the session and tool advisors.
        default_messages: messages that start every prompt (say, a system prompt).
        default_options: model parameters of every call; a call's options override them.
        default_context: advisor-context entries of every call; a call's override them.
    """

    async def _complete(self, ctx: CallContext, request: ChatRequest) -> ChatResponse:
        return await complete(self.openai_client, request, self.model)

    def _open_stream(self, ctx: CallContext, request: ChatRequest) -> ChunkStream:
        return ModelStream(self.openai_client, request, self.model)
