"""The compaction job document and the updates that move it between states.

One document per session (``_id`` is the session id), so every process that submits a session
hits the same document: coalescing is the upsert itself. The states::

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
once) instead of ``done``, so the events that arrived meanwhile get their look.

Times come from the caller's clock (one clock per deployment, kept in sync by NTP; leases are
seconds long, so skew well below that is harmless). All the updates are pipelines, so each reads
the document's own state in the same atomic step.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, Final, Literal, Required, TypedDict

__all__ = [
    "ACTIVE_STATES",
    "JobDoc",
    "JobState",
    "claim_filter",
    "claim_update",
    "complete_update",
    "fail_update",
    "release_update",
    "submit_update",
]

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
