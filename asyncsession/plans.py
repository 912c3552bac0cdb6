"""Deprecated: the compaction protocols moved to `asyncsession.compaction_protocols`.

Importing this module warns with `DeprecationWarning`; it will be removed in a later release.
"""

from __future__ import annotations

import warnings

from .compaction_protocols import *  # noqa: F403
from .compaction_protocols import __all__ as __all__

warnings.warn(
    "asyncsession.plans is deprecated; import from asyncsession.compaction_protocols",
    DeprecationWarning,
    stacklevel=2,
)
