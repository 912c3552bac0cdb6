"""What identifies one compaction call, so that a retry of an applied one reports it applied.

With driver retries off, a compaction whose commit went through but whose reply was lost is
retried by the caller with the same plan and the same expected version. The version has moved
(the first attempt bumped it), so a plain compare-and-swap would answer ``False``. Every store
therefore remembers the key of its newest compaction and answers ``True`` to a call whose key
matches: the plan is in the log.

A key covers the plan's content, the expected version and the plan's
[`plan_id`][asyncsession.compaction_protocols.CompactionPlan.plan_id], a random id every new
plan gets and every copy keeps. So a retry is recognised whether it passes the plan object again
or a copy of it
(a job that carried the plan to another process, which retries after the first worker died);
another worker that computed an equal plan for the same version (a deterministic strategy) made
a plan of its own, which lost the compare-and-swap, and still gets ``False``.
"""

from __future__ import annotations

import hashlib
import json

from ..compaction_protocols import CompactionPlan

__all__ = ["compaction_key"]


def compaction_key(plan: CompactionPlan, expected_version: int) -> str:
    """A short digest of the plan (its id, archived ids, each insert's anchor and event ids) and
    the version it was planned at; every retry of one call has the call's key."""
    shape = [
        expected_version,
        plan.plan_id,
        sorted(plan.archive_ids),
        [[group.before_event_id, [event.id for event in group.events]] for group in plan.inserts],
    ]
    text = json.dumps(shape, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]
