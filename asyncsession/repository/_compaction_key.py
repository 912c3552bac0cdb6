"""What identifies one compaction call, so that a retry of an applied one reports it applied.

With driver retries off, a compaction whose commit went through but whose reply was lost is
retried by the caller with the same plan and the same expected version. The version has moved
(the first attempt bumped it), so a plain compare-and-swap would answer ``False``. Every store
therefore remembers the key of its newest compaction and answers ``True`` to a call whose key
matches: the plan is in the log.

A key covers the plan's content, the expected version and the plan *object*: another worker
that computed an equal plan for the same version (a deterministic strategy) made a different
call, which lost the compare-and-swap, and still gets ``False``. So a retry is recognised when
it passes the plan object the first attempt was given, in the same process: the usual retry
loop around a call. The newest `_REMEMBERED` plan objects are kept alive for this.
"""

from __future__ import annotations

import hashlib
import json
import threading
import uuid
from collections import OrderedDict
from typing import Final

from ..plans import CompactionPlan

__all__ = ["compaction_key"]

_REMEMBERED: Final = 1024
_lock = threading.Lock()
_tokens: OrderedDict[int, tuple[CompactionPlan, str]] = OrderedDict()


def _token(plan: CompactionPlan) -> str:
    """A random token per plan object (kept alive, so its ``id`` is not reused)."""
    with _lock:
        held = _tokens.get(id(plan))
        if held is not None and held[0] is plan:
            _tokens.move_to_end(id(plan))
            return held[1]
        token = uuid.uuid4().hex
        _tokens[id(plan)] = (plan, token)
        while len(_tokens) > _REMEMBERED:
            _tokens.popitem(last=False)
        return token


def compaction_key(plan: CompactionPlan, expected_version: int) -> str:
    """A short digest of the plan (archived ids, each insert's anchor and event ids), the
    version it was planned at and the plan object; a retry of one call has the call's key."""
    shape = [
        expected_version,
        _token(plan),
        sorted(plan.archive_ids),
        [[group.before_event_id, [event.id for event in group.events]] for group in plan.inserts],
    ]
    text = json.dumps(shape, separators=(",", ":"), ensure_ascii=True)
    return hashlib.sha256(text.encode("ascii")).hexdigest()[:32]
