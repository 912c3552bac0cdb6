"""Session stores: the `SessionRepository` base class, the in-memory default, and MongoDB.

Large bodies (see `OffloadedBody`): an event whose content is over a store's
``offload_threshold`` is kept whole apart from the log, which holds a preview of it. Erasure
(`UserEraser`, documented in `asyncsession.erasure`) lives here so that the stores erase through
it.
"""

from ._erasure import (
    ErasureLedger,
    ErasureReport,
    InMemoryErasureLedger,
    MongoErasureLedger,
    UserEraser,
)
from ._offload import (
    DEFAULT_OFFLOAD_THRESHOLD,
    DEFAULT_PREVIEW_CHARS,
    OFFLOADED,
    BodyPage,
    OffloadedBody,
)
from ._protocol import Lease, SessionRepository, SessionSnapshot
from .in_memory import InMemorySessionRepository
from .mongo import MongoSessionRepository

__all__ = [
    "DEFAULT_OFFLOAD_THRESHOLD",
    "DEFAULT_PREVIEW_CHARS",
    "OFFLOADED",
    "BodyPage",
    "ErasureLedger",
    "ErasureReport",
    "InMemoryErasureLedger",
    "InMemorySessionRepository",
    "Lease",
    "MongoErasureLedger",
    "MongoSessionRepository",
    "OffloadedBody",
    "SessionRepository",
    "SessionSnapshot",
    "UserEraser",
]
