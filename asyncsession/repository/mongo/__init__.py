"""The MongoDB session store: `MongoSessionRepository`, a log of commit documents.

One document per session in ``sessions`` and one per committed append in ``session_commits``;
an append is one insert, whose unique indexes admit one writer per commit number and refuse an
event id stored already. A read is one aggregate of the newest commits with the session
document. Writes use a journaled majority write concern, are shielded from cancellation, and
every public call runs under one deadline. The maintainers' page, ``docs/internals/mongodb.md``,
says what is stored where and why each guarantee holds."""

from __future__ import annotations

from ._repository import MongoSessionRepository

__all__ = ["MongoSessionRepository"]
