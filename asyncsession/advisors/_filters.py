"""``MessageFilter``: which messages the memory advisor stores (the write side).

An ``EventFilter`` decides which stored events are read into the next prompt; a
``MessageFilter`` decides which messages are stored at all. A rejected message is never
written and so never replayed; the prompt that goes to the model is unaffected.

Filters compose with ``&`` / ``|`` / ``~`` (or ``and_``, ``or_``, ``negate``). Setting a
filter of your own replaces the default
`MessageFilter.skip_empty_messages`; compose with it to keep that
protection.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

from ..exceptions import UsageError
from ..messages import AssistantMessage, Message, MessageType

__all__ = ["MessageFilter"]


def _has_media(message: AssistantMessage) -> bool:
    parts = message.parts or ()
    return any(part.get("type") != "text" for part in parts) or "audio" in message.extra


_FRAME_ITEMS = frozenset({"message", "reasoning"})
"""Responses output items that carry nothing of their own once the text is blank: a message
item (its text is the message's), and reasoning, which cannot be replayed without the item it
preceded."""


def _has_output_items(message: AssistantMessage) -> bool:
    """Whether the reply's Responses items include one that is content of its own: a hosted
    tool's call or result (an image generation, a web search), or an item type we do not
    know."""
    return any(item.get("type") not in _FRAME_ITEMS for item in message.items)


def _checked(other: MessageFilter, operation: str) -> MessageFilter:
    """``other`` if it is a ``MessageFilter``: a ``None`` would only fail inside a chat call."""
    given = cast(object, other)  # callers outside the type checker may pass anything
    if not isinstance(given, MessageFilter):
        raise UsageError(f"MessageFilter.{operation} needs a MessageFilter, not {given!r}")
    return other


class MessageFilter:
    """A predicate over messages: ``True`` means "store it".

    Args:
        predicate: the decision; any ``Callable[[Message], bool]``.

    Raises:
        UsageError: ``predicate`` is not callable (for example ``None``).
    """

    __slots__ = ("_predicate",)

    def __init__(self, predicate: Callable[[Message], bool]) -> None:
        if not callable(cast(object, predicate)):
            raise UsageError(f"a MessageFilter needs a callable predicate, not {predicate!r}")
        self._predicate = predicate

    def should_persist(self, message: Message) -> bool:
        """Whether ``message`` is stored."""
        return bool(self._predicate(message))

    __call__ = should_persist

    def and_(self, other: MessageFilter) -> MessageFilter:
        """Store only what both filters accept.

        Raises:
            UsageError: ``other`` is not a ``MessageFilter`` (for example ``None``).
        """
        other = _checked(other, "and_")
        return MessageFilter(lambda m: self.should_persist(m) and other.should_persist(m))

    def or_(self, other: MessageFilter) -> MessageFilter:
        """Store what either filter accepts.

        Raises:
            UsageError: ``other`` is not a ``MessageFilter`` (for example ``None``).
        """
        other = _checked(other, "or_")
        return MessageFilter(lambda m: self.should_persist(m) or other.should_persist(m))

    def negate(self) -> MessageFilter:
        """Store what this filter rejects."""
        return MessageFilter(lambda m: not self.should_persist(m))

    __and__ = and_
    __or__ = or_
    __invert__ = negate

    @classmethod
    def all(cls) -> MessageFilter:
        """Store every message."""
        return cls(lambda _: True)

    @classmethod
    def skip_empty_messages(cls) -> MessageFilter:
        """Skip assistant messages with blank text, no tool calls, no media and no Responses
        items beyond message and reasoning items (the default).

        Some models send an empty end-of-turn frame after tool use; replayed as history, it is
        rejected by the next request. A reply made only of hosted-tool items (an image
        generation, a web search) is content and is stored.
        """

        def accept(message: Message) -> bool:
            if not isinstance(message, AssistantMessage):
                return True
            blank = message.text is None or not message.text.strip()
            return (
                not blank
                or message.has_tool_calls
                or _has_media(message)
                or _has_output_items(message)
            )

        return cls(accept)

    @classmethod
    def by_message_type(cls, *types: MessageType | str) -> MessageFilter:
        """Store only messages of these types.

        Leaving out ``TOOL`` does not strand a stored tool call: the memory advisor's write
        guard stores the result of a stored call anyway.

        Raises:
            UsageError: no type given, or an unknown one (``None`` included).
        """
        if not types:
            raise UsageError("by_message_type needs at least one message type")
        try:
            allowed = frozenset(MessageType(t) for t in types)
        except ValueError:
            raise UsageError(f"by_message_type got an unknown message type in {types!r}") from None
        return cls(lambda m: m.message_type in allowed)

    @classmethod
    def contains_text(cls, keyword: str) -> MessageFilter:
        """Store only messages whose text contains ``keyword``, case-insensitively.

        Messages without text (tool results) are rejected.

        Raises:
            UsageError: the keyword is blank or not a string.
        """
        if not isinstance(cast(object, keyword), str) or not keyword.strip():
            raise UsageError(f"contains_text needs a non-blank keyword, not {keyword!r}")
        lowered = keyword.lower()

        def accept(message: Message) -> bool:
            text = message.text
            return text is not None and lowered in text.lower()

        return cls(accept)
