"""Models <-> BSON for the MongoDB store (driver errors become ours in ``_pymongo_errors``).

User data never becomes BSON keys: a session's ``metadata`` and an event's body (message,
payload, metadata, timestamp, type) are stored as JSON text, so keys that start with ``$``,
contain ``.`` or NUL are kept verbatim and can never act as operators. The fields the store
queries (type, timestamp, flags, lower-cased text) sit beside the JSON as plain BSON values that
we compute ourselves.
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import bson
import pydantic_core

from ...events import Session, SessionEvent
from ...messages import MessageType
from ._layout import (
    ANY_ARCHIVED,
    ARCHIVED,
    COMPACTED,
    COMPACTIONS,
    CREATED_AT,
    DATA,
    EXPIRES_AT,
    FENCES,
    ID,
    INCARNATION,
    LAST_USER,
    LIVE,
    METADATA,
    PACKED,
    PENDING,
    ROLLED,
    SEQ,
    SYNTHETIC,
    TAIL,
    TAIL_SIZE,
    TIMESTAMP,
    TYPE,
    USER_ID,
    VERSION,
)

__all__ = [
    "DEFAULT_MAX_DOCUMENT_SIZE",
    "INLINE_LIMIT",
    "MESSAGE_TYPE_NAMES",
    "Doc",
    "as_utc",
    "body_of",
    "bson_size",
    "decode_body",
    "keyword_regex",
    "literal_regex",
    "new_log_fields",
    "new_session_doc",
    "new_token",
    "pack_entry",
    "session_from_doc",
    "session_to_doc",
    "SESSION_PROJECTION",
    "unpack_entry",
]

Doc = dict[str, Any]

DEFAULT_MAX_DOCUMENT_SIZE: Final = 16 * 1024 * 1024
"""MongoDB's document size limit, used when the server does not say."""
INLINE_LIMIT: Final = 16 * 1024
"""An event body up to this many bytes is kept inline in the session document's tail; a bigger
one is written to the events collection before its commit and the tail keeps a reference."""
MESSAGE_TYPE_NAMES: Final = frozenset(t.value.upper() for t in MessageType)
"""The event type names of message events."""

SESSION_PROJECTION: Final[Doc] = {USER_ID: 1, CREATED_AT: 1, EXPIRES_AT: 1, METADATA: 1}
"""The fields of a session document that make a
[`Session`][asyncsession.repository.mongo._codec.Session]."""


def new_token() -> str:
    """A random token that names one write attempt (or one session incarnation): 72 random
    bits in 12 URL-safe characters (0.1 wrote 24 hex digits; tokens are only ever compared)."""
    return secrets.token_urlsafe(9)


