"""Deprecated: moved to `asyncsession.compaction.mongo.queue`.

Importing this module warns with `DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from .mongo.queue import *  # noqa: F403
from .mongo.queue import __all__ as __all__

warnings.warn(
    "asyncsession.compaction.mongo_queue is deprecated;"
    " import from asyncsession.compaction.mongo.queue",
    DeprecationWarning,
    stacklevel=2,
)
