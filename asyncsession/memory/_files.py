"""Plain filesystem steps of the directory memory store: atomic writes, sizes, pruning.

They run in a worker thread (never on the event loop) and know nothing about scopes or locks.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from typing import Final

from ..exceptions import MemoryExists

__all__ = [
    "LINK_UNSUPPORTED",
    "TMP_PREFIX",
    "create_exclusive",
    "prune",
    "total_bytes",
    "within",
    "write_file",
]

TMP_PREFIX: Final = ".~memtmp-"
"""The name prefix of temporary files (skipped when sizes are summed)."""
LINK_UNSUPPORTED: Final = frozenset(
    {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
)
"""The ``link()`` errors that mean hard links are unsupported here (fall back to O_EXCL)."""


def within(path: str, root: str) -> bool:
    """Whether the real path `path` is `root` or lies below it."""
    return os.path.commonpath([path, root]) == root


def write_file(target: str, data: bytes, *, create: bool, rel: str) -> None:
    """Write `data` to a temporary file and move it into place atomically.

    A create links the temporary file into place, which fails if the name was taken in the
    meantime (even by another process); where hard links are unsupported it falls back to an
    exclusive create.
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=TMP_PREFIX)
    try:
        with open(fd, "wb", closefd=True) as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if not create:
            os.replace(tmp, target)
            return
        try:
            os.link(tmp, target)
        except FileExistsError:
            raise MemoryExists(rel) from None
        except OSError as exc:
            if exc.errno not in LINK_UNSUPPORTED:
                raise
            create_exclusive(target, data, rel)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def create_exclusive(target: str, data: bytes, rel: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise MemoryExists(rel) from None
    with open(fd, "wb", closefd=True) as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def total_bytes(scope_dir: str) -> int:
    """The total size of the regular files under the scope directory (links not followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(scope_dir):
        for filename in filenames:
            if filename.startswith(TMP_PREFIX):
                continue
            try:
                st = os.lstat(os.path.join(dirpath, filename))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def prune(directory: str, scope_dir: str) -> None:
    """Remove `directory` and its ancestors below the scope directory while they are empty."""
    while directory != scope_dir and within(directory, scope_dir):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty (or gone): stop here
        directory = os.path.dirname(directory)