def as_utc(value: datetime) -> datetime:
    """A BSON date as a UTC-aware datetime, whatever the client's ``tz_aware`` setting."""
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _dump(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def bson_size(doc: Doc) -> int:
    """The encoded size of a document in bytes."""
    return len(bson.encode(doc))


def new_log_fields() -> Doc:
    """The fields of a new session document that hold its (empty) log."""
    return {
        INCARNATION: new_token(),
        VERSION: 0,
        SEQ: 0,
        TAIL: [],
        TAIL_SIZE: 0,
        ROLLED: -1,
        LIVE: 0,
        COMPACTIONS: 0,
        COMPACTED: -1,
        ANY_ARCHIVED: False,
        LAST_USER: -1,
        PENDING: None,
        FENCES: [],
    }


def new_session_doc(session: Session) -> Doc:
    """The whole document of a new session: its fields and an empty log."""
    return {ID: session.id, **session_to_doc(session), **new_log_fields()}


def session_to_doc(session: Session) -> Doc:
    """The fields of a session document that a `save` may change, and ``created_at``."""
    return {
        USER_ID: session.user_id,
        CREATED_AT: session.created_at,
        EXPIRES_AT: session.expires_at,
        METADATA: _dump(session.metadata),
    }


def session_from_doc(doc: Doc) -> Session:
    """The [`Session`][asyncsession.repository.mongo._codec.Session] a session document holds."""
    expires = doc.get(EXPIRES_AT)
    return Session(
        id=doc[ID],
        user_id=doc[USER_ID],
        created_at=as_utc(doc[CREATED_AT]),
        expires_at=None if expires is None else as_utc(expires),
        metadata=json.loads(doc.get(METADATA) or "{}"),
    )


_BODY_EXCLUDE: Final = frozenset(
    {"id", "session_id", "archived", "timestamp", "type"}  # layout: model fields, not stored keys
)
_EMPTY_EXTRA: Final = '{"message":{"extra":{},'
_EMPTY_METADATA: Final = ',"metadata":{}}'
_TEXT_ONLY: Final = {
    "USER": ('{"message":{"kind":"user","text":', "}}"),
    "SYSTEM": ('{"message":{"kind":"system","text":', ',"role":"system"}}'),
    "ASSISTANT": ('{"message":{"kind":"assistant","text":', ',"tool_calls":[]}}'),
}
"""Event types whose message, when it is nothing but its text, is stored as a JSON string:
what the body is around the text then."""


def body_of(event: SessionEvent) -> str:
    """The JSON text stored for an event: its message or payload, and its metadata.

    The id, session, archived flag, timestamp and type are stored beside it (in the tail entry
    or as fields of the event document), so the text leaves them out, and fields at their
    default (``None``, and an empty ``metadata`` or message ``extra``) too. A user, assistant or
    system message that is nothing but its text is stored as that text, a JSON string (the
    type beside it says which message it is): ``"Hello"`` instead of
    ``{"message":{"kind":"user","text":"Hello"}}``. Bodies written by 0.1, which hold the
    timestamp and type and every default, decode the same; see `decode_body`.
    """
    data = event.model_dump_json(exclude=set(_BODY_EXCLUDE), exclude_none=True)
    # Field order is fixed: ``message`` (whose first field is ``extra``) comes first and
    # ``metadata`` last, so these are the empty fields themselves, never text inside a value.
    if data.startswith(_EMPTY_EXTRA):
        data = '{"message":{' + data[len(_EMPTY_EXTRA) :]
    if data.endswith(_EMPTY_METADATA):
        data = data[: -len(_EMPTY_METADATA)] + "}"
    frame = _TEXT_ONLY.get(event.type.name)
    text = getattr(event.message, "text", None)
    if frame is not None and isinstance(text, str):
        spelled = pydantic_core.to_json(text).decode()
        # Only when the whole body is exactly the framed text is the string alone the same.
        if data == frame[0] + spelled + frame[1]:
            return spelled
    return data


def decode_body(data: str, type: str) -> dict[str, Any]:
    """The fields of an event that a stored body holds (see `body_of`), as plain data for the
    model to validate."""
    if data.startswith('"'):
        return {"message": {"kind": type.lower(), "text": json.loads(data)}}
    decoded: dict[str, Any] = json.loads(data)
    return decoded


_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MS: Final = timedelta(milliseconds=1)


def pack_entry(
    event_id: str, type: str, ts: datetime, synthetic: bool, archived: bool, data: str | None
) -> Doc:
    """A tail entry: the id (which guards query) and one string with everything else.

    The string is ``"<ms since epoch>;<flags>;<type>;<JSON body>"`` (flags: ``s`` synthetic,
    ``a`` archived, ``b`` body only in the events collection). Two keys instead of six make
    every commit cheaper for the server, which decodes, matches, copies and diffs the session
    document entry by entry and key by key; only this client ever reads the string. Type names
    cannot contain ``;`` and JSON text starts after the third one.
    """
    flags = ("s" if synthetic else "") + ("a" if archived else "") + ("b" if data is None else "")
    return {ID: event_id, PACKED: f"{(as_utc(ts) - _EPOCH) // _MS};{flags};{type};{data or ''}"}


def unpack_entry(doc: Doc) -> tuple[str, datetime, bool, bool, str | None]:
    """``(type, ts, synthetic, archived, data)`` of a tail entry, packed or in the six-key form
    of earlier versions."""
    packed: str | None = doc.get(PACKED)
    if packed is None:
        return (
            doc[TYPE],
            as_utc(doc[TIMESTAMP]),
            bool(doc.get(SYNTHETIC, False)),
            bool(doc.get(ARCHIVED, False)),
            doc.get(DATA),
        )
    ms, flags, type, data = packed.split(";", 3)
    return type, _EPOCH + int(ms) * _MS, "s" in flags, "a" in flags, None if "b" in flags else data


def literal_regex(text: str) -> str:
    r"""A regex that matches ``text`` literally: every ASCII non-alphanumeric as ``\xHH``.

    The escape form means the same in PCRE (MongoDB) and Python's ``re`` (mongomock), and keeps
    NUL out of the pattern string.
    """
    return "".join(f"\\x{ord(c):02x}" if c.isascii() and not c.isalnum() else c for c in text)


# Characters whose lower case is a single character they are neither the upper nor the title
# case of (found by scanning every code point; Python 3.11's Unicode tables).
_ODD_UPPER: Final = {
    "\u03b8": "\u03f4",
    "\u00df": "\u1e9e",
    "\u03c9": "\u2126",
    "k": "\u212a",
    "\u00e5": "\u212b",
}
_DOTTED_I: Final = "\u0130"
"""The one character whose lower case is two characters: ``i`` and U+0307."""


def _json_text(text: str) -> str:
    return pydantic_core.to_json(text).decode()[1:-1]


def _char_regex(char: str) -> str:
    """A regex for any character of an event's JSON body whose lower case contains ``char``
    (itself lower case), as the body spells it."""
    spelled = _json_text(char)
    if spelled != char:  # a quote, backslash or control character: escaped in the body
        return literal_regex(spelled)
    variants = {char}
    for other in (char.upper(), char.title()):
        if len(other) == 1 and (other.lower() == char or (char == "\u03c2" and other == "\u03a3")):
            variants.add(other)  # final sigma: Python lowers a word-final capital sigma to it
    if char in _ODD_UPPER:
        variants.add(_ODD_UPPER[char])
    if char in ("i", "\u0307"):
        variants.add(_DOTTED_I)
    if len(variants) == 1:
        return literal_regex(char)
    return "[" + "".join(literal_regex(v) for v in sorted(variants)) + "]"


def keyword_regex(keyword: str) -> str:
    """A regex over an event's JSON body that matches wherever its text, lower-cased,
    contains ``keyword`` (lower case), and possibly elsewhere.

    It is a prefilter (a key or another field can match too, so the store checks every hit in
    memory), but it never misses: every character matches each character whose lower case
    contains it, as JSON spells it. No ``i`` option, so the server's notion of case cannot
    differ from Python's.
    """
    parts: list[str] = []
    index = 0
    while index < len(keyword):
        if keyword.startswith("i\u0307", index):
            pair = _char_regex("i") + _char_regex("\u0307")
            parts.append(f"(?:{literal_regex(_DOTTED_I)}|{pair})")
            index += 2
            continue
        parts.append(_char_regex(keyword[index]))
        index += 1
    return "".join(parts)
