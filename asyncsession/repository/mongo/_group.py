"""Group commit: concurrent appends to one session from one process share round trips.

Concurrent batches for one session (in this process) queue up. Whoever holds the session's lock
registers the ids of every queued batch in one ``insert_many``; tries each batch that expects a
version on its own (once one of several batches expecting the same version has committed, the
others cannot, and are answered without a round trip); and commits all the batches that expect
none in one update, which moves the version once per batch. A batch with an id that is already
registered or stored below the tail (a replay or a conflict) takes the one-by-one path of
`Committer.append` instead.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from ._codec import Doc, new_token
from ._commit import Committer
from ._drawn import is_drawn
from ._hints import TailHints
from ._ids import IdRegistry
from ._layout import PACKED
from ._prepare import BATCH_INLINE_BUDGET, Prepared
from ._rollforward import RollForward
from ._store import Store, session_version

__all__ = ["GroupCommit"]

_GROUP_EVENTS: Final = 512


@dataclass(slots=True, kw_only=True, eq=False)
class _Job:
    prepared: list[Prepared]
    expected: int | None
    result: asyncio.Future[bool]

    @property
    def ids(self) -> list[str]:
        return [p.event.id for p in self.prepared]


@dataclass(slots=True, eq=False)
class _Queue:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    jobs: list[_Job] = field(default_factory=list[_Job])
    users: int = 0

    def take(self) -> list[_Job]:
        """The queued batches the next group commit carries, oldest first."""
        group: list[_Job] = []
        ids: set[str] = set()
        events = 0
        inline = 0
        for job in list(self.jobs):
            job_ids = job.ids
            size = sum(len(p.entry[PACKED]) for p in job.prepared)
            if group and (
                ids.intersection(job_ids)
                or events + len(job_ids) > _GROUP_EVENTS
                or inline + size > BATCH_INLINE_BUDGET
            ):
                continue
            group.append(job)
            ids.update(job_ids)
            events += len(job_ids)
            inline += size
            self.jobs.remove(job)
        return group


class GroupCommit:
    """Appends queued batches of fresh events in shared commits."""

    def __init__(
        self,
        store: Store,
        ids: IdRegistry,
        committer: Committer,
        roller: RollForward,
        hints: TailHints,
    ) -> None:
        self._store = store
        self._ids = ids
        self._committer = committer
        self._roller = roller
        self._hints = hints
        self._queues: dict[str, _Queue] = {}

    async def append(
        self, session_id: str, prepared: Sequence[Prepared], expected_version: int | None
    ) -> bool:
        """Append a batch, sharing round trips with the batches other tasks append concurrently."""
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _Queue()
        job = _Job(
            prepared=list(prepared),
            expected=expected_version,
            result=asyncio.get_running_loop().create_future(),
        )
        queue.jobs.append(job)
        queue.users += 1
        try:
            while not job.result.done():
                async with queue.lock:
                    if job.result.done():
                        break
                    commits: list[tuple[Doc, int]] = []
                    await self._run(session_id, queue.take(), commits)
                    # Still under the lock: one roll-forward at a time per session and process,
                    # which keeps concurrent rollers from undoing each other's work.
                    for doc, added in commits:
                        await self._roller.after_commit(
                            session_id, doc, added, False, registered=True
                        )
        finally:
            queue.users -= 1
            if not queue.users:
                self._queues.pop(session_id, None)
        return job.result.result()

    async def _run(
        self, session_id: str, group: list[_Job], commits: list[tuple[Doc, int]]
    ) -> None:
        token = new_token()
        try:
            ids = [i for job in group for i in job.ids]
            taken = set(await self._ids.register(session_id, ids, token))
            # A drawn id let go of by the registry is in the events collection (`_ids`):
            # its batch takes the one-by-one path too, which tells a replay from a conflict.
            drawn = [i for i in ids if i not in taken and is_drawn(i)]
            stored = set(await self._ids.stored_below(drawn))
            alone = [job for job in group if taken.intersection(job.ids) or stored & set(job.ids)]
            rest = [job for job in group if job not in alone]
            unused = [i for job in alone for i in job.ids if i not in taken]
            outcome: dict[int, bool] = {}
            plain: list[_Job] = []
            for job in rest:
                if job.expected is None:
                    plain.append(job)
                elif job.expected in outcome:
                    # The first batch expecting this version committed (so this one cannot),
                    # or found the version moved on: either way this one fails.
                    job.result.set_result(False)
                    unused += job.ids
                else:
                    result = await self._try_versioned(session_id, job, token, commits)
                    if result is None:
                        alone.append(job)
                        unused += job.ids
                    else:
                        outcome[job.expected] = result
                        job.result.set_result(result)
                        if not result:
                            unused += job.ids
            if plain:
                fresh = [p for job in plain for p in job.prepared]
                doc = await self._committer.commit(
                    session_id, fresh, token, None, None, False, batches=len(plain)
                )
                if doc is None:
                    unused += [i for job in plain for i in job.ids]
                    alone += plain
                else:
                    for job in plain:
                        job.result.set_result(True)
                    commits.append((doc, len(fresh)))
            await self._ids.release(session_id, unused, token, written=False)
            for job in alone:
                try:
                    done, _ = await self._committer.append(session_id, job.prepared, job.expected)
                except Exception as exc:
                    job.result.set_exception(exc)
                else:
                    job.result.set_result(done)
        except Exception as exc:
            for job in group:
                if not job.result.done():
                    job.result.set_exception(exc)
        finally:
            for job in group:
                if not job.result.done():
                    job.result.cancel()

    async def _try_versioned(
        self, session_id: str, job: _Job, token: str, commits: list[tuple[Doc, int]]
    ) -> bool | None:
        """Commit one versioned batch of fresh ids: ``True``, ``False`` for a stale version, or
        ``None`` when it must take the one-by-one path."""
        committer = self._committer
        doc = await committer.commit(session_id, job.prepared, token, job.expected, None, False)
        if doc is None:
            current = await session_version(self._store, session_id)
            if current is not None and current != job.expected:
                return False
            if current is None or self._hints.room(session_id, len(job.prepared)):
                return None
            # A guarded commit without post-image found the tail fuller than hinted: commit
            # with the post-image, which rolls forward after.
            doc = await committer.commit(session_id, job.prepared, token, job.expected, None, False)
            if doc is None:
                return None
        commits.append((doc, len(job.prepared)))
        return True
