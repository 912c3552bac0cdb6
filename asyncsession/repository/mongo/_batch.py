"""Reads and commits of different sessions that are due at once, sent together as one command.

Every command costs a fixed amount of CPU in the client (building and encoding it, a trip
through the driver's connection pool) and in the server (parsing, planning, a cursor, for a
write the write concern), whatever it carries. An async web app reads and appends to many
sessions at once, so the session document reads of windows (`FindBatcher`) and the hot-path
commits (a guarded ``update_one`` with no post-image, see `_commit`; `UpdateBatcher`) go
through a batcher:

- When fewer than `MAX_IN_FLIGHT` commands of its kind are on the wire, a caller sends its own
  at once, as a command of its own. One caller alone never waits for anybody, and there is no
  timer.
- Otherwise the calls that come due are queued, and go together as one command as soon as one
  on the wire is answered, and so on while more queue up: reads with the same
  projection as one ``find`` of ``_id: {$in: [...]}``, commits as one unordered ``update`` of a
  statement each. A batch has at most `MAX_BATCH` calls and never two for one session (the
  second waits for the next batch), so each call sees what the one before it did.

A read that is queued is sent after the call was made, so it sees every write acknowledged
before it. The server answers a batch of updates with how many statements matched, not which
ones. All matched: each caller learns it committed. Fewer: each learns it did not, which is
always safe, because a commit is guarded by its ids not being in the tail yet: a caller told
"no" whose commit did land finds its ids in the tail when it reads after the failed guard, as
after an acknowledgement lost on the wire, and reports its events stored once. A failed guard is
rare with one writer per session at a time (the tail hints were stale); it costs those callers
the read.

Callers are the repository's shielded writes and its reads: a call whose caller is cancelled
while it is queued is still sent with its batch (a write the caller started is finished).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from pymongo import UpdateOne
from pymongo.errors import BulkWriteError, WriteConcernError, WriteError

from ._codec import Doc
from ._layout import ID
from ._store import Collection

__all__ = ["MAX_BATCH", "MAX_IN_FLIGHT", "FindBatcher", "UpdateBatcher"]

MAX_BATCH: Final = 64
"""The most calls one batched command carries."""
MAX_IN_FLIGHT: Final = 2
"""The most commands of one kind a batcher has on the wire at once. One batches the most, but
holds every call back while one command is on the wire; ad hoc on the test server, advisor
turns of 8 sessions at once ran about 8 % slower with one than with no batching, and about 4 %
with two, while plain turns of 32 sessions ran 13-20 % faster with either."""

_R = TypeVar("_R")


def _future() -> asyncio.Future[object]:
    return asyncio.get_running_loop().create_future()


@dataclass(slots=True)
class _Due:
    """A call waiting for the next batch."""

    session_id: object
    kind: Hashable
    """Calls batch together only with calls of the same kind (a read's projection)."""
    request: tuple[Doc, ...]
    done: asyncio.Future[object] = field(default_factory=_future)


class _Batcher(Generic[_R]):
    """Queues calls while one of its kind is on the wire and sends them in batches.

    ``collection`` gives the collection at each call (the store's, which tests may wrap).
    """

    def __init__(
        self,
        collection: Callable[[], Collection],
        *,
        max_batch: int = MAX_BATCH,
        max_in_flight: int = MAX_IN_FLIGHT,
    ) -> None:
        self._collection_of = collection
        self._max_batch = max_batch
        self._max_in_flight = max_in_flight
        self._in_flight = 0
        self._due: list[_Due] = []
        self._senders: set[asyncio.Task[None]] = set()
        self.batches: int = 0
        """How many commands of two calls or more were sent (for tests)."""

    async def _call(self, session_id: object, request: tuple[Doc, ...]) -> _R:
        if self._in_flight >= self._max_in_flight:
            due = _Due(session_id, self._kind(request), request)
            self._due.append(due)
            return await due.done  # type: ignore[return-value]  # set by `_send` to an _R
        self._in_flight += 1
        try:
            return await self._alone(session_id, request)
        finally:
            self._in_flight -= 1
            self._drain()

    def _drain(self) -> None:
        """A command was answered: send what came due meanwhile, as one command."""
        if self._due and self._in_flight < self._max_in_flight:
            self._in_flight += 1
            sender = asyncio.get_running_loop().create_task(self._send_due(self._take()))
            self._senders.add(sender)
            sender.add_done_callback(self._senders.discard)

    async def _send_due(self, batch: list[_Due]) -> None:
        try:
            await self._send(batch)
        except Exception as exc:  # a connection or server error: every caller gets it
            for due in batch:
                _fail(due, exc)
        finally:  # settled, failed, or the sender was cancelled (its loop is closing): so are they
            for due in batch:
                due.done.cancel()
            self._in_flight -= 1
            self._drain()

    def _take(self) -> list[_Due]:
        """The oldest due calls of the oldest's kind, one per session, `MAX_BATCH` at most."""
        kind = self._due[0].kind
        batch: list[_Due] = []
        rest: list[_Due] = []
        sessions: set[object] = set()
        for due in self._due:
            if len(batch) < self._max_batch and due.kind == kind and due.session_id not in sessions:
                sessions.add(due.session_id)
                batch.append(due)
            else:
                rest.append(due)
        self._due = rest
        return batch

    @property
    def _collection(self) -> Collection:
        return self._collection_of()

    def _kind(self, request: tuple[Doc, ...]) -> Hashable:
        """What a call must share with others to go in one batch with them."""
        return None

    async def _alone(self, session_id: object, request: tuple[Doc, ...]) -> _R:
        """One call sent as a command of its own."""
        raise NotImplementedError

    async def _send(self, batch: list[_Due]) -> None:
        """Send a batch and settle each of its calls."""
        raise NotImplementedError


class UpdateBatcher(_Batcher[bool]):
    """Guarded updates of one document each, batched across sessions (see the module)."""

    short: int = 0
    """How many batches of updates did not match in full (for tests)."""

    async def update_one(self, guard: Doc, update: Doc) -> bool:
        """Apply ``update`` to the document ``guard`` matches (by ``_id``); whether it matched.

        The driver's errors are raised as it raised them; a batch's error for this call's
        statement as a `WriteError`.
        """
        return await self._call(guard[ID], (guard, update))

    async def _alone(self, session_id: object, request: tuple[Doc, ...]) -> bool:
        guard, update = request
        return (await self._collection.update_one(guard, update)).matched_count > 0

    async def _send(self, batch: list[_Due]) -> None:
        if len(batch) == 1:
            _settle(batch[0], await self._alone(batch[0].session_id, batch[0].request))
            return
        self.batches += 1
        requests = [UpdateOne(due.request[0], due.request[1]) for due in batch]
        try:
            result = await self._collection.bulk_write(requests, ordered=False)
        except BulkWriteError as exc:
            _settle_failed(batch, exc)
            return
        matched_all = result.matched_count == len(batch)
        if not matched_all:
            self.short += 1
        for due in batch:
            _settle(due, matched_all)


class FindBatcher(_Batcher[Doc | None]):
    """Reads of one document by ``_id``, batched across sessions by projection."""

    async def find_one(self, session_id: str, projection: Doc | None = None) -> Doc | None:
        """The document whose ``_id`` is ``session_id``, projected; ``None`` if there is none."""
        return await self._call(session_id, () if projection is None else (projection,))

    def _kind(self, request: tuple[Doc, ...]) -> Hashable:
        return repr(request)  # the projection

    async def _alone(self, session_id: object, request: tuple[Doc, ...]) -> Doc | None:
        doc: Doc | None = await self._collection.find_one(
            {ID: session_id}, request[0] if request else None
        )
        return doc

    async def _send(self, batch: list[_Due]) -> None:
        projection = batch[0].request[0] if batch[0].request else None
        ids = [due.session_id for due in batch]
        if len(batch) > 1:
            self.batches += 1
        cursor = self._collection.find({ID: {"$in": ids}}, projection)
        found = {doc[ID]: doc for doc in await cursor.to_list(None)}
        for due in batch:
            _settle(due, found.get(due.session_id))


def _settle(due: _Due, value: object) -> None:
    if not due.done.done():
        due.done.set_result(value)


def _fail(due: _Due, exc: BaseException) -> None:
    if not due.done.done():
        due.done.set_exception(exc)


def _settle_failed(batch: list[_Due], exc: BulkWriteError) -> None:
    """A batch of updates some of whose statements failed: each of those gets its error, the
    others a write concern error if there was one, and else "did not match" (unknown)."""
    details: Doc = dict(exc.details)
    errors: list[Doc] = details.get("writeErrors", [])
    failed = {int(error["index"]): error for error in errors}
    concern: list[Doc] = details.get("writeConcernErrors", [])
    for index, due in enumerate(batch):
        error = failed.get(index)
        if error is not None:
            _fail(due, WriteError(error.get("errmsg", "write error"), error.get("code"), error))
        elif concern:
            first = concern[0]
            message = first.get("errmsg", "write concern error")
            _fail(due, WriteConcernError(message, first.get("code"), first))
        else:
            _settle(due, False)
