"""Every collection and stored field of the MongoDB store, named once.

The store keeps three collections. Stored keys stay short where they are written on every
commit (``tn``, ``ta``, ``ar``, ``cv``, ``inc``, ``ck``, ``e``); the constant's name is the
field's full name, and no other module spells a field as a string (``tests/repository/
test_mongo_layout.py`` checks). A key is one constant even where it appears in several
documents; its comment says what it holds in each.

``sessions`` (one document per session)
    `ID`, `USER_ID`, `CREATED_AT`, `EXPIRES_AT`, `METADATA`, `VERSION`, `INCARNATION`, `SEQ`
    (the counter), `TAIL`, `TAIL_SIZE`, `ARCHIVED_PREFIX`, `ANY_ARCHIVED`, `ROLLED`, `LIVE`,
    `COMPACTIONS`, `COMPACTED`, `COMPACTION_KEY`, `LAST_USER`, `PENDING`, `FENCES`, `INDEXED`,
    `TURN_LEASES`.
`TURN_LEASES` (one entry per leased request, under a digest of its request id)
    `HOLDER`, `EXPIRES_AT`.
a tail entry (an element of `TAIL`, or of `INSERTS`)
    `ID`, `PACKED`; with an explicit position also `SEQ`, `MINOR` and `TURN`. Entries written
    by earlier versions hold `TYPE`, `TIMESTAMP`, `SYNTHETIC`, `ARCHIVED` and `DATA` instead of
    `PACKED`.
`PENDING` (a compaction's changes below the tail, until rolled forward)
    `COMPACTIONS`, `ARCHIVE`, `ARCHIVE_SEQ`, `INSERTS`.
``session_events`` (one document per event below the tail)
    `ID`, `SESSION_ID`, `INCARNATION`, `SEQ`, `MINOR`, `TIMESTAMP`, `TYPE`, `ARCHIVED`, `TURN`,
    `DATA`, and `SYNTHETIC` and `COMPACTIONS` when they are not ``false`` and ``0``. A big
    event's document written ahead of its commit has no position yet and carries `TOKEN`.
``session_event_ids`` (the id registry)
    `ID`, `SESSION_ID`, `TOKEN`.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ANY_ARCHIVED",
    "ARCHIVE",
    "ARCHIVED",
    "ARCHIVED_PREFIX",
    "ARCHIVE_SEQ",
    "COMPACTED",
    "COMPACTIONS",
    "COMPACTION_KEY",
    "CREATED_AT",
    "DATA",
    "EVENTS",
    "EVENT_IDS",
    "EXPIRES_AT",
    "FENCES",
    "HOLDER",
    "ID",
    "INCARNATION",
    "INDEXED",
    "INSERTS",
    "LAST_USER",
    "LIVE",
    "METADATA",
    "MINOR",
    "PACKED",
    "PENDING",
    "ROLLED",
    "SEQ",
    "SESSIONS",
    "SESSION_ID",
    "SYNTHETIC",
    "TAIL",
    "TAIL_SIZE",
    "TIMESTAMP",
    "TOKEN",
    "TURN",
    "TURN_LEASES",
    "TYPE",
    "USER_ID",
    "VERSION",
    "field_names",
]

# Collections (the default names; each is configurable).
SESSIONS: Final = "sessions"
"""Sessions collection: one document per session, holding its log's newest events."""
EVENTS: Final = "session_events"
"""Events collection: one document per event below the tail."""
EVENT_IDS: Final = "session_event_ids"
"""Event id registry: one document per registered event id, unique across sessions."""

