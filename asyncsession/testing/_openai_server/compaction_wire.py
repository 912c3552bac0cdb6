"""Compaction on the Responses API: ``POST /v1/responses/compact`` and ``context_management``.

The shapes follow the ``openai`` SDK's types. A compact request takes the next scripted reply
like any request: its error, ``hold`` and ``delay`` apply, its content is ignored.
``responses.compact`` answers a
``CompactedResponse`` (``object: "response.compaction"``) whose ``output`` is every user message
of the input, in order, followed by one ``compaction`` item (``ResponseCompactionItem``). The
scripted server's ``encrypted_content`` is not encrypted: it is base64 of
``scripted-compaction:`` and the JSON of the items it stands for, so a test can read what a
compaction covered with ``covered_items``.

With ``context_management=[{"type": "compaction", "compact_threshold": N}]`` on
``POST /v1/responses``, a request whose input is estimated at ``N`` tokens or more is compacted
during the response: the reply's output starts with a ``compaction`` item standing for the whole
input, and, streamed, that item is opened, announced by ``response.compaction.compacting``
(``ResponseCompactionCompactingEvent``) and closed before the rest of the reply.
"""

from __future__ import annotations

import base64
import binascii
import json
import secrets
import time
from collections.abc import Sequence
from typing import Any

from .script import DEFAULT_MODEL, RecordedRequest, estimate_tokens, json_objects

__all__ = [
    "COMPACT_PATHS",
    "compact_threshold",
    "compacted_body",
    "compacts",
    "compaction_item",
    "covered_items",
]

COMPACT_PATHS = frozenset({"/v1/responses/compact", "/responses/compact"})
_PREFIX = "scripted-compaction:"


def compaction_item(covered: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """A ``compaction`` item standing for ``covered`` (what the server would encrypt)."""
    payload = _PREFIX + json.dumps(list(covered), ensure_ascii=False, separators=(",", ":"))
    return {
        "type": "compaction",
        "id": f"cmp_{secrets.token_hex(12)}",
        "encrypted_content": base64.b64encode(payload.encode()).decode(),
        "created_by": "scripted-server",
    }


def covered_items(item: dict[str, Any]) -> list[dict[str, Any]] | None:
    """The items a scripted ``compaction`` item stands for; ``None`` if it is not one of ours."""
    try:
        text = base64.b64decode(str(item.get("encrypted_content", "")), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None
    if not text.startswith(_PREFIX):
        return None
    covered: object = json.loads(text.removeprefix(_PREFIX))
    return covered if isinstance(covered, list) else None  # pyright: ignore[reportUnknownVariableType]


def _is_user_message(item: dict[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def compacted_body(request: RecordedRequest) -> bytes:
    """The JSON ``CompactedResponse`` for a ``responses.compact`` request."""
    items = request.input
    users = [
        {
            "type": "message",
            "id": str(item.get("id") or f"msg_{secrets.token_hex(12)}"),
            "role": "user",
            "status": "completed",
            "content": _input_content(item.get("content")),
        }
        for item in items
        if _is_user_message(item)
    ]
    compaction = compaction_item([item for item in items if not _is_user_message(item)])
    given = estimate_tokens(json.dumps([items, request.body.get("instructions")]))
    produced = estimate_tokens(compaction["encrypted_content"])
    body = {
        "id": f"resp_{secrets.token_hex(12)}",
        "object": "response.compaction",
        "created_at": int(time.time()),
        "model": request.model or DEFAULT_MODEL,
        "output": [*users, compaction],
        "usage": {
            "input_tokens": given,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": produced,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": given + produced,
        },
    }
    return json.dumps(body, ensure_ascii=False).encode()


def _input_content(content: object) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "input_text", "text": content}]
    return json_objects(content)


def compact_threshold(request: RecordedRequest) -> int | None:
    """The ``compact_threshold`` of the request's ``context_management``, if it asks for one."""
    for entry in json_objects(request.body.get("context_management")):
        if entry.get("type") == "compaction":
            threshold: object = entry.get("compact_threshold")
            return threshold if isinstance(threshold, int) else 0
    return None


def compacts(request: RecordedRequest) -> bool:
    """Whether the server compacts this ``/v1/responses`` request during the response."""
    threshold = compact_threshold(request)
    if threshold is None:
        return False
    return estimate_tokens(json.dumps(request.input, ensure_ascii=False)) >= threshold
