"""Writer processes of the cross-process tests: ``python -c <script> <uri> <db> p<n> <count>``."""

from __future__ import annotations

import asyncio
import sys

__all__ = ["start_writers"]


async def start_writers(
    script: str, uri: str, db: str, writers: int, count: int, *, stdin: bool = False
) -> list[asyncio.subprocess.Process]:
    """``writers`` processes running ``script`` with the arguments ``uri db p<n> count``, their
    output piped (and their input, with ``stdin``)."""
    return [
        await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            script,
            uri,
            db,
            f"p{n}",
            str(count),
            stdin=asyncio.subprocess.PIPE if stdin else None,
            stdout=asyncio.subprocess.PIPE,
        )
        for n in range(writers)
    ]
