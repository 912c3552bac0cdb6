"""``MongoCompactionQueue``: a durable compaction queue shared by every process.

Web processes submit sessions after their turns; worker processes (`MongoCompactionWorker`, or
the ``asyncsession worker`` command) claim them. One document per session (``_id`` is the
session id), so every process that submits a session hits the same document: coalescing is the
upsert itself. The states::

    (none) --submit--> queued --claim--> running --complete--> done
                          ^                 |  \\--fail (attempts left)--> queued, due later
                          |                 |   \\--fail (no attempts left)--> failed
                          +----release------+
    done / failed --submit--> queued (attempts reset)

``due_at`` is when the job may be claimed next: the submit time, a retry's backoff, or, while it
runs, the end of its lease. So one index range, ``state in (queued, running), due_at <= now``,
finds both fresh work and work whose worker died. A claim is one ``find_one_and_update`` that
bumps ``attempts`` and stamps a fresh lease token; every later write of that run (renew,
complete, fail, release) is guarded by the token, so a worker whose lease was taken over writes
nothing. A submit while the job runs sets ``dirty``: the run then ends as ``queued`` (due at
once) instead of ``done``, so the events that arrived meanwhile get their look. All the updates
are pipelines, so each reads the document's own state in the same atomic step. The collection
writes with ``w="majority", j=True`` whatever the client's default.
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


Pipeline = Sequence[Mapping[str, Any]]


def submit_update(now: datetime) -> Pipeline:
    """Queue the job (an upsert): a queued or running job keeps its place, a finished one
    starts over; a running one is marked to run once more after its current run."""
    return [
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
    ]


def claim_filter(now: datetime) -> dict[str, Any]:
    """Jobs that may be claimed: queued and due, or running with an expired lease."""
    return {"state": {"$in": list(ACTIVE_STATES)}, "due_at": {"$lte": now}}


def claim_update(now: datetime, lease: timedelta, owner: str, token: str) -> dict[str, Any]:
    """Lease the job to ``owner`` until ``now + lease``; this run is one more attempt."""
    return {
        "$set": {
            "state": "running",
            "dirty": False,
            "due_at": now + lease,
            "lease_owner": owner,
            "lease_token": token,
            "updated_at": now,
        },
        "$inc": {"attempts": 1},
    }


_DROP_LEASE: Final = {"lease_owner": "$$REMOVE", "lease_token": "$$REMOVE"}


def complete_update(now: datetime, *, applied: bool, retention: timedelta) -> Pipeline:
    """End the run: ``done`` (kept ``retention`` long), or queued again if submitted meanwhile."""
    dirty = "$dirty"
    return [
        {
            "$set": {
                **_DROP_LEASE,
                "state": {"$cond": [dirty, "queued", "done"]},
                "attempts": {"$cond": [dirty, 0, "$attempts"]},
                "due_at": now,
                "enqueued_at": {"$cond": [dirty, now, "$enqueued_at"]},
                "dirty": False,
                "finished_at": now,
                "applied": applied,
                "last_error": "$$REMOVE",
                "updated_at": now,
                "purge_at": {"$cond": [dirty, "$$REMOVE", now + retention]},
            }
        }
    ]


def fail_update(now: datetime, error: str, retry_at: datetime | None) -> Pipeline:
    """End a failed run: due again at ``retry_at``, or ``failed`` when it is ``None``.

    A job submitted while it failed is queued at once with its attempts reset: new events are
    new work.
    """
    dirty = "$dirty"
    final = retry_at is None
    return [
        {
            "$set": {
                **_DROP_LEASE,
                "state": {"$cond": [dirty, "queued", "failed" if final else "queued"]},
                "attempts": {"$cond": [dirty, 0, "$attempts"]},
                "due_at": {"$cond": [dirty, now, now if retry_at is None else retry_at]},
                "dirty": False,
                "last_error": error,
                "updated_at": now,
                **({"finished_at": now} if final else {}),
            }
        }
    ]


def release_update(now: datetime) -> Pipeline:
    """Give the job back unfinished (a worker shutting down): due at once, the attempt uncounted."""
    return [
        {
            "$set": {
                **_DROP_LEASE,
                "state": "queued",
                "attempts": {"$max": [0, {"$subtract": ["$attempts", 1]}]},
                "due_at": now,
                "dirty": False,
                "updated_at": now,
            }
        }
    ]


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
    """A session's compaction job as the queue holds it (for inspection)."""

    model_config: ClassVar[ConfigDict] = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    """The session to compact."""
    state: JobState
    """``queued``, ``running`` (leased by a worker), ``done`` or ``failed``."""
    attempts: int
    """Runs started since the job was last queued afresh (a run whose worker died counts)."""
    submits: int
    """How many submits the job has coalesced, over its whole life."""
    rerun: bool
    """Whether it was submitted while running, so it runs once more afterwards."""
    enqueued_at: datetime | None
    """When it was last queued afresh."""
    due_at: datetime | None
    """When it may be claimed next: now, a retry's backoff, or the end of the current lease."""
    updated_at: datetime | None
    """The last change."""
    lease_owner: str | None
    """The worker holding the lease while it runs."""
    last_error: str | None
    """Why the last failed run failed."""
    finished_at: datetime | None
    """When it last finished (``done`` or ``failed``)."""
    applied: bool | None
    """Whether the last finished run changed the session (``False`` when the trigger was quiet,
    the session was gone, or another writer won the compare-and-swap)."""

    @classmethod
    def from_doc(cls, doc: JobDoc) -> CompactionJob:
        """The job of a stored document."""

        def when(key: str) -> datetime | None:
            value: Any = doc.get(key)
            return _as_utc(value) if isinstance(value, datetime) else None

        return cls(
            session_id=doc["_id"],
            state=doc.get("state", "queued"),
            attempts=doc.get("attempts", 0),
            submits=doc.get("submits", 0),
            rerun=doc.get("dirty", False),
            enqueued_at=when("enqueued_at"),
            due_at=when("due_at"),
            updated_at=when("updated_at"),
            lease_owner=doc.get("lease_owner"),
            last_error=doc.get("last_error"),
            finished_at=when("finished_at"),
            applied=doc.get("applied"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionLease:
    """One worker's claim on one job: only its holder may end the run."""

    session_id: str
    """The session to compact."""
    owner: str
    """The worker holding it."""
    token: str
    """Names this claim; every write that ends the run must show it."""
    attempt: int
    """Which attempt this run is (1 for the first)."""
    expires_at: datetime
    """Until when it holds unless renewed."""


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

    # --- lifecycle ---------------------------------------------------------------------------

    async def ensure_indexes(self) -> None:
        """Create the indexes the queue needs; safe to call any number of times."""
        self._check_open()
        with storage_errors("create the compaction queue's indexes"):
            await self._jobs.create_index([("state", 1), ("due_at", 1)])
            await self._jobs.create_index([("purge_at", 1)], expireAfterSeconds=0)

    async def aclose(self) -> None:
        """Stop using the queue; closes the client only if `from_uri` made it."""
        await super().aclose()

    async def _release(self) -> None:
        if self._client is not None:
            await self._client.close()

    # --- submitting and inspecting -----------------------------------------------------------

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
            await self._jobs.update_one(
                {"_id": session_id}, submit_update(self.clock()), upsert=True
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

    # --- the worker's side -------------------------------------------------------------------

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
                claim_filter(now),
                claim_update(now, lease, owner, token),
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
        update = complete_update(self.clock(), applied=applied, retention=self.retention)
        return await self._end(lease, update, "complete")

    async def fail(self, lease: CompactionLease, error: str, *, retry_at: datetime | None) -> bool:
        """End a failed run: due again at ``retry_at``, or ``failed`` for good when ``None``.

        Returns whether the lease was still held.
        """
        return await self._end(lease, fail_update(self.clock(), error, retry_at), "fail")

    async def release(self, lease: CompactionLease) -> bool:
        """Give the job back unfinished, due at once, this attempt not counted.

        Returns whether the lease was still held.
        """
        return await self._end(lease, release_update(self.clock()), "release")

    def _held(self, lease: CompactionLease) -> dict[str, Any]:
        return {"_id": lease.session_id, "state": "running", "lease_token": lease.token}

    async def _end(self, lease: CompactionLease, update: Any, verb: str) -> bool:
        with storage_errors(f"{verb} the compaction job of {lease.session_id!r}"):
            result = await self._jobs.update_one(self._held(lease), update)
        return result.matched_count == 1

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"<MongoCompactionQueue {state} collection={self._jobs.name!r}>"


def _is_id(value: object) -> bool:
    """Whether ``value`` is a non-empty string (callers may pass anything at run time)."""
    return isinstance(value, str) and bool(value.strip())
