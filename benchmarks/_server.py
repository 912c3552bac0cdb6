"""The server a benchmark script measures: ``MONGODB_URI``, or a local test server of its own."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from asyncsession.testing._mongo_server import LocalMongoServer, find_server_executable

__all__ = ["bench_uri"]


def bench_uri(**options: str) -> tuple[str, Callable[[], None]]:
    """The URI to measure and what stops its server afterwards.

    ``MONGODB_URI`` when set (nothing to stop); else a local test server started now, its URI
    with ``options`` (e.g. ``w="majority", journal="true"``). Exits with a message when there
    is neither.
    """
    uri = os.environ.get("MONGODB_URI")
    if uri:
        return uri, lambda: None
    executable = find_server_executable()
    if executable is None:
        sys.exit("Set MONGODB_URI, or ASYNCSESSION_SECANTUSD to the test server's launcher.")
    server = LocalMongoServer(executable)
    server.start()
    return server.uri(**options), server.stop
