"""Erasing a user: the steps behind the stores' ``erase_user``, and the ledger that resumes them.

An erasure records the user in the ledger with their sessions, deletes their data key, then
their sessions (with events, offloaded bodies and leases) and memory files, and closes the
record; every step can run again, so an interrupted erasure is finished by the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import WriteConcern
from pymongo.asynchronous.collection import AsyncCollection

from .._checks import require_text
from .._pymongo_errors import storage_errors
from .._shield import shielded
from ..encryption import UserKeys
from ..exceptions import ContentErased, MemoryStoreError
from ..memory import MemoryStore
from ._protocol import SessionRepository

__all__ = ["ErasureReport", "Ledger", "UserEraser"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureReport:
    """What one run of an erasure did (returned by the stores' ``erase_user``)."""

    user_id: str
    keys_deleted: int
    """Data keys deleted by this run (0 when an earlier run had deleted it, or no key)."""
    sessions_deleted: int
    """Sessions this run deleted, with their events."""
    memory_entries_deleted: int
    """Top-level memory files and directories this run deleted."""
    resumed: bool
    """Whether an earlier, interrupted run of this erasure was found in the ledger."""


class Ledger:
    """Erasures begun and not finished, with the user's session ids: one document
    ``{_id: user_id, started_at, session_ids}`` each in a MongoDB collection (journaled
    majority writes: a recorded erasure survives a crash of the process and of the server),
    or, without a collection, in this process."""

    def __init__(self, collection: AsyncCollection[Any] | None = None) -> None:
        self._collection = (
            None
            if collection is None
            else collection.with_options(write_concern=WriteConcern("majority", j=True))
        )
        self._records: dict[str, list[str]] = {}  # in this process, oldest first

    async def begin(self, user_id: str) -> tuple[list[str], bool]:
        """Record that ``user_id`` is being erased; the sessions recorded, and whether an
        erasure of theirs was pending."""
        if self._collection is None:
            found = self._records.get(user_id)
            self._records.setdefault(user_id, [])
            return list(found or ()), found is not None
        with storage_errors("record the erasure"):
            before = await self._collection.find_one_and_update(
                {"_id": user_id},
                {"$setOnInsert": {"started_at": datetime.now(UTC), "session_ids": []}},
                upsert=True,
            )
        if before is None:
            return [], False
        return [str(i) for i in before["session_ids"]], True

    async def add_sessions(self, user_id: str, session_ids: Sequence[str]) -> None:
        if self._collection is None:
            self._records[user_id] += session_ids
            return
        with storage_errors("record the erasure's sessions"):
            await self._collection.update_one(
                {"_id": user_id}, {"$addToSet": {"session_ids": {"$each": list(session_ids)}}}
            )

    async def pending(self) -> list[tuple[str, list[str]]]:
        """Every erasure not finished, oldest first: the user and their recorded sessions."""
        if self._collection is None:
            return [(user, list(sessions)) for user, sessions in self._records.items()]
        with storage_errors("read the pending erasures"):
            docs = await self._collection.find({}).sort([("started_at", 1)]).to_list()
        return [(str(d["_id"]), [str(i) for i in d["session_ids"]]) for d in docs]

    async def finish(self, user_id: str) -> None:
        if self._collection is None:
            self._records.pop(user_id, None)
            return
        with storage_errors("close the erasure"):
            await self._collection.delete_one({"_id": user_id})


class UserEraser:
    """Erases users from a session store, their data keys and a memory store (of any scope:
    the user's is ``memories.with_scope(user_id)``), recording each in ``ledger``."""

    def __init__(
        self,
        sessions: SessionRepository,
        ledger: Ledger,
        keys: UserKeys | None,
        memories: MemoryStore | None,
    ) -> None:
        self._sessions = sessions
        self._ledger = ledger
        self._keys = keys
        self._memories = memories

    async def erase_user(self, user_id: str) -> ErasureReport:
        """Erase ``user_id``, or finish erasing them; runs to its end even if cancelled."""
        require_text(user_id, "user_id")
        return await shielded(self._erase(user_id))

    async def finish_pending(self) -> list[ErasureReport]:
        """Finish every erasure the ledger holds, oldest first."""
        return [await self.erase_user(user) for user, _ in await self._ledger.pending()]

    async def _erase(self, user_id: str) -> ErasureReport:
        recorded, resumed = await self._ledger.begin(user_id)
        try:
            found = [session.id for session in await self._sessions.find_by_user_id(user_id)]
        except ContentErased:
            found = []  # an earlier run deleted the key after recording the sessions it found
        fresh = [session_id for session_id in found if session_id not in recorded]
        if fresh:
            await self._ledger.add_sessions(user_id, fresh)
        keys_deleted = 0 if self._keys is None else await self._keys.delete_key(user_id)
        session_ids = list(dict.fromkeys([*recorded, *fresh]))
        for session_id in session_ids:
            await self._sessions.delete(session_id)
        entries = 0
        if self._memories is not None:
            store = self._memories.with_scope(user_id)
            for entry in await store.list_dir(""):
                try:
                    await store.delete(entry.name)
                except MemoryStoreError as exc:
                    if exc.reason != "not_found":
                        raise
                    continue  # deleted meanwhile
                entries += 1
        await self._ledger.finish(user_id)
        return ErasureReport(
            user_id=user_id,
            keys_deleted=keys_deleted,
            sessions_deleted=len(session_ids),
            memory_entries_deleted=entries,
            resumed=resumed,
        )
