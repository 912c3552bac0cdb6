"""`UserEraser` and its ledgers: documented in `asyncsession.erasure`, which exports them.

They live beside the session stores so that a store's own ``erase_user`` runs the one erasure
there is. An erasure records the user in the ledger with their sessions, deletes their data key,
then their sessions (with events, offloaded bodies and leases) and memory files, and closes the
record; every step can run again, so an interrupted erasure is finished by the next call.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol, runtime_checkable

from pymongo import WriteConcern
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase

from .._checks import require_text
from .._pymongo_errors import storage_errors
from .._shield import shielded
from ..encryption import UserKeys
from ..exceptions import ContentErased, MemoryStoreError, UsageError
from ..memory import MemoryStore
from ._protocol import SessionRepository

__all__ = [
    "ErasureLedger",
    "ErasureRecord",
    "ErasureReport",
    "InMemoryErasureLedger",
    "MongoErasureLedger",
    "UserEraser",
]

_WRITE_CONCERN = WriteConcern("majority", j=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureRecord:
    """An erasure that has started and not finished."""

    user_id: str
    """The user being erased."""
    started_at: datetime
    """When the first attempt started (UTC)."""
    session_ids: tuple[str, ...]
    """The user's sessions as the erasure found them before their key was deleted."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ErasureReport:
    """What one run of an erasure did."""

    user_id: str
    """The user erased."""
    keys_deleted: int
    """Data keys deleted by this run (0 when an earlier run had deleted it, or no key)."""
    sessions_deleted: int
    """Sessions this run deleted, with their events."""
    memory_entries_deleted: int
    """Top-level memory files and directories this run deleted."""
    resumed: bool
    """Whether an earlier, interrupted run of this erasure was found in the ledger."""


@runtime_checkable
class ErasureLedger(Protocol):
    """Where erasures are recorded before their first step, until their last."""

    async def begin(self, user_id: str) -> tuple[ErasureRecord, bool]:
        """Record that ``user_id`` is being erased; the record, and whether it existed."""
        ...

    async def add_sessions(self, user_id: str, session_ids: Sequence[str]) -> None:
        """Add session ids to the user's record."""
        ...

    async def pending(self) -> list[ErasureRecord]:
        """Every erasure that started and has not finished, oldest first."""
        ...

    async def finish(self, user_id: str) -> None:
        """Remove the user's record: their erasure is complete."""
        ...


class InMemoryErasureLedger:
    """A ledger in this process, for the in-memory stores and tests (gone with the process)."""

    def __init__(self) -> None:
        self._records: dict[str, ErasureRecord] = {}

    async def begin(self, user_id: str) -> tuple[ErasureRecord, bool]:
        found = self._records.get(user_id)
        if found is not None:
            return found, True
        record = ErasureRecord(user_id=user_id, started_at=datetime.now(UTC), session_ids=())
        self._records[user_id] = record
        return record, False

    async def add_sessions(self, user_id: str, session_ids: Sequence[str]) -> None:
        record = self._records[user_id]
        merged = tuple(dict.fromkeys([*record.session_ids, *session_ids]))
        self._records[user_id] = ErasureRecord(
            user_id=user_id, started_at=record.started_at, session_ids=merged
        )

    async def pending(self) -> list[ErasureRecord]:
        return sorted(self._records.values(), key=lambda record: record.started_at)

    async def finish(self, user_id: str) -> None:
        self._records.pop(user_id, None)


