"""Events and text on one line, for people: the command line's tables and the demo's log."""

from __future__ import annotations

import json

from .compaction_protocols import CompactionRecord
from .events import EventType, SessionEvent
from .exceptions import UsageError
from .messages import AssistantMessage, ToolResponseMessage
from .rewinds import RewindRecord

__all__ = ["CELL_WIDTH", "cell", "describe"]

CELL_WIDTH = 120
"""The most characters a table cell shows; longer text ends in `…` (`--json` has it whole)."""
_ESCAPES = str.maketrans({"\n": "\\n", "\r": "\\r", "\t": "\\t"})


def cell(text: str) -> str:
    """`text` on one line of at most `CELL_WIDTH` characters: breaks and tabs escaped."""
    flat = text.translate(_ESCAPES)
    flat = "".join(c if c.isprintable() else repr(c)[1:-1] for c in flat)
    return flat if len(flat) <= CELL_WIDTH else flat[: CELL_WIDTH - 1] + "…"


def describe(event: SessionEvent) -> str:
    """The event's content on one line: text, tool calls, tool results, what a compaction did,
    or the payload."""
    message = event.message
    if event.type == EventType.COMPACTION:
        try:
            done = CompactionRecord.from_event(event)
            return (
                f"{done.strategy} (trigger {done.trigger}): {len(done.covered)} covered, "
                f"{len(done.kept)} kept, {len(done.summaries)} written, "
                f"~{done.tokens_before} -> ~{done.tokens_after} tokens"
            )
        except UsageError:
            pass  # not a record this release reads: show the payload as it is
    if event.type == EventType.REWIND:
        try:
            record = RewindRecord.from_event(event)
        except UsageError:
            pass  # not a record this release reads: show the payload as it is
        else:
            to = "" if record.to.event_id is None else f", after event {record.to.event_id}"
            return f"rewind to version {record.to.version}{to} (made at {record.from_version})"
    if message is None:
        return json.dumps(event.payload, ensure_ascii=False)
    if isinstance(message, AssistantMessage) and message.tool_calls:
        calls = ", ".join(f"{c.name}({c.arguments})" for c in message.tool_calls)
        return (f"{message.text} " if message.text else "") + f"-> {calls}"
    if isinstance(message, ToolResponseMessage):
        return ", ".join(f"{r.name or r.id} = {r.data}" for r in message.responses)
    return message.text or ""
