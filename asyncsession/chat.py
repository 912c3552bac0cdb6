"""The values a chat call passes through the advisor chain: request, response, stream chunks.

They know nothing about the OpenAI SDK: ``asyncsession.openai`` converts at its edge, so an
advisor (and its tests) never touches SDK types.

- [`ChatOptions`][asyncsession.chat.ChatOptions]: the model parameters of a call (model,
  temperature, tool choice, ...).
- [`ChatRequest`][asyncsession.chat.ChatRequest]: the prompt, the options and the tools offered to
  the model.
- [`ChatResponse`][asyncsession.chat.ChatResponse]: the model's reply (one assistant message) with
  its finish reason and usage, plus the advisor context once the call is over; when return-direct
  tools answered the reply, their results.
- [`ChatChunk`][asyncsession.chat.ChatChunk]: one streamed delta: text, tool-call fragments, finish
  reason or usage.
- [`StreamAggregator`][asyncsession.chat.StreamAggregator]: folds chunks into the
  [`ChatResponse`][asyncsession.chat.ChatResponse] they add up to.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from .messages import AssistantMessage, Message, ToolCall, ToolResponse, ToolResponseMessage

if TYPE_CHECKING:
    from .tools import Tool

__all__ = [
    "ChatChunk",
    "ChatOptions",
    "ChatRequest",
    "ChatResponse",
    "StreamAggregator",
    "ToolCallDelta",
    "Usage",
]


RETURN_DIRECT: Final = "return_direct"
"""The finish reason of a response (and of its last chunk) answered by return-direct tools."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatOptions:
    """Model parameters of a chat call; ``None`` leaves a parameter to the layer below.

    Options merge field by field ([`merged_with`][asyncsession.chat.ChatOptions.merged_with]): the
    client's defaults, then the call's. Anything the Chat Completions API takes that has no field
    here goes into ``extra_body``.
    """

    model: str | None = None
    """The model; the client's ``model`` when ``None``."""
    temperature: float | None = None
    """Sampling temperature."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    max_completion_tokens: int | None = None
    """Upper bound on generated tokens, reasoning tokens included."""
    stop: tuple[str, ...] | None = None
    """Sequences where the model stops."""
    seed: int | None = None
    """Best-effort deterministic sampling."""
    tool_choice: str | Mapping[str, Any] | None = None
    """``"auto"``, ``"none"``, ``"required"``, or a mapping naming one tool."""
    parallel_tool_calls: bool | None = None
    """Whether the model may call several tools at once."""
    reasoning_effort: str | None = None
    """For reasoning models: ``"low"``, ``"medium"``, ``"high"``, ..."""
    response_format: Mapping[str, Any] | None = None
    """A ``response_format`` mapping, e.g. ``{"type": "json_object"}``."""
    timeout: float | None = None
    """Seconds before the request times out (raises ``ChatTimeout``); the client's when None."""
    extra_body: Mapping[str, Any] | None = None
    """Further JSON body parameters, sent as they are."""

    def merged_with(self, other: ChatOptions | None) -> ChatOptions:
        """These options with every field that ``other`` sets laid over them."""
        if other is None:
            return self
        changes = {
            f.name: getattr(other, f.name)
            for f in dataclasses.fields(other)
            if getattr(other, f.name) is not None
        }
        if self.extra_body and other.extra_body:
            changes["extra_body"] = {**self.extra_body, **other.extra_body}
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """Token usage the model reported."""

    prompt_tokens: int = 0
    """Tokens in the prompt."""
    completion_tokens: int = 0
    """Tokens generated."""
    total_tokens: int = 0
    """Both together."""

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
            total_tokens=self.total_tokens + other.total_tokens,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """What goes to the model: the prompt, the options and the tools it may call."""

    messages: tuple[Message, ...]
    """The prompt, oldest first."""
    options: ChatOptions = field(default_factory=ChatOptions)
    """Model parameters."""
    tools: tuple[Tool, ...] = ()
    """Tools offered to the model on this request, beside the client's own."""

    def with_messages(self, messages: tuple[Message, ...] | list[Message]) -> ChatRequest:
        """This request with another prompt."""
        return dataclasses.replace(self, messages=tuple(messages))


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatResponse:
    """The model's reply to a request."""

    message: AssistantMessage
    """The assistant message: text, tool calls, or both."""
    finish_reason: str | None = None
    """Why the model stopped: ``"stop"``, ``"tool_calls"``, ``"length"``, ..."""
    usage: Usage | None = None
    """Token usage; summed over every round of a tool loop."""
    model: str | None = None
    """The model that answered, as the API reports it."""
    id: str | None = None
    """The completion id the API assigned."""
    context: Mapping[str, Any] = field(default_factory=dict[str, Any])
    """The advisor context when the call ended (the client fills it in): the keys you passed
    plus what advisors added."""
    request_event_ids: tuple[str, ...] = ()
    """The ids of the events the turn stored for the request side: the user's message, then
    each round's tool results (the client fills it in)."""
    response_event_ids: tuple[str, ...] = ()
    """The ids of the events the turn stored for the model's side: each round's tool calls,
    then the reply (the client fills it in)."""
    tool_results: ToolResponseMessage | None = None
    """The results of return-direct tools, when the tool loop ended on them without another
    model call; ``None`` otherwise. ``message`` is then the model's message that asked for
    them, ``finish_reason`` is ``"return_direct"`` and ``text`` is the results' text."""

    @property
    def text(self) -> str:
        """The reply text; empty when the model sent none. After return-direct tools: their
        results' data in call order, one per line."""
        if self.tool_results is not None:
            return "\n".join(response.data for response in self.tool_results.responses)
        return self.message.text or ""

    @property
    def tool_calls(self) -> Sequence[ToolCall]:
        """The tool calls the model asks for (already answered when ``tool_results`` is set)."""
        return self.message.tool_calls

    @property
    def has_tool_calls(self) -> bool:
        """Whether the reply asks for tool calls still to run, i.e. the turn is not complete
        yet; ``False`` once return-direct tools answered them (``tool_results``)."""
        return bool(self.message.tool_calls) and self.tool_results is None

    def result_chunks(self) -> list[ChatChunk]:
        """The chunks a stream ends with when return-direct tools answered: one per result in
        call order, whose texts add up to ``text``; the last has the finish reason
        ``"return_direct"``. Empty without ``tool_results``."""
        results = () if self.tool_results is None else self.tool_results.responses
        return [
            ChatChunk(
                text=result.data if index == 0 else "\n" + result.data,
                tool_result=result,
                finish_reason=RETURN_DIRECT if index == len(results) - 1 else None,
                id=self.id,
                model=self.model,
            )
            for index, result in enumerate(results)
        ]


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A fragment of one streamed tool call; fragments with the same ``index`` add up."""

    index: int
    """Which call of the reply this fragment belongs to."""
    id: str | None = None
    """The call id (first fragment only)."""
    name: str | None = None
    """The tool name (first fragment only)."""
    arguments: str = ""
    """The next piece of the JSON arguments."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatChunk:
    """One streamed delta of the model's reply, forwarded as soon as it arrives."""

    text: str = ""
    """The next piece of the reply text (often empty on role, tool-call or usage chunks)."""
    tool_calls: tuple[ToolCallDelta, ...] = ()
    """Fragments of tool calls."""
    finish_reason: str | None = None
    """Set on the chunk that ends a model round: ``"stop"``, ``"tool_calls"``, ..."""
    usage: Usage | None = None
    """Set on the usage chunk that follows the finish reason."""
    id: str | None = None
    """The completion id; it changes from one round of a tool loop to the next."""
    model: str | None = None
    """The model that answers."""
    reasoning: str = ""
    """The next piece of the reasoning summary (Responses API reasoning models)."""
    tool_result: ToolResponse | None = None
    """Set on the chunks that end a tool loop on return-direct tools, one per result in call
    order, after the chunks of the model's round that asked for them; ``text`` is then the
    result's data (after a line break from the second result on), and the last of them has
    the finish reason ``"return_direct"``."""
    raw: object = None
    """The provider's event this chunk was made from, for what the chunk does not type (on the
    Responses API the SDK's ``ResponseStreamEvent``); ``None`` when there is none. Opaque to
    advisors: they must not depend on it."""


