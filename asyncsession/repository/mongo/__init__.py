"""The MongoDB session store: ``MongoSessionRepository``, a log of commit documents.

**Layout.** Two collections (names configurable); ``_layout`` names every stored field.

``sessions``
    One document per session: ``_id`` (the session id), ``user_id``, ``created_at``,
    ``expires_at``, ``metadata``, ``attributes`` (its indexed metadata), ``incarnation`` (a
    random number made when it was inserted) and, while one is taken, a ``lease``. An append never
    writes it.
``session_commits``
    One document per committed append: ``session``, ``commit`` (1, 2, 3, … dense per session),
    the session's ``incarnation``, ``events`` (in order, each ``{id, type, timestamp, body}``,
    ``body`` holding the message or payload and the metadata) and, when taken, a ``lease``.

**Appends** (``_append``). One insert of commit ``v + 1``. The unique index on
``(session, commit)`` admits exactly one writer of a number, and the unique index on
``events.id`` refuses an id stored already; only a refused insert looks at what is stored, to
tell a replay (its ids are this session's), an id of another session and a lost race apart.

**Reads** (``_read``). One aggregate: the session's newest commits, by a range when this
process knows the newest number (``_layout.Newest``), else by a sorted find, with
``$unionWith`` of the session document. Older commits are read by ranges only when a window
needs them. ``archived`` and the active view are derived from the newest ``COMPACTION``
event, as `asyncsession._view.ReadLog` says.

**Compaction** is an append like any other: its summaries and its boundary, one commit.

**Content** (``_content``). With encryption on, each event's ``body`` (and a session's
``metadata``) is one encrypted value; an event over the offload threshold keeps a preview in
its commit and its whole body in the GridFS bucket ``session_bodies``.

**Durability.** The collections use a journaled majority write concern whatever the client's
default; writes are shielded from cancellation, and every public call runs under one deadline,
the client's ``timeoutMS``.

The maintainers' page, ``docs/internals/mongodb.md``, says all this at more length.
"""

from __future__ import annotations

from ._repository import MongoSessionRepository

__all__ = ["MongoSessionRepository"]
