"""Large bodies: an event too large for the log is stored whole elsewhere, a preview in its place.

A tool that returns megabytes, or a pasted document, would make every window read carry it. So
when an event's content (its message or payload, and its metadata) takes more than the store's
``offload_threshold`` bytes as JSON (256 KiB by default), the store **offloads** it: the whole
event goes to a store for large files (GridFS on MongoDB, a dictionary in memory) and the log
keeps a **preview** under the same id. Window reads, snapshots and searches return the preview
and never fetch the whole body; `SessionRepository.read_body` returns the event exactly as it
was appended, and `SessionRepository.read_body_page` one page of its text, for a tool that lets
the model read more.

The preview is an event of the same id, session, type and timestamp whose message is of the
same kind, cut down: each text (a message's ``text``, each tool result's ``data``, each tool
call's ``arguments``) keeps its first ``preview_chars`` characters; content ``parts`` and
Responses ``items`` are left out; ``extra``, ``item_extra`` and the metadata are kept when they
are small (4 KiB as JSON), else the metadata keeps the library's own keys only. A custom event's
preview has an empty payload. Its metadata holds one more key, `OFFLOADED`, whose value
(`OffloadedBody`) says how large the whole content is and how long each text it cut was. Tool
call ids and response ids are kept, so a tool call and its result still pair up.

``COMPACTION`` events are never offloaded: their record defines the active view.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final, cast

from pydantic import JsonValue

from .events import COMPACTION_ID, COMPACTION_SOURCE, SYNTHETIC, EventType, SessionEvent
from .exceptions import UsageError
from .messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)

__all__ = [
    "DEFAULT_OFFLOAD_THRESHOLD",
    "DEFAULT_PAGE_CHARS",
    "DEFAULT_PREVIEW_CHARS",
    "OFFLOADED",
    "BodyPage",
    "OffloadedBody",
    "Offloading",
    "content_json",
    "page_of",
]

OFFLOADED: Final = "offloaded"
"""The metadata key of a preview: ``{"size": <bytes>, "chars": [<characters>, ...]}``, read
as an `OffloadedBody`."""
DEFAULT_OFFLOAD_THRESHOLD: Final = 256 * 1024
"""Events whose content takes more bytes than this as JSON are offloaded (256 KiB)."""
DEFAULT_PREVIEW_CHARS: Final = 2_000
"""How many characters of each text a preview keeps."""
DEFAULT_PAGE_CHARS: Final = 16_000
"""How many characters a page of an offloaded text holds unless asked otherwise."""
_SMALL: Final = 4 * 1024
"""Metadata, ``extra`` and ``item_extra`` stay in a preview when their JSON is at most this."""
_OWN_KEYS: Final = (SYNTHETIC, COMPACTION_SOURCE, COMPACTION_ID)


def content_json(event: SessionEvent) -> bytes:
    """An event's content as JSON: its message or payload, and its metadata."""
    return event.model_dump_json(include={"message", "payload", "metadata"}).encode()


def _json_size(value: object) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


def _small(value: Mapping[str, JsonValue]) -> dict[str, JsonValue]:
    return dict(value) if _json_size(value) <= _SMALL else {}


@dataclass(frozen=True, slots=True, kw_only=True)
class Offloading:
    """When a store offloads an event, and what its preview keeps.

    Raises:
        UsageError: ``threshold`` is below 1 KiB, or ``preview_chars`` is negative or not
            well below the threshold.
    """

    threshold: int = DEFAULT_OFFLOAD_THRESHOLD
    """Events whose content takes more bytes than this as JSON are offloaded."""
    preview_chars: int = DEFAULT_PREVIEW_CHARS
    """How many characters of each text the preview keeps."""

    def __post_init__(self) -> None:
        threshold, chars = cast(object, self.threshold), cast(object, self.preview_chars)
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1024:
            raise UsageError(
                f"offload_threshold must be an int of at least 1024, not {threshold!r}"
            )
        if isinstance(chars, bool) or not isinstance(chars, int) or chars < 0:
            raise UsageError(f"preview_chars must be an int >= 0, not {chars!r}")
        if chars * 4 > threshold // 2:
            raise UsageError(
                f"preview_chars ({chars}) must leave a preview well below offload_threshold "
                f"({threshold} bytes): at most {threshold // 8}"
            )

    @classmethod
    def of(cls, threshold: int | None, preview_chars: int) -> Offloading | None:
        """The setting of a store's ``offload_threshold`` and ``preview_chars`` arguments
        (``None``: the store never offloads)."""
        return None if threshold is None else cls(threshold=threshold, preview_chars=preview_chars)

    def needs(self, event: SessionEvent) -> bytes | None:
        """The event's content as JSON when it must be offloaded, else ``None``."""
        if event.type == EventType.COMPACTION or event.metadata.get(OFFLOADED) is not None:
            return None
        content = content_json(event)
        return content if len(content) > self.threshold else None

    def preview(self, event: SessionEvent, size: int) -> SessionEvent:
        """The preview the log keeps of ``event``, whose content takes ``size`` bytes."""
        n = self.preview_chars
        message = event.message
        chars = list(_texts_of(event))
        metadata = _small(event.metadata) or {
            key: event.metadata[key] for key in _OWN_KEYS if key in event.metadata
        }
        metadata[OFFLOADED] = {"size": size, "chars": [len(text) for text in chars]}
        if message is None:
            return event.model_copy(update={"payload": {}, "metadata": metadata})
        return event.model_copy(update={"message": _cut(message, n), "metadata": metadata})


