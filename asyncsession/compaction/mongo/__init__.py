"""Compaction on MongoDB: a durable queue every process shares, and the workers that drain it.

- [`MongoCompactionQueue`][asyncsession.compaction.mongo.queue.MongoCompactionQueue] holds one
  job per session in one collection; web processes submit, workers claim under a lease.
- [`MongoCompactionWorker`][asyncsession.compaction.mongo.worker.MongoCompactionWorker] claims
  jobs, compacts their sessions through any `Compactor`, and renews its lease while it works.

They use the compaction types above them (triggers, strategies, `Compactor`) and are the
MongoDB half of `asyncsession.compaction`, which re-exports them.
"""

from .queue import CompactionJob, CompactionLease, MongoCompactionQueue
from .worker import MongoCompactionWorker

__all__ = [
    "CompactionJob",
    "CompactionLease",
    "MongoCompactionQueue",
    "MongoCompactionWorker",
]
