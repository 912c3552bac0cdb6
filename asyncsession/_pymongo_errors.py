"""The one place PyMongo's errors become ours.

Both MongoDB backends (the session repository and the memory store) wrap every driver call in
[`pymongo_errors`][asyncsession._pymongo_errors.pymongo_errors]; each names the error type of
its own error (`StorageError`, a `MemoryStoreError`) and the words that say what failed. The
driver's exception is always chained as ``__cause__``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from contextlib import AbstractContextManager, contextmanager

from pymongo.errors import ConnectionFailure, PyMongoError

from .exceptions import AsyncSessionError, StorageError, StorageUnavailable

__all__ = ["pymongo_errors", "storage_errors"]


@contextmanager
def pymongo_errors(
    error: Callable[[str], AsyncSessionError],
    message: Callable[[PyMongoError], str],
    *,
    unavailable: Callable[[PyMongoError], AsyncSessionError] | None = None,
) -> Generator[None, None, None]:
    """Raise ``error(message(exc))`` from any ``PyMongoError`` raised inside the block.

    Args:
        error: our error type (or a factory) for a failed driver call.
        message: the error's text, given the driver's exception.
        unavailable: builds the error for an unreachable server (no server selected in time, a
            lost or timed-out connection: PyMongo's ``ConnectionFailure``; or an operation the
            driver's deadline ran out for) from the driver's exception; ``error(message(exc))``
            when ``None``.
    """
    try:
        yield
    except ConnectionFailure as exc:
        if unavailable is not None:
            raise unavailable(exc) from exc
        raise error(message(exc)) from exc
    except PyMongoError as exc:
        if unavailable is not None and exc.timeout:  # the call's deadline (``timeoutMS``) ran out
            raise unavailable(exc) from exc
        raise error(message(exc)) from exc


def storage_errors(operation: str) -> AbstractContextManager[None]:
    """Raise `StorageError` from a driver error inside the block, and `StorageUnavailable`
    when the server cannot be reached in time (no server selected in time, a lost or timed-out
    connection, the call's deadline run out); ``operation`` completes "MongoDB failed to ..."."""
    return pymongo_errors(
        StorageError,
        lambda exc: f"MongoDB failed to {operation}: {exc}",
        unavailable=lambda exc: StorageUnavailable(
            f"MongoDB is unreachable; could not {operation}: {exc}"
        ),
    )
