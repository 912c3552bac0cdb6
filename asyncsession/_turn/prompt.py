"""Pure functions a turn builds its prompts with: guards, comparisons, system order."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from ..events import EventType, SessionEvent
from ..filters import EventFilter
from ..messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)

__all__ = [
    "LATEST_SYSTEM_FILTER",
    "can_tell_newest",
    "contains_run",
    "guard_history",
    "history_system_messages",
    "last_request_message",
    "needs_system_lookup",
    "newest_answers",
    "same_content",
    "system_first",
]

LATEST_SYSTEM_FILTER = EventFilter(
    message_types=[MessageType.SYSTEM],
    exclude_synthetic=True,
    exclude_archived=True,
    active_view=True,
    last_n=1,
)
"""The separate lookup of the latest stored system message, for windowed reads."""


def _content_key(message: Message) -> tuple[object, ...]:
    if isinstance(message, UserMessage):
        return ("user", message.text)
    if isinstance(message, SystemMessage):
        return ("system", message.text)
    if isinstance(message, AssistantMessage):
        calls = tuple((c.id, c.name, c.arguments) for c in message.tool_calls)
        return ("assistant", message.text or "", calls)
    return ("tool", tuple((r.id, r.data) for r in message.responses))


def same_content(a: Message, b: Message) -> bool:
    """Equal by content: type, text, tool calls, tool responses (media when both have it).

    Content, not equality: a store that keeps no message metadata still compares equal.
    """
    if _content_key(a) != _content_key(b):
        return False
    a_parts = None if isinstance(a, ToolResponseMessage) else a.parts
    b_parts = None if isinstance(b, ToolResponseMessage) else b.parts
    return a_parts is None or b_parts is None or a_parts == b_parts


def contains_run(haystack: Sequence[Message], needle: Sequence[Message]) -> bool:
    """Whether ``needle`` appears as a contiguous run in ``haystack`` (an empty one always)."""
    if not needle:
        return True
    width = len(needle)
    for start in range(len(haystack) - width + 1):
        if all(same_content(haystack[start + i], needle[i]) for i in range(width)):
            return True
    return False


def guard_history(
    history: Sequence[Message], prompt: Sequence[Message]
) -> tuple[list[Message], int]:
    """The read guard: ``history`` without orphaned tool calls and results, and how many went.

    An assistant tool call stays only if every call id is answered by the tool messages that
    directly follow it (in the history, then at the start of ``prompt``, as in round 2 of a
    tool loop); a partially answered parallel call goes with its answers. A tool message
    stays only if the nearest message before it that is not a tool message is a kept tool call
    whose ids cover its responses. ``prompt`` itself is never changed.
    """
    combined = [*history, *prompt]
    keep = [True] * len(history)
    for index, message in enumerate(history):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answered: set[str] = set()
            following = index + 1
            while following < len(combined) and isinstance(
                combined[following], ToolResponseMessage
            ):
                answered |= _response_ids(combined[following])
                following += 1
            keep[index] = {call.id for call in message.tool_calls} <= answered
        elif isinstance(message, ToolResponseMessage):
            before = index - 1
            while before >= 0 and isinstance(history[before], ToolResponseMessage):
                before -= 1
            owner = history[before] if before >= 0 else None
            keep[index] = (
                isinstance(owner, AssistantMessage)
                and keep[before]
                and _response_ids(message) <= {call.id for call in owner.tool_calls}
            )
    kept = [message for message, ok in zip(history, keep, strict=True) if ok]
    return kept, len(history) - len(kept)


def _response_ids(message: Message) -> set[str]:
    if isinstance(message, ToolResponseMessage):
        return {response.id for response in message.responses}
    return set()


def system_first(messages: Iterable[Message]) -> list[Message]:
    """System messages first in their order, an exact-text repeat dropped; texts untouched."""
    systems: list[Message] = []
    rest: list[Message] = []
    seen: set[str] = set()
    for message in messages:
        if isinstance(message, SystemMessage):
            if message.text not in seen:
                seen.add(message.text)
                systems.append(message)
        else:
            rest.append(message)
    return [*systems, *rest]


def history_system_messages(
    events: Sequence[SessionEvent], looked_up: SessionEvent | None
) -> list[Message]:
    """Stored system messages for the prompt: the latest real one, plus synthetic ones."""
    latest = _latest_system(events)
    result: list[Message] = []
    if latest is None and looked_up is not None and looked_up.message is not None:
        result.append(looked_up.message)
    for event in events:
        if (
            event.type == EventType.SYSTEM
            and event.message is not None
            and (event.is_synthetic or event is latest)
        ):
            result.append(event.message)
    return result


def _latest_system(events: Sequence[SessionEvent]) -> SessionEvent | None:
    for event in reversed(events):
        if event.type == EventType.SYSTEM and not event.is_synthetic:
            return event
    return None


def needs_system_lookup(events: Sequence[SessionEvent], read_filter: EventFilter) -> bool:
    """Whether a windowed read may have left the latest stored system message out."""
    return read_filter.has_window and _latest_system(events) is None


def last_request_message(
    prompt: Sequence[Message],
) -> UserMessage | ToolResponseMessage | None:
    """The prompt's last user message or trailing tool results (a run merged into one)."""
    for index in range(len(prompt) - 1, -1, -1):
        message = prompt[index]
        if isinstance(message, UserMessage):
            return message
        if isinstance(message, ToolResponseMessage):
            run = [message]
            before = index - 1
            while before >= 0 and isinstance(prompt[before], ToolResponseMessage):
                run.insert(0, prompt[before])  # type: ignore[arg-type]  # checked just above
                before -= 1
            if len(run) == 1:
                return message
            return ToolResponseMessage(
                responses=tuple(r for m in run for r in m.responses), extra=message.extra
            )
    return None


def can_tell_newest(read_filter: EventFilter) -> bool:
    """Whether the events of this read show the newest stored tool call, if there is one."""
    assistant_visible = (
        read_filter.message_types is None or MessageType.ASSISTANT in read_filter.message_types
    ) and (read_filter.event_types is None or EventType.ASSISTANT in read_filter.event_types)
    return (
        assistant_visible
        and read_filter.page_size is None
        and read_filter.from_ is None
        and read_filter.to is None
        and not read_filter.has_text_criteria
    )


def newest_answers(events: Iterable[SessionEvent], result: ToolResponseMessage) -> bool | None:
    """Whether the newest stored conversation event is the tool call ``result`` answers.

    ``events`` run newest first. System events and tool results (earlier answers of the same
    parallel call) are skipped; ``None`` when no other event is found.
    """
    ids = {response.id for response in result.responses}
    for event in events:
        message = event.message
        if message is None or isinstance(message, SystemMessage | ToolResponseMessage):
            continue
        return isinstance(message, AssistantMessage) and ids <= {c.id for c in message.tool_calls}
    return None
