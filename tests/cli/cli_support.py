"""Helpers of the command-line tests: run the command line in-process, a fake terminal."""

from __future__ import annotations

import io
import socket

from asyncsession.cli import run


async def cli(*argv: str, err: io.StringIO | None = None) -> tuple[int, str, str]:
    """Run the command line in-process; returns the exit code, stdout and stderr."""
    out = io.StringIO()
    err = err if err is not None else io.StringIO()
    code = await run(list(argv), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


class Terminal(io.StringIO):
    """A standard error that says it is a terminal, so progress bars are drawn."""

    def isatty(self) -> bool:
        return True


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
