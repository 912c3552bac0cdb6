"""Deprecated: the in-memory store moved to `asyncsession.repository.in_memory`.

Importing this module warns with `DeprecationWarning`; it will be removed in a later release.
`InMemorySessionRepository` is still importable from `asyncsession.repository` and `asyncsession`.
"""

from __future__ import annotations

import warnings

from .in_memory import *  # noqa: F403
from .in_memory import __all__ as __all__

warnings.warn(
    "asyncsession.repository.memory is deprecated; import from asyncsession.repository.in_memory",
    DeprecationWarning,
    stacklevel=2,
)