@dataclass(slots=True)
class _CallParts:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list[str])


class StreamAggregator:
    """Folds the chunks of one model round into the [`ChatResponse`][asyncsession.chat.ChatResponse]
    they add up to.

    Text pieces are joined once at the end and tool-call fragments are folded by their index, so
    adding a chunk costs O(1) however long the reply grows. (The SDK's
    ``ChatCompletionStreamState`` re-serialises the whole snapshot on every chunk, which grows
    quadratically with the reply.)
    """

    __slots__ = ("_calls", "_finish_reason", "_id", "_model", "_text", "_usage")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._calls: dict[int, _CallParts] = {}
        self._finish_reason: str | None = None
        self._usage: Usage | None = None
        self._id: str | None = None
        self._model: str | None = None

    def add(self, chunk: ChatChunk) -> None:
        """Fold one chunk in."""
        if chunk.text:
            self._text.append(chunk.text)
        for delta in chunk.tool_calls:
            parts = self._calls.get(delta.index)
            if parts is None:
                parts = self._calls[delta.index] = _CallParts()
            if delta.id:
                parts.id = delta.id
            if delta.name:
                parts.name += delta.name
            if delta.arguments:
                parts.arguments.append(delta.arguments)
        if chunk.finish_reason is not None:
            self._finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            self._usage = chunk.usage
        if chunk.id is not None and self._id is None:
            self._id = chunk.id
        if chunk.model is not None and self._model is None:
            self._model = chunk.model

    @property
    def is_finished(self) -> bool:
        """Whether a chunk with a finish reason has been folded in."""
        return self._finish_reason is not None

    def response(self) -> ChatResponse:
        """The response the chunks so far add up to."""
        calls = tuple(
            ToolCall(id=parts.id, name=parts.name, arguments="".join(parts.arguments) or "{}")
            for _, parts in sorted(self._calls.items())
        )
        text = "".join(self._text)
        message = AssistantMessage(text=text if text or not calls else None, tool_calls=calls)
        return ChatResponse(
            message=message,
            finish_reason=self._finish_reason,
            usage=self._usage,
            model=self._model,
            id=self._id,
        )