def _cut(message: Message, n: int) -> Message:
    extra = {"extra": _small(message.extra), "item_extra": _small(message.item_extra)}
    if isinstance(message, ToolResponseMessage):
        responses = tuple(
            response.model_copy(
                update={
                    "data": response.data[:n],
                    "parts": None,
                    "item_extra": _small(response.item_extra),
                }
            )
            for response in message.responses
        )
        return message.model_copy(update={"responses": responses, **extra})
    if isinstance(message, AssistantMessage):
        calls = tuple(
            call.model_copy(update={"arguments": call.arguments[:n]}) for call in message.tool_calls
        )
        text = None if message.text is None else message.text[:n]
        update = {"text": text, "tool_calls": calls, "parts": None, "items": (), **extra}
        return message.model_copy(update=update)
    return message.model_copy(update={"text": message.text[:n], "parts": None, **extra})


def _texts_of(event: SessionEvent) -> list[str]:
    """The texts of an event a page reads: each tool result's data, a message's text, or a
    custom event's payload as JSON."""
    message = event.message
    if isinstance(message, ToolResponseMessage):
        return [response.data for response in message.responses]
    if isinstance(message, UserMessage | SystemMessage | AssistantMessage):
        return [message.text or ""]
    return [json.dumps(event.payload, ensure_ascii=False)]


@dataclass(frozen=True, slots=True, kw_only=True)
class OffloadedBody:
    """What a preview's `OFFLOADED` metadata says of the body stored elsewhere."""

    size: int
    """The bytes the whole content takes as JSON."""
    chars: tuple[int, ...]
    """The length in characters of each text the preview cut, in the order `BodyPage` reads
    them: each tool result's ``data`` (in the order of the responses), or the message's
    ``text``, or a custom event's payload as JSON."""

    @classmethod
    def of(cls, event: SessionEvent) -> OffloadedBody | None:
        """What ``event`` says of its offloaded body; ``None`` when it is not a preview."""
        marker: object = event.metadata.get(OFFLOADED)
        if not isinstance(marker, dict):
            return None
        fields = cast(dict[str, Any], marker)
        chars = cast(list[int], fields.get("chars") or [])
        return cls(size=int(fields.get("size", 0)), chars=tuple(int(c) for c in chars))


@dataclass(frozen=True, slots=True, kw_only=True)
class BodyPage:
    """One page of an event's text, read from its whole body."""

    event_id: str
    """The event read."""
    call_id: str | None
    """The tool call whose result was read; ``None`` for a message's text or a payload."""
    offset: int
    """Where the page starts, in characters."""
    text: str
    """The page."""
    total: int
    """The length of the whole text, in characters."""

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts; ``None`` after the last."""
        end = self.offset + len(self.text)
        return end if end < self.total else None


def page_of(event: SessionEvent, *, offset: int, limit: int, call_id: str | None) -> BodyPage:
    """A page of the whole ``event``'s text: one tool result's (``call_id``, or the first),
    a message's text, or a custom event's payload as JSON.

    Raises:
        UsageError: ``offset`` is negative, ``limit`` below 1, or ``call_id`` names no result of
            the event.
    """
    given_offset, given_limit = cast(object, offset), cast(object, limit)
    if isinstance(given_offset, bool) or not isinstance(given_offset, int) or offset < 0:
        raise UsageError(f"offset must be an int >= 0, not {given_offset!r}")
    if isinstance(given_limit, bool) or not isinstance(given_limit, int) or limit < 1:
        raise UsageError(f"limit must be an int >= 1, not {given_limit!r}")
    texts = _texts_of(event)
    message = event.message
    index = 0
    if call_id is not None:
        ids = [r.id for r in message.responses] if isinstance(message, ToolResponseMessage) else []
        if call_id not in ids:
            raise UsageError(f"event {event.id!r} holds no result of tool call {call_id!r}")
        index = ids.index(call_id)
    elif isinstance(message, ToolResponseMessage):
        call_id = message.responses[0].id
    text = texts[index]
    return BodyPage(
        event_id=event.id,
        call_id=call_id,
        offset=offset,
        text=text[offset : offset + limit],
        total=len(text),
    )
