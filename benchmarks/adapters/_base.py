"""What every system under test provides to the scenarios, and the pieces the Mongo ones share."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from pymongo import AsyncMongoClient

from .._commands import CommandCounter
from .._workload import Message, Turn

__all__ = [
    "AppendOutcome",
    "MongoStoreBase",
    "SessionStore",
    "StorageStats",
    "StoreUnavailable",
    "Target",
    "Writer",
]


class StoreUnavailable(RuntimeError):
    """The system cannot run here (a peer package or our Mongo store is not installed)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Target:
    """An empty database on a server, for one measurement cell."""

    uri: str
    """The connection string, URI options included."""
    db_name: str
    """A database nobody else uses."""
    server_pid: int | None = None
    """The local test server's process id, for CPU accounting; ``None`` for ``MONGODB_URI``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AppendOutcome:
    """What one contended append ended with, as the writing application sees it."""

    stored: bool
    """Whether the writer believes the message is stored."""
    conflicts: int = 0
    """How often the writer reloaded and retried after a conflict signal."""
    error: str | None = None
    """The exception class name when the writer gave the message up."""


@dataclass(frozen=True, slots=True, kw_only=True)
class StorageStats:
    """``collStats`` of every collection of the system's database."""

    collections: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per collection: ``count``, ``size`` (data bytes), ``storageSize``, ``totalIndexSize``."""

    @property
    def data_bytes(self) -> int:
        """Uncompressed document bytes over all collections."""
        return sum(c["size"] for c in self.collections.values())

    @property
    def index_bytes(self) -> int:
        """Index bytes over all collections."""
        return sum(c["totalIndexSize"] for c in self.collections.values())

    @property
    def documents(self) -> int:
        """Documents over all collections."""
        return sum(c["count"] for c in self.collections.values())


class Writer(Protocol):
    """One of several concurrent writers of a session, holding whatever handle its API gives."""

    async def append(self, message: Message) -> AppendOutcome:
        """Append one message the way an application using this API would."""
        ...


class SessionStore(Protocol):
    """A session store driven through its own public API."""

    name: ClassVar[str]
    """The system's row label."""
    writer_policies: ClassVar[tuple[str, ...]]
    """How concurrent writers can use the API; the contention scenario runs each."""
    counter: CommandCounter | None
    """Counts the commands of the client the system uses; ``None`` without a database."""

    async def start(self) -> None:
        """Connect and create indexes (never timed)."""
        ...

    async def aclose(self) -> None:
        """Release clients."""
        ...

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """Create the session holding ``messages`` (possibly none), in the store's own format."""
        ...

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """Load what a turn loads: the newest ``size`` messages, oldest first (texts)."""
        ...

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, then persist the user message and the reply; return retries."""
        ...

    async def read_all(self, session_id: str) -> list[str]:
        """Every stored message text, in the order the store returns them."""
        ...

    async def open_writer(self, session_id: str, policy: str, window: int) -> Writer:
        """A concurrent writer of the session that has loaded it (not timed)."""
        ...

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Persist ``turn``, lose one acknowledgement, retry as an app would; return errors."""
        ...

    async def storage(self) -> StorageStats | None:
        """What the system's database holds now; ``None`` without a database."""
        ...

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """Run the system's compaction on the session; ``None`` when it has none."""
        ...

    def describe(self) -> dict[str, Any]:
        """Versions and settings for the raw results."""
        ...


class MongoStoreBase:
    """An uncounted admin client for seeding and ``collStats``, beside the counted one."""

    def __init__(self, target: Target) -> None:
        self.target = target
        self.counter: CommandCounter | None = CommandCounter()
        self._admin: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(target.uri, tz_aware=True)

    @property
    def admin_db(self) -> Any:
        """The system's database on the uncounted client."""
        return self._admin[self.target.db_name]

    async def insert_chunks(self, collection: str, docs: Sequence[dict[str, Any]]) -> None:
        """Bulk-insert ``docs`` in order, 5,000 at a time, on the uncounted client."""
        for start in range(0, len(docs), 5000):
            await self.admin_db[collection].insert_many(docs[start : start + 5000], ordered=True)

    async def storage(self) -> StorageStats | None:
        """``collStats`` of every collection in the database."""
        stats: dict[str, dict[str, int]] = {}
        for name in sorted(await self.admin_db.list_collection_names()):
            raw = await self.admin_db.command("collStats", name)
            stats[name] = {
                key: int(raw.get(key, 0))
                for key in ("count", "size", "storageSize", "totalIndexSize")
            }
        return StorageStats(collections=stats)

    async def close_admin(self) -> None:
        """Close the admin client."""
        await self._admin.close()
