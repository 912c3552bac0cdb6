"""Event ids of the messages a turn stores.

By default every stored event gets a random id, so a retried write creates a new event; a call
with a request id (``request_id=``) stores its question and its reply under ids fixed by the
session and request ids, so a retry of the request stores nothing twice.
[`IdempotentSessionEventIdGenerator`][asyncsession.advisors.IdempotentSessionEventIdGenerator]
derives every id from the message and a fingerprint of advisor-context values instead (the
reference's generator): a retried request then writes the same ids, and appending an id the
session already has is a no-op. Subclass it and override ``generate`` for ids of your own.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any, Final

from ..chat import SESSION_ID_CONTEXT_KEY
from ..messages import AssistantMessage, Message, ToolResponseMessage

__all__ = ["IdempotentSessionEventIdGenerator"]


class IdempotentSessionEventIdGenerator:
    """Chooses the id of the event a message is stored as: by default a deterministic
    ``<message type>-<sha256>``, at most 74 characters (override ``generate`` for your own).

    The hash covers two parts:

    - a **context fingerprint**: ``key:value`` for each of ``context_keys``, joined by ``,``
      (default: just the session id key; giving keys replaces that list, so include
      ``SESSION_ID_CONTEXT_KEY`` yourself);
    - the **message**: for tool calls and tool results the model's tool-call ids (or, if any
      id is blank, the tool names with their arguments or results); for every other message
      its text, and, when it carries more than text (content parts, Responses API items such as
      an ``image_generation_call`` or a ``compaction`` item, unknown keys), a sha256 of all of
      that as canonical JSON. Two messages that differ anywhere therefore get different ids,
      and a text-only message gets the same id it always had, so ids already stored keep
      their meaning.

    Identical messages collide: with the default fingerprint, a user answering "yes" twice in
    one session stores the second "yes" as a replay of the first, i.e. not at all. Add a key
    whose value changes per request (a durable run id) to avoid that.

    Args:
        context_keys: the advisor-context keys of the fingerprint.
    """

    __slots__ = ("context_keys",)

    def __init__(self, *context_keys: str) -> None:
        self.context_keys: tuple[str, ...] = context_keys or (SESSION_ID_CONTEXT_KEY,)
        """The advisor-context keys of the fingerprint, in order."""

    def generate(self, context: Mapping[str, Any], message: Message) -> str:
        """The event id for ``message``, stored during a call with this advisor context:
        ``<message type>-<sha256 of fingerprint and message key>``."""
        values = [(key, context.get(key)) for key in self.context_keys]
        fingerprint = ",".join(f"{k}:{'null' if v is None else str(v)}" for k, v in values)
        digest = hashlib.sha256(f"{fingerprint}:{_message_key(message)}".encode()).hexdigest()
        return f"{message.message_type.value}-{digest}"


def _message_key(message: Message) -> str:
    if isinstance(message, AssistantMessage) and message.tool_calls:
        ids = [call.id for call in message.tool_calls]
        if all(i.strip() for i in ids):
            return "toolcall:" + ",".join(ids)
        calls = ",".join(f"{call.name}({call.arguments})" for call in message.tool_calls)
        return _with_rest(f"content:{message.text or ''}:{calls}", message)
    if isinstance(message, ToolResponseMessage):
        ids = [response.id for response in message.responses]
        if all(i.strip() for i in ids):
            return "toolresp:" + ",".join(ids)
        key = "content:" + ",".join(f"{r.name}->{r.data}" for r in message.responses)
        return _with_rest(key, message)
    return _with_rest(f"content:{message.text or ''}", message)


_COVERED: Final = {
    "tool_calls": ("id", "name", "arguments"),
    "responses": ("id", "name", "data"),
}
"""Keys of list entries the text key already covers, per list field."""


def _with_rest(key: str, message: Message) -> str:
    """``key``, plus a digest of whatever the message holds beyond it (nothing for plain text)."""
    rest: dict[str, Any] = message.model_dump(
        mode="json", exclude={"kind", "text"}, exclude_defaults=True
    )
    for field, covered in _COVERED.items():
        entries: list[dict[str, Any]] = [
            {k: v for k, v in entry.items() if k not in covered} for entry in rest.pop(field, [])
        ]
        if any(entries):
            rest[field] = entries
    if not rest:
        return key
    canonical = json.dumps(rest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return f"{key}:whole:{hashlib.sha256(canonical.encode()).hexdigest()}"
