"""``MongoCompactionQueue``: a durable compaction queue shared by every process.

One document per session (``_id`` is the session id), so a submit from any process lands on one
job: coalescing is the upsert itself. Every update is one pipeline that reads the job's own state
in the same atomic step, and every write that ends a run is guarded by its lease token. The
states, leases, retries and wake-ups are described on the compaction internals page.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar, Final, Literal, Required, Self, TypedDict, cast

from pydantic import BaseModel, ConfigDict
from pymongo import AsyncMongoClient, ReturnDocument, WriteConcern
from pymongo.asynchronous.change_stream import AsyncChangeStream
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import OperationFailure

from .._checks import require_database, require_text, require_type
from .._compaction_pass import check_trigger
from .._lifecycle import Closable
from .._pymongo_errors import storage_errors
from ..compaction_protocols import TriggerLike
from ..exceptions import UsageError

JobState = Literal["queued", "running", "done", "failed"]
"""Where a compaction job is: waiting, leased by a worker, finished, or given up on."""

ACTIVE_STATES: Final[tuple[JobState, ...]] = ("queued", "running")

_IS_ACTIVE: Final = {"$in": ["$state", list(ACTIVE_STATES)]}
_IS_RUNNING: Final = {"$eq": ["$state", "running"]}


class JobDoc(TypedDict, total=False):
    """A compaction job as stored."""

    _id: Required[str]
    state: JobState
    dirty: bool
    attempts: int
    submits: int
    enqueued_at: datetime
    due_at: datetime
    updated_at: datetime
    lease_owner: str
    lease_token: str
    last_error: str
    finished_at: datetime
    applied: bool
    purge_at: datetime


DEFAULT_COLLECTION: Final = "compaction_jobs"
DEFAULT_RETENTION: Final = timedelta(days=1)
_WRITE_CONCERN: Final = WriteConcern("majority", j=True)
_WATCH_AWAIT_MS: Final = 1000
_NO_CHANGE_STREAMS: Final = frozenset({20, 115, 40573})
"""IllegalOperation, CommandNotSupported, and "$changeStream is only supported on replica sets"."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _as_utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class CompactionJob(BaseModel):
    """A session's compaction job as the queue holds it, for inspection: its ``state``
    (``queued``, ``running``, ``done``, ``failed``), ``attempts`` since it was last queued
    afresh (a run whose worker died counts), ``submits`` coalesced over its life, ``rerun``
    (submitted while running), ``due_at`` (when it may be claimed next), the ``lease_owner``
    while it runs, the ``last_error``, and whether the last finished run was ``applied``."""

    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    state: JobState
    attempts: int
    submits: int
    rerun: bool
    enqueued_at: datetime | None
    due_at: datetime | None
    updated_at: datetime | None
    lease_owner: str | None
    last_error: str | None
    finished_at: datetime | None
    applied: bool | None

    @classmethod
    def from_doc(cls, doc: JobDoc) -> CompactionJob:
        """The job of a stored document."""
        times = ("enqueued_at", "due_at", "updated_at", "finished_at")
        when: dict[str, Any] = {key: doc.get(key) for key in times}
        return cls(
            session_id=doc["_id"],
            state=doc.get("state", "queued"),
            attempts=doc.get("attempts", 0),
            submits=doc.get("submits", 0),
            rerun=doc.get("dirty", False),
            lease_owner=doc.get("lease_owner"),
            last_error=doc.get("last_error"),
            applied=doc.get("applied"),
            **{k: _as_utc(v) if isinstance(v, datetime) else None for k, v in when.items()},
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionLease:
    """One worker's claim on one job (``attempt`` 1 for the first run): every write that ends
    the run must show its ``token``, so only its holder can."""

    session_id: str
    owner: str
    token: str
    attempt: int
    expires_at: datetime


class MongoCompactionQueue(Closable):
    """Compaction jobs in a MongoDB collection, shared by every process of a deployment.

    Args:
        database: a PyMongo ``AsyncDatabase``; borrowed, `aclose` never closes its client.
        collection: the name of the jobs collection.
        trigger: the trigger a submitter may ask first to skip a pointless submit (the turn
            advisor does); the workers decide with their own.
        retention: how long a ``done`` job stays visible.
        clock: the time source (UTC-aware); tests pass a fake one.

    Raises:
        UsageError: ``database`` is not an async database (a URI string: use `from_uri`),
            another argument is not of its type, or ``retention`` is not positive.
    """

    _keep_using: ClassVar[str] = "the queue"

    def __init__(
        self,
        database: Any,
        *,
        collection: str = DEFAULT_COLLECTION,
        trigger: TriggerLike | None = None,
        retention: timedelta = DEFAULT_RETENTION,
        clock: Callable[[], datetime] | None = None,
    ) -> None:
        require_database(database, "database", "MongoCompactionQueue")
        require_text(collection, "collection")
        if trigger is not None:
            check_trigger(trigger, "trigger")
        require_type(retention, timedelta, "retention", "a timedelta")
        if retention <= timedelta(0):
            raise UsageError(f"retention must be positive, not {retention!r}")
        self._trigger = trigger
        self.retention = retention
        """How long a ``done`` job stays visible."""
        self.clock: Callable[[], datetime] = clock or _utc_now
        """The time source."""
        self._jobs: AsyncCollection[JobDoc] = database.get_collection(
            collection, write_concern=_WRITE_CONCERN
        )
        self._client: AsyncMongoClient[Any] | None = None

    @classmethod
    def from_uri(cls, uri: str, db_name: str, **options: Any) -> Self:
        """A queue with a client of its own, which `aclose` closes.

        ``options`` are this class's keyword arguments; the rest go to ``AsyncMongoClient``
        (``tz_aware`` defaults to ``True``).
        """
        names = ("collection", "trigger", "retention", "clock")
        own: dict[str, Any] = {name: options.pop(name) for name in names if name in options}
        client_options: dict[str, Any] = {"tz_aware": True, **options}
        client: AsyncMongoClient[Any] = AsyncMongoClient(uri, **client_options)
        queue = cls(client[db_name], **own)
        queue._client = client
        return queue

    @property
    def trigger(self) -> TriggerLike | None:
        """The trigger a submitter may ask first (``None``: always submit)."""
        return self._trigger

    @property
    def collection_name(self) -> str:
        """The name of the jobs collection."""
        return self._jobs.name

    async def ensure_indexes(self) -> None:
        """Create the indexes the queue needs; safe to call any number of times."""
        self._check_open()
        with storage_errors("create the compaction queue's indexes"):
            await self._jobs.create_index([("state", 1), ("due_at", 1)])
            await self._jobs.create_index([("purge_at", 1)], expireAfterSeconds=0)

    async def _release(self) -> None:
        if self._client is not None:
            await self._client.close()

    async def submit(self, session_id: str) -> None:
        """Queue ``session_id`` for compaction: one upsert, coalesced across every process.

        A queued session stays queued once (a retry that is backing off keeps its time); a
        session being compacted is compacted once more afterwards; a ``done`` or ``failed`` one
        is queued afresh with its attempts reset.

        Raises:
            UsageError: the id is empty, or the queue is closed.
            StorageError: the database failed.
        """
        self._check_open()
        if not _is_id(session_id):
            raise UsageError("session_id must be a non-empty string")
        with storage_errors(f"queue session {session_id!r} for compaction"):
            now = self.clock()
            await self._jobs.update_one(
                {"_id": session_id},
                [
                    {
                        "$set": {
                            "dirty": _IS_RUNNING,
                            "state": {"$cond": [_IS_RUNNING, "running", "queued"]},
                            "attempts": {"$cond": [_IS_ACTIVE, "$attempts", 0]},
                            "due_at": {"$cond": [_IS_ACTIVE, "$due_at", now]},
                            "enqueued_at": {"$cond": [_IS_ACTIVE, "$enqueued_at", now]},
                            "submits": {"$add": [{"$ifNull": ["$submits", 0]}, 1]},
                            "updated_at": now,
                            "purge_at": "$$REMOVE",
                        }
                    }
                ],
                upsert=True,
            )

    async def get_job(self, session_id: str) -> CompactionJob | None:
        """The job of ``session_id``, or ``None`` if it has none (never queued, or purged)."""
        self._check_open()
        with storage_errors(f"read the compaction job of {session_id!r}"):
            doc = await self._jobs.find_one({"_id": session_id})
        return None if doc is None else CompactionJob.from_doc(doc)

    async def list_jobs(
        self, state: JobState | None = None, *, limit: int = 100
    ) -> list[CompactionJob]:
        """Up to ``limit`` jobs (of one ``state``, or all), the soonest due first."""
        self._check_open()
        query: dict[str, Any] = {} if state is None else {"state": state}
        with storage_errors("list compaction jobs"):
            cursor = self._jobs.find(query).sort([("due_at", 1), ("_id", 1)]).limit(limit)
            docs = await cursor.to_list()
        return [CompactionJob.from_doc(doc) for doc in docs]

    async def count_jobs(self) -> dict[JobState, int]:
        """How many jobs are in each state."""
        self._check_open()
        counts: dict[JobState, int] = {"queued": 0, "running": 0, "done": 0, "failed": 0}
        with storage_errors("count compaction jobs"):
            rows: Sequence[object] = await (
                await self._jobs.aggregate([{"$group": {"_id": "$state", "n": {"$sum": 1}}}])
            ).to_list()
        for row in rows:
            group = cast("Mapping[str, Any]", row)  # a $group row, not a job document
            if group["_id"] in counts:
                counts[group["_id"]] = int(group["n"])
        return counts

    async def next_due(self) -> datetime | None:
        """When the soonest queued or running job becomes claimable; ``None`` if there is none."""
        self._check_open()
        with storage_errors("read the next compaction job"):
            doc = await self._jobs.find_one(
                {"state": {"$in": ["queued", "running"]}},
                projection={"due_at": 1},
                sort=[("due_at", 1)],
            )
        value: Any = None if doc is None else doc.get("due_at")
        return _as_utc(value) if isinstance(value, datetime) else None

    async def watch(self) -> AsyncChangeStream[JobDoc] | None:
        """A change stream of jobs becoming claimable, or ``None`` where the server has none.

        It reports inserts and changes into ``queued`` (a submit, a retry, a released or re-run
        job); a lease that expires is no change, so a worker also wakes at the soonest due time
        (`next_due`). Standalone
        servers refuse change streams: then this returns ``None`` and workers poll.

        Raises:
            StorageError: the database failed otherwise.
        """
        self._check_open()
        pipeline = [
            {
                "$match": {
                    "$or": [
                        {"operationType": {"$in": ["insert", "replace"]}},
                        {"updateDescription.updatedFields.state": "queued"},
                    ]
                }
            }
        ]
        with storage_errors("watch the compaction queue"):
            try:
                return await self._jobs.watch(pipeline, max_await_time_ms=_WATCH_AWAIT_MS)
            except OperationFailure as exc:
                if exc.code in _NO_CHANGE_STREAMS:
                    return None
                raise

    async def claim(self, owner: str, lease: timedelta) -> CompactionLease | None:
        """Lease the soonest due job to ``owner``; ``None`` when nothing is due.

        A job whose previous lease expired (its worker died) is claimed like a queued one.
        """
        self._check_open()
        now = self.clock()
        token = secrets.token_hex(12)
        with storage_errors("claim a compaction job"):
            doc = await self._jobs.find_one_and_update(
                {"state": {"$in": list(ACTIVE_STATES)}, "due_at": {"$lte": now}},
                {
                    "$set": {
                        "state": "running",
                        "dirty": False,
                        "due_at": now + lease,
                        "lease_owner": owner,
                        "lease_token": token,
                        "updated_at": now,
                    },
                    "$inc": {"attempts": 1},
                },
                sort=[("due_at", 1)],
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            return None
        return CompactionLease(
            session_id=doc["_id"],
            owner=owner,
            token=token,
            attempt=doc.get("attempts", 1),
            expires_at=now + lease,
        )

    async def renew(self, lease: CompactionLease, length: timedelta) -> CompactionLease | None:
        """Extend ``lease`` to ``now + length``; ``None`` if it was lost to another worker."""
        now = self.clock()
        with storage_errors(f"renew the compaction lease of {lease.session_id!r}"):
            result = await self._jobs.update_one(
                self._held(lease), {"$set": {"due_at": now + length, "updated_at": now}}
            )
        if result.matched_count == 0:
            return None
        return CompactionLease(
            session_id=lease.session_id,
            owner=lease.owner,
            token=lease.token,
            attempt=lease.attempt,
            expires_at=now + length,
        )

    async def complete(self, lease: CompactionLease, *, applied: bool) -> bool:
        """End the run as done (or queued again if it was submitted meanwhile).

        Returns whether the lease was still held (if not, nothing was written).
        """
        now, dirty = self.clock(), "$dirty"
        return await self._end(
            lease,
            "complete",
            now,
            state={"$cond": [dirty, "queued", "done"]},
            attempts={"$cond": [dirty, 0, "$attempts"]},
            due_at=now,
            enqueued_at={"$cond": [dirty, now, "$enqueued_at"]},
            finished_at=now,
            applied=applied,
            last_error="$$REMOVE",
            purge_at={"$cond": [dirty, "$$REMOVE", now + self.retention]},
        )

    async def fail(self, lease: CompactionLease, error: str, *, retry_at: datetime | None) -> bool:
        """End a failed run: due again at ``retry_at``, or ``failed`` for good when ``None``
        (queued at once, attempts reset, if it was submitted meanwhile: new events are new
        work). Returns whether the lease was still held.
        """
        now, dirty = self.clock(), "$dirty"
        return await self._end(
            lease,
            "fail",
            now,
            state={"$cond": [dirty, "queued", "failed" if retry_at is None else "queued"]},
            attempts={"$cond": [dirty, 0, "$attempts"]},
            due_at={"$cond": [dirty, now, now if retry_at is None else retry_at]},
            last_error=error,
            **({"finished_at": now} if retry_at is None else {}),
        )

    async def release(self, lease: CompactionLease) -> bool:
        """Give the job back unfinished, due at once, this attempt not counted.

        Returns whether the lease was still held.
        """
        now = self.clock()
        return await self._end(
            lease,
            "release",
            now,
            state="queued",
            attempts={"$max": [0, {"$subtract": ["$attempts", 1]}]},
            due_at=now,
        )

    def _held(self, lease: CompactionLease) -> dict[str, Any]:
        return {"_id": lease.session_id, "state": "running", "lease_token": lease.token}

    async def _end(self, lease: CompactionLease, verb: str, now: datetime, **fields: Any) -> bool:
        """End the run held by ``lease`` with one pipeline update (it reads the job's own
        ``dirty`` in the same atomic step); whether the lease was still held."""
        update = [
            {
                "$set": {
                    "lease_owner": "$$REMOVE",
                    "lease_token": "$$REMOVE",
                    **fields,
                    "dirty": False,
                    "updated_at": now,
                }
            }
        ]
        with storage_errors(f"{verb} the compaction job of {lease.session_id!r}"):
            result = await self._jobs.update_one(self._held(lease), update)
        return result.matched_count == 1

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MongoCompactionQueue {state} collection={self._jobs.name!r}>"


def _is_id(value: object) -> bool:
    """Whether ``value`` is a non-empty string (callers may pass anything at run time)."""
    return isinstance(value, str) and bool(value.strip())
