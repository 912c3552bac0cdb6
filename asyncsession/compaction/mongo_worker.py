"""Deprecated: moved to `asyncsession.compaction.mongo.worker`.

Importing this module warns with `DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from .mongo.worker import *  # noqa: F403
from .mongo.worker import __all__ as __all__

warnings.warn(
    "asyncsession.compaction.mongo_worker is deprecated;"
    " import from asyncsession.compaction.mongo.worker",
    DeprecationWarning,
    stacklevel=2,
)
