"""The one place PyMongo's errors become ours.

Both MongoDB backends (the session repository and the memory store) wrap every driver call in
[`pymongo_errors`][asyncsession._pymongo_errors.pymongo_errors]; each names the error type of
its own tree (`StorageError`, `MemoryBackendError`) and the words that say what failed. The
driver's exception is always chained as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import contextmanager

from pymongo.errors import ConnectionFailure, PyMongoError

from .exceptions import AsyncSessionError

__all__ = ["pymongo_errors"]


@contextmanager
def pymongo_errors(
    error: Callable[[str], AsyncSessionError],
    message: Callable[[PyMongoError], str],
    *,
    unavailable: Callable[[ConnectionFailure], AsyncSessionError] | None = None,
) -> Generator[None, None, None]:
    """Raise ``error(message(exc))`` from any ``PyMongoError`` raised inside the block.

    Args:
        error: our error type (or a factory) for a failed driver call.
        message: the error's text, given the driver's exception.
        unavailable: builds the error for an unreachable server (no server selected in time, a
            lost or timed-out connection: PyMongo's ``ConnectionFailure``) from the driver's
            exception; ``error(message(exc))`` when ``None``.
    """
    try:
        yield
    except ConnectionFailure as exc:
        if unavailable is not None:
            raise unavailable(exc) from exc
        raise error(message(exc)) from exc
    except PyMongoError as exc:
        raise error(message(exc)) from exc