# Fields.
ID: Final = "_id"
"""Identity: the session id (sessions), else the stored event id."""
SESSION_ID: Final = "session_id"
"""Session id: the session an event document or a registered id belongs to."""
USER_ID: Final = "user_id"
"""User id: the user a session belongs to."""
CREATED_AT: Final = "created_at"
"""Created at: when the session was created."""
EXPIRES_AT: Final = "expires_at"
"""Expires at: when the session expires (``None``: never)."""
METADATA: Final = "metadata"
"""Metadata: the session's metadata, as JSON text."""
VERSION: Final = "version"
"""Version: the session's compare-and-swap counter; every committed write moves it."""
INCARNATION: Final = "inc"
"""Incarnation: a token that changes when a session is deleted and created again; an event
document belongs to the session's log only while its token is the session's."""
SEQ: Final = "seq"
"""Sequence: an event's position (with `MINOR`); on a session document the counter, the
position of the newest appended event."""
MINOR: Final = "minor"
"""Minor position: a fractional key that orders events compaction inserts into a gap."""
TAIL: Final = "tail"
"""Tail: the newest events, as tail entries, oldest first."""
TAIL_SIZE: Final = "tn"
"""Tail number: how many entries `TAIL` holds (read without the tail itself)."""
ARCHIVED_PREFIX: Final = "ta"
"""Tail archived: how many of the oldest tail entries are known to be archived."""
ANY_ARCHIVED: Final = "ar"
"""Any archived: whether the log may hold an archived event (missing reads as ``True``)."""
ROLLED: Final = "rolled"
"""Rolled: events at ``seq <= rolled`` live in the events collection, the rest in the tail."""
LIVE: Final = "live"
"""Live: how many unarchived message events live in the events collection."""
COMPACTIONS: Final = "cv"
"""Compaction version: how many compactions the log has had (session, `PENDING`); on an event
document, the compaction that last wrote it."""
COMPACTED: Final = "compacted"
"""Compacted: the counter right after the newest compaction (``-1`` before the first)."""
COMPACTION_KEY: Final = "ck"
"""Compaction key: the newest compaction's key, so that its retry knows it was applied."""
LAST_USER: Final = "last_user"
"""Last user: the ``seq`` of the newest user message in the events collection (a hint)."""
PENDING: Final = "pending"
"""Pending: the newest compaction's changes below the tail, until rolled forward."""
FENCES: Final = "fences"
"""Fences: tokens of write attempts that may no longer commit."""
TURN_LEASES: Final = "turn_leases"
"""Turn leases: the running attempts of idempotent turns, one entry per request (a digest of its
id), each with its `HOLDER` and `EXPIRES_AT`."""
HOLDER: Final = "holder"
"""Holder (in a `TURN_LEASES` entry): the attempt that holds the lease."""
INDEXED: Final = "indexed"
"""Indexed: one ``key\\x00value`` string per indexed metadata key with a string value, so that
an index can answer a lookup by metadata (the metadata itself is JSON text)."""
ARCHIVE: Final = "archive"
"""Archive (in `PENDING`): ids of events below the tail the compaction archives."""
ARCHIVE_SEQ: Final = "archive_seq"
"""Archive positions (in `PENDING`): the ``seq`` of each id in `ARCHIVE`, for the index."""
INSERTS: Final = "inserts"
"""Inserts (in `PENDING`): tail entries the compaction adds below the tail."""
PACKED: Final = "e"
"""Entry: a tail entry's timestamp, flags, type and JSON body in one string (`pack_entry`)."""
TIMESTAMP: Final = "ts"
"""Timestamp: when the event happened."""
TYPE: Final = "type"
"""Type: the event type's name (``USER``, ``ASSISTANT``, ...)."""
ARCHIVED: Final = "archived"
"""Archived: whether a compaction took the event out of the active view."""
SYNTHETIC: Final = "synthetic"
"""Synthetic: whether the event was made by the library (a summary), not by a participant."""
TURN: Final = "turn"
"""Turn: the ``seq`` of the user message the event's turn started with (a hint)."""
DATA: Final = "data"
"""Data: the event's JSON body (`body_of`), which keyword searches match."""
TOKEN: Final = "token"
"""Token: the write attempt that registered an id or wrote a big event ahead of its commit."""


def field_names() -> frozenset[str]:
    """Every stored key and collection name this module defines."""
    return frozenset(
        value for name, value in globals().items() if name.isupper() and isinstance(value, str)
    )
