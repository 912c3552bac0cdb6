"""Chat messages, and their lossless round trip to OpenAI Chat Completions message dicts.

A message is a frozen pydantic value discriminated on ``kind``. What we do not interpret is kept,
never dropped: multi-part content (images, audio, files, refusals) stays in ``parts``, and keys
of the OpenAI dict that have no field of ours stay in ``extra``. So
``messages_from_openai([d])[0].to_openai() == [d]`` for every message dict the API accepts, and a
tool message list converts back to the same list.

Messages are API-neutral: the same values also round-trip to OpenAI Responses API items
(``ResponsesClient`` converts them). What only that API knows
is kept beside the fields: ``item_extra`` holds the keys of a Responses item that have no field
here (its ``id``, ``status``, ``type``), and an assistant message keeps the output ``items`` it was
made from, reasoning items (with ``encrypted_content``) included, in their order. Chat
Completions never sees either; both are left out of the stored JSON when empty.

``ToolResponseMessage`` groups the results of one round of (possibly parallel) tool calls, as one
session event; OpenAI sends each result as its own ``role: tool`` dict, so
[`ToolResponseMessage.to_openai`][asyncsession.messages.ToolResponseMessage.to_openai] returns one
dict per response. For the same reason every ``to_openai()`` returns a list.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Annotated, Any, ClassVar, Literal, TypeAlias, TypeVar, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, JsonValue, field_validator

from .exceptions import UsageError

__all__ = [
    "MessageType",
    "ToolCall",
    "ToolResponse",
    "UserMessage",
    "AssistantMessage",
    "ToolResponseMessage",
    "SystemMessage",
    "Message",
    "messages_from_openai",
    "messages_to_openai",
]

OpenAIMessage: TypeAlias = dict[str, Any]

_T = TypeVar("_T")
_Seq = Annotated[Sequence[_T], AfterValidator(tuple)]
"""Any sequence on the way in, a tuple once stored: messages are immutable."""
_Parts: TypeAlias = "_Seq[dict[str, JsonValue]] | None"


def _empty(value: object) -> bool:
    return not value


class MessageType(StrEnum):
    """The role of a message in the conversation."""

    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class _Frozen(BaseModel):
    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")


class ToolCall(_Frozen):
    """One tool invocation requested by the model."""

    id: str
    """The provider's id for the call; the tool's response quotes it."""
    name: str
    """The tool's name."""
    arguments: str = "{}"
    """The arguments as the model wrote them: a JSON string, not parsed."""
    type: str = "function"
    """OpenAI's call type: ``function``, or ``custom`` for free-form tools."""


class ToolResponse(_Frozen):
    """The result of one tool call."""

    id: str
    """The id of the tool call this answers."""
    name: str = ""
    """The tool's name (OpenAI's wire format does not carry it; we fill it from the call)."""
    data: str
    """The result text sent back to the model."""
    parts: _Parts = None
    """The original content parts, when the result was sent as a list of parts."""
    item_extra: dict[str, JsonValue] = Field(default_factory=dict, exclude_if=_empty)
    """Keys of the Responses ``function_call_output`` item with no field here (``type``,
    ``id``, ``status``, ...), kept for a lossless round trip."""


class _MessageBase(_Frozen):
    extra: dict[str, JsonValue] = Field(default_factory=dict)
    """Keys of the OpenAI message dict that have no field here, kept for a lossless round trip."""
    item_extra: dict[str, JsonValue] = Field(default_factory=dict, exclude_if=_empty)
    """Keys of the Responses API input item that have no field here (``type``, ``id``,
    ``status``, ...), kept for a lossless round trip; Chat Completions never sees them."""


_TEXT_PART_TYPES = frozenset({"text", "input_text", "output_text"})


