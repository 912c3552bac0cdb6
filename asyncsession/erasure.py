"""Erase a user: their data key first, then their sessions, events and memories.

```python
eraser = UserEraser(repository, ledger=MongoErasureLedger(db), keys=keys, memories=memories)
await eraser.erase_user("alice")      # final from the moment her data key is deleted
await eraser.finish_pending()         # the sweep: finishes erasures a crash interrupted
```

The session stores erase through the same class: `MongoSessionRepository.erase_user` and
`InMemorySessionRepository.erase_user` run a `UserEraser` over the store, its ledger and its
data keys.

An erasure is a fixed sequence of steps over the stores' public operations:

1. **record** the user in the ledger (durably, before anything is deleted), with the ids of
   their sessions (read while their content can still be read: a session's metadata may be
   encrypted);
2. **delete the user's data key** (`UserKeys.delete_key`): from here on nothing of theirs can
   be decrypted, whatever a later step does, in the database, its replicas and its backups;
3. **delete their sessions** with their events, their offloaded bodies and the leases they hold
   (`SessionRepository.delete`);
4. **delete their memory files** (the memory store bound to their scope);
5. **close** the ledger record.

Every step can be run again, so an erasure that was interrupted (a crash, ``kill -9``, a lost
server) is finished by the next `UserEraser.erase_user` of that user or by
`UserEraser.finish_pending`, which runs every erasure the ledger still holds. A cancelled
erasure runs to its end anyway.
"""

from .repository import (
    ErasureLedger,
    ErasureReport,
    InMemoryErasureLedger,
    MongoErasureLedger,
    UserEraser,
)

__all__ = [
    "ErasureLedger",
    "ErasureReport",
    "InMemoryErasureLedger",
    "MongoErasureLedger",
    "UserEraser",
]