class MongoErasureLedger:
    """A ledger in a MongoDB collection (``erasures`` by default): one document per erasure.

    ``{_id: user_id, started_at, session_ids}``, written with a journaled majority write
    concern, so a recorded erasure survives the crash of the process and of the server.
    """

    def __init__(self, database: AsyncDatabase[Any], *, collection: str = "erasures") -> None:
        if isinstance(database, str) or not callable(getattr(database, "get_collection", None)):
            raise UsageError(
                f"database must be a PyMongo AsyncDatabase, not {type(database).__name__}"
            )
        require_text(collection, "collection")
        self._collection: AsyncCollection[Any] = database.get_collection(
            collection, write_concern=_WRITE_CONCERN
        )

    @staticmethod
    def _record(doc: Any) -> ErasureRecord:
        started: datetime = doc["started_at"]
        return ErasureRecord(
            user_id=str(doc["_id"]),
            started_at=started if started.tzinfo else started.replace(tzinfo=UTC),
            session_ids=tuple(str(i) for i in doc.get("session_ids", ())),
        )

    async def begin(self, user_id: str) -> tuple[ErasureRecord, bool]:
        with storage_errors("record the erasure"):
            before = await self._collection.find_one_and_update(
                {"_id": user_id},
                {"$setOnInsert": {"started_at": datetime.now(UTC), "session_ids": []}},
                upsert=True,
            )
            if before is not None:
                return self._record(before), True
            doc = await self._collection.find_one({"_id": user_id})
        return self._record(doc), False

    async def add_sessions(self, user_id: str, session_ids: Sequence[str]) -> None:
        with storage_errors("record the erasure's sessions"):
            await self._collection.update_one(
                {"_id": user_id}, {"$addToSet": {"session_ids": {"$each": list(session_ids)}}}
            )

    async def pending(self) -> list[ErasureRecord]:
        with storage_errors("read the pending erasures"):
            docs = await self._collection.find({}).sort([("started_at", 1)]).to_list()
        return [self._record(doc) for doc in docs]

    async def finish(self, user_id: str) -> None:
        with storage_errors("close the erasure"):
            await self._collection.delete_one({"_id": user_id})


class UserEraser:
    """Erases users from a session store, their data key and their memory files.

    Args:
        sessions: The session store.
        ledger: Where erasures are recorded until they finish: `MongoErasureLedger` beside
            a MongoDB store, `InMemoryErasureLedger` beside an in-memory one.
        keys: The user data keys, when the stores encrypt (`asyncsession.encryption`);
            without them the content is deleted but copies of it (backups) stay readable.
        memories: A memory store of any scope; the user's is `memories.with_scope(user_id)`.
    """

    def __init__(
        self,
        sessions: SessionRepository,
        *,
        ledger: ErasureLedger,
        keys: UserKeys | None = None,
        memories: MemoryStore | None = None,
    ) -> None:
        if isinstance(ledger, type) or not isinstance(ledger, ErasureLedger):
            raise UsageError(f"ledger must be an ErasureLedger, not {type(ledger).__name__}")
        if keys is not None and not isinstance(keys, UserKeys):
            raise UsageError(f"keys must be UserKeys, not {type(keys).__name__}")
        self._sessions = sessions
        self._ledger = ledger
        self._keys = keys
        self._memories = memories

    async def erase_user(self, user_id: str) -> ErasureReport:
        """Erase ``user_id``, or finish erasing them; runs to its end even if cancelled.

        Raises:
            StorageError: a store failed; the erasure stays in the ledger, and the next call
                (or `finish_pending`) goes on with it. If the data key was deleted before the
                failure, the user's content is already unreadable.
        """
        require_text(user_id, "user_id")
        return await shielded(self._erase(user_id))

    async def finish_pending(self) -> list[ErasureReport]:
        """Finish every erasure the ledger holds (the sweep), oldest first."""
        return [await self.erase_user(record.user_id) for record in await self._ledger.pending()]

    async def _erase(self, user_id: str) -> ErasureReport:
        record, resumed = await self._ledger.begin(user_id)
        found = await self._session_ids(user_id)
        fresh = [session_id for session_id in found if session_id not in record.session_ids]
        if fresh:
            await self._ledger.add_sessions(user_id, fresh)
        keys_deleted = 0 if self._keys is None else await self._keys.delete_key(user_id)
        session_ids = list(dict.fromkeys([*record.session_ids, *fresh]))
        for session_id in session_ids:
            await self._sessions.delete(session_id)
        entries = await self._erase_memories(user_id)
        await self._ledger.finish(user_id)
        return ErasureReport(
            user_id=user_id,
            keys_deleted=keys_deleted,
            sessions_deleted=len(session_ids),
            memory_entries_deleted=entries,
            resumed=resumed,
        )

    async def _session_ids(self, user_id: str) -> list[str]:
        try:
            return [session.id for session in await self._sessions.find_by_user_id(user_id)]
        except ContentErased:
            # A run before this one deleted the key after recording the sessions it found;
            # those are in the ledger record.
            return []

    async def _erase_memories(self, user_id: str) -> int:
        if self._memories is None:
            return 0
        store = self._memories.with_scope(user_id)
        deleted = 0
        for entry in await store.list_dir(""):
            try:
                await store.delete(entry.name)
            except MemoryStoreError as exc:
                if exc.reason != "not_found":
                    raise
                continue  # deleted meanwhile
            deleted += 1
        return deleted