def _text_of_parts(parts: Sequence[dict[str, JsonValue]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") in _TEXT_PART_TYPES)


def _part_to_chat(part: dict[str, JsonValue]) -> dict[str, JsonValue]:
    """A content part as Chat Completions takes it: Responses API parts translated, ours as is."""
    kind = part.get("type")
    if kind in ("input_text", "output_text"):
        return {"type": "text", "text": part.get("text", "")}
    if kind == "input_image" and isinstance(part.get("image_url"), str):
        image: dict[str, JsonValue] = {"url": part["image_url"]}
        if part.get("detail") is not None:
            image["detail"] = part["detail"]
        return {"type": "image_url", "image_url": image}
    if kind == "input_file":
        keys = ("file_id", "file_data", "filename")
        return {"type": "file", "file": {k: part[k] for k in keys if part.get(k) is not None}}
    return part


def _parts_to_chat(parts: Sequence[dict[str, JsonValue]]) -> list[dict[str, JsonValue]]:
    return [_part_to_chat(part) for part in parts]


class UserMessage(_MessageBase):
    """Input from the user. A user message starts a turn."""

    kind: Literal["user"] = "user"
    text: str = ""
    """The text; for multi-part content, the text parts joined by newlines."""
    parts: _Parts = None
    """The original content parts (text, images, audio, files), when content was a list."""

    @property
    def message_type(self) -> MessageType:
        """Always ``MessageType.USER``."""
        return MessageType.USER

    def to_openai(self) -> list[OpenAIMessage]:
        """This message as OpenAI Chat Completions message dicts."""
        content: Any = _parts_to_chat(self.parts) if self.parts is not None else self.text
        return [{"role": "user", "content": content, **self.extra}]


class SystemMessage(_MessageBase):
    """Instructions for the model. Storing one in a session is opt-in."""

    kind: Literal["system"] = "system"
    text: str
    """The instructions."""
    parts: _Parts = None
    """The original content parts, when content was a list."""
    role: Literal["system", "developer"] = "system"
    """OpenAI's role name: newer models call system instructions ``developer``."""

    @property
    def message_type(self) -> MessageType:
        """Always ``MessageType.SYSTEM``."""
        return MessageType.SYSTEM

    def to_openai(self) -> list[OpenAIMessage]:
        """This message as OpenAI Chat Completions message dicts."""
        content: Any = _parts_to_chat(self.parts) if self.parts is not None else self.text
        return [{"role": self.role, "content": content, **self.extra}]


class AssistantMessage(_MessageBase):
    """A reply of the model: text, tool calls, or both."""

    kind: Literal["assistant"] = "assistant"
    text: str | None = None
    """The reply text; ``None`` when the model sent no content (typical with tool calls)."""
    tool_calls: _Seq[ToolCall] = ()
    """The tools the model asks to run, in its order."""
    parts: _Parts = None
    """The original content parts, when content was a list."""
    items: _Seq[dict[str, JsonValue]] = Field(default=(), exclude_if=_empty)
    """The Responses API output items this reply was made from, in the model's order and as
    given: reasoning items (with ``encrypted_content``), message items, function calls, and
    item types we do not interpret. ``text`` and ``tool_calls`` are the API-neutral view of the
    same reply; the items are replayed as they are while they agree with it. Empty for replies
    of Chat Completions."""

    @property
    def message_type(self) -> MessageType:
        """Always ``MessageType.ASSISTANT``."""
        return MessageType.ASSISTANT

    @property
    def reasoning(self) -> tuple[dict[str, JsonValue], ...]:
        """The reasoning items among [`items`][asyncsession.messages.AssistantMessage.items], in
        order."""
        return tuple(item for item in self.items if item.get("type") == "reasoning")

    @property
    def has_tool_calls(self) -> bool:
        """Whether the model asks for at least one tool call."""
        return bool(self.tool_calls)

    def to_openai(self) -> list[OpenAIMessage]:
        """This message as OpenAI Chat Completions message dicts."""
        content: Any = list(self.parts) if self.parts is not None else self.text
        message: OpenAIMessage = {"role": "assistant", "content": content}
        if self.tool_calls:
            message["tool_calls"] = [_tool_call_to_openai(call) for call in self.tool_calls]
        message.update(self.extra)
        return [message]


class ToolResponseMessage(_MessageBase):
    """The results of one round of tool calls, in the order of the calls."""

    kind: Literal["tool"] = "tool"
    responses: _Seq[ToolResponse]
    """One result per answered call."""

    @field_validator("responses")
    @classmethod
    def _not_empty(cls, value: Sequence[ToolResponse]) -> Sequence[ToolResponse]:
        if not value:
            raise ValueError("a ToolResponseMessage needs at least one response")
        return value

    @property
    def message_type(self) -> MessageType:
        """Always ``MessageType.TOOL``."""
        return MessageType.TOOL

    @property
    def text(self) -> None:
        """Tool results have no conversation text; text searches skip them."""
        return None

    def to_openai(self) -> list[OpenAIMessage]:
        """One OpenAI ``role: tool`` dict per response."""
        result: list[OpenAIMessage] = []
        for response in self.responses:
            content: Any = (
                _parts_to_chat(response.parts) if response.parts is not None else response.data
            )
            result.append(
                {"role": "tool", "tool_call_id": response.id, "content": content, **self.extra}
            )
        return result


Message = Annotated[
    UserMessage | AssistantMessage | ToolResponseMessage | SystemMessage,
    Field(discriminator="kind"),
]
"""Any chat message."""


def _tool_call_to_openai(call: ToolCall) -> OpenAIMessage:
    if call.type == "custom":
        return {
            "id": call.id,
            "type": "custom",
            "custom": {"name": call.name, "input": call.arguments},
        }
    return {
        "id": call.id,
        "type": call.type,
        "function": {"name": call.name, "arguments": call.arguments},
    }


def _tool_call_from_openai(raw: Any) -> ToolCall:
    if not isinstance(raw, dict):
        raise UsageError(f"a tool call must be a dict, not {type(raw).__name__}")
    call = cast(dict[str, Any], raw)
    call_type = str(call.get("type", "function"))
    body: dict[str, Any] = call.get("custom" if call_type == "custom" else "function") or {}
    arguments = body.get("input" if call_type == "custom" else "arguments", "")
    return ToolCall(
        id=str(call.get("id", "")),
        name=str(body.get("name", "")),
        arguments=str(arguments),
        type=call_type,
    )


def _content(raw: Any) -> tuple[str, tuple[dict[str, JsonValue], ...] | None]:
    untyped: Any = raw  # isinstance narrows ``raw`` to a list of unknowns
    if raw is None:
        return "", None
    if isinstance(raw, str):
        return raw, None
    if isinstance(raw, list):
        items: list[Any] = untyped
        parts = tuple(
            dict(cast(dict[str, JsonValue], part)) for part in items if isinstance(part, dict)
        )
        if len(parts) != len(items):
            raise UsageError("every content part must be a dict")
        return _text_of_parts(parts), parts
    raise UsageError(f"message content must be a string or a list of parts, not {raw!r}")


def _require_openai(value: object, name: str) -> None:
    """Refuse what is not an OpenAI message dict (``_checks`` sits above this module)."""
    if not isinstance(value, Mapping):
        hint = " (it is one of our messages already)" if isinstance(value, BaseModel) else ""
        shown = f"{type(value).__name__} {value!r}"[:80]
        raise UsageError(f"{name} must be an OpenAI message dict, not {shown}{hint}")


def _require_messages(messages: Sequence[object], name: str) -> None:
    """Refuse an item of ``messages`` that is not one of our messages, naming its index."""
    for index, item in enumerate(messages):
        if not isinstance(item, _MessageBase):
            shown = f"{type(item).__name__} {item!r}"[:80]
            hint = ""
            if isinstance(item, str):
                hint = " (wrap text in a message: UserMessage(text=...))"
            elif isinstance(item, Mapping):
                hint = " (an OpenAI message dict: convert it with messages_from_openai)"
            raise UsageError(
                f"{name}[{index}] must be a message such as UserMessage, not {shown}{hint}"
            )


def _require_list(value: object, name: str, expected: str) -> None:
    probe = value  # narrowed by the checks; ``value`` stays an object
    if isinstance(probe, (str, bytes, Mapping, BaseModel)) or not isinstance(probe, Iterable):
        shown = f"{type(value).__name__} {value!r}"[:80]
        single = isinstance(value, (Mapping, BaseModel))
        hint = " (put a single one in a list)" if single else ""
        raise UsageError(f"{name} must be {expected}, not {shown}{hint}")


def _message_from_openai(message: OpenAIMessage) -> Message:
    """Convert one OpenAI Chat Completions message dict into a message.

    A ``role: tool`` dict becomes a ``ToolResponseMessage`` with one response whose name is
    empty: the wire format does not carry it.
        [`messages_from_openai`][asyncsession.messages.messages_from_openai] fills names in from
    the calls and groups consecutive tool dicts into one message.

    Raises:
        UsageError: it is not a dict, or not a chat message we know.
    """
    _require_openai(message, "message")
    role = message.get("role")
    if role == "user":
        text, parts = _content(message.get("content"))
        extra = {k: v for k, v in message.items() if k not in ("role", "content")}
        return UserMessage(text=text, parts=parts, extra=extra)
    if role in ("system", "developer"):
        text, parts = _content(message.get("content"))
        extra = {k: v for k, v in message.items() if k not in ("role", "content")}
        return SystemMessage(text=text, parts=parts, role=role, extra=extra)
    if role == "assistant":
        raw_content = message.get("content")
        if isinstance(raw_content, list):
            text, parts = _content(raw_content)
            assistant_text: str | None = text
        else:
            assistant_text, parts = (None if raw_content is None else str(raw_content)), None
        calls = tuple(_tool_call_from_openai(c) for c in message.get("tool_calls") or ())
        extra = {k: v for k, v in message.items() if k not in ("role", "content", "tool_calls")}
        if "tool_calls" in message and not message["tool_calls"]:
            extra["tool_calls"] = message["tool_calls"]  # an explicit empty list round-trips
        return AssistantMessage(text=assistant_text, tool_calls=calls, parts=parts, extra=extra)
    if role == "tool":
        data, parts = _content(message.get("content"))
        extra = {k: v for k, v in message.items() if k not in ("role", "content", "tool_call_id")}
        response = ToolResponse(id=str(message.get("tool_call_id", "")), data=data, parts=parts)
        return ToolResponseMessage(responses=(response,), extra=extra)
    raise UsageError(f"unknown message role {role!r}")


def messages_from_openai(messages: Sequence[OpenAIMessage]) -> list[Message]:
    """Convert a list of OpenAI message dicts, grouping each run of tool results into one message.

    Tool responses get the name of the call they answer.

    Raises:
        UsageError: ``messages`` is not a list of chat message dicts we know.
    """
    _require_list(messages, "messages", "a list of OpenAI message dicts")
    result: list[Message] = []
    names: dict[str, str] = {}
    for index, raw in enumerate(messages):
        _require_openai(raw, f"messages[{index}]")
        message = _message_from_openai(raw)
        if isinstance(message, AssistantMessage):
            names.update({call.id: call.name for call in message.tool_calls})
        if isinstance(message, ToolResponseMessage):
            response = message.responses[0]
            response = response.model_copy(update={"name": names.get(response.id, response.name)})
            previous = result[-1] if result else None
            if isinstance(previous, ToolResponseMessage) and previous.extra == message.extra:
                result[-1] = previous.model_copy(
                    update={"responses": (*previous.responses, response)}
                )
                continue
            message = message.model_copy(update={"responses": (response,)})
        result.append(message)
    return result


def messages_to_openai(messages: Sequence[Message]) -> list[OpenAIMessage]:
    """Convert messages into the list of OpenAI message dicts a Chat Completions call takes.

    Raises:
        UsageError: ``messages`` is not a list of messages; the error names the index of the
            first item that is not one.
    """
    _require_list(messages, "messages", "a list of messages")
    _require_messages(messages, "messages")
    return [raw for message in messages for raw in message.to_openai()]
