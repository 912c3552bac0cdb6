"""`DirectoryMemoryStore`: one scope's memory files in a sandboxed directory on local disk."""

from __future__ import annotations

import asyncio
import contextlib
import errno
import hashlib
import os
import shutil
import stat
import tempfile
import urllib.parse
import weakref
from collections.abc import Callable, Generator
from typing import Final, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

import anyio.to_thread

from .._shield import shielded
from ..exceptions import MemoryStoreError, UsageError
from ._base import (
    DEFAULT_MAX_FILE_BYTES,
    DEFAULT_MAX_STORE_BYTES,
    MAX_NAME_BYTES,
    BaseMemoryStore,
    normalize_path,
    split_path,
)
from .store import MemoryEntry, MemoryFile

__all__ = ["DirectoryMemoryStore"]

_T = TypeVar("_T")

_READ_FLAGS = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_CLOEXEC", 0)
)

# Writers of one scope directory in one event loop share a lock, whichever store instance
# (or tool instance) they came through. Entries vanish once no coroutine holds the lock.
_SCOPE_LOCKS: weakref.WeakValueDictionary[tuple[int, str], asyncio.Lock] = (
    weakref.WeakValueDictionary()
)
_TMP_PREFIX: Final = ".~memtmp-"
"""The name prefix of temporary files (skipped when sizes are summed)."""
_LINK_UNSUPPORTED: Final = frozenset(
    {errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.EOPNOTSUPP}
)
"""The ``link()`` errors that mean hard links are unsupported here (fall back to O_EXCL)."""


def _within(path: str, root: str) -> bool:
    """Whether the real path `path` is `root` or lies below it."""
    return os.path.commonpath([path, root]) == root


def _write_file(target: str, data: bytes, *, create: bool, rel: str) -> None:
    """Write `data` to a temporary file and move it into place atomically.

    A create links the temporary file into place, which fails if the name was taken in the
    meantime (even by another process); where hard links are unsupported it falls back to an
    exclusive create.
    """
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(target), prefix=_TMP_PREFIX)
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
            raise MemoryStoreError("exists", rel) from None
        except OSError as exc:
            if exc.errno not in _LINK_UNSUPPORTED:
                raise
            _create_exclusive(target, data, rel)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)


def _create_exclusive(target: str, data: bytes, rel: str) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
    try:
        fd = os.open(target, flags, 0o600)
    except FileExistsError:
        raise MemoryStoreError("exists", rel) from None
    with open(fd, "wb", closefd=True) as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _total_bytes(scope_dir: str) -> int:
    """The total size of the regular files under the scope directory (links not followed)."""
    total = 0
    for dirpath, _dirnames, filenames in os.walk(scope_dir):
        for filename in filenames:
            if filename.startswith(_TMP_PREFIX):
                continue
            try:
                st = os.lstat(os.path.join(dirpath, filename))
            except FileNotFoundError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def _prune(directory: str, scope_dir: str) -> None:
    """Remove `directory` and its ancestors below the scope directory while they are empty."""
    while directory != scope_dir and _within(directory, scope_dir):
        try:
            os.rmdir(directory)
        except OSError:
            return  # not empty (or gone): stop here
        directory = os.path.dirname(directory)


def _scope_dirname(scope: str) -> str:
    """Map a scope key to one directory name that cannot traverse (injective percent-encoding)."""
    name = urllib.parse.quote(scope, safe="")
    if name in (".", ".."):
        name = name.replace(".", "%2E")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise UsageError(f"The memory scope {scope!r} is too long once encoded as a directory name")
    return name


def _entry(name: str, st: os.stat_result) -> MemoryEntry | None:
    """A directory or a regular file as an entry; ``None`` for anything else."""
    if stat.S_ISDIR(st.st_mode):
        return MemoryEntry(name=name, is_dir=True, size=0)
    if stat.S_ISREG(st.st_mode):
        return MemoryEntry(name=name, is_dir=False, size=st.st_size)
    return None


def _version(data: bytes) -> int:
    """The version token of some file content: a 63-bit BLAKE2b digest."""
    return int.from_bytes(hashlib.blake2b(data, digest_size=8).digest(), "big") >> 1


def _is_plain_name(name: str) -> bool:
    """Whether a directory entry's name is one a memory path can name."""
    try:
        return normalize_path(name) == name
    except MemoryStoreError:
        return False


def _escape(rel: str) -> MemoryStoreError:
    return MemoryStoreError(
        "invalid_path",
        rel,
        f"Symbolic link escape detected: '{rel}' resolves outside the memories directory",
    )


@contextlib.contextmanager
def _map_os_errors(rel: str) -> Generator[None, None, None]:
    """Translate `OSError` into our errors, chaining the cause."""
    try:
        yield
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            message = f"Path is too long for the filesystem: '{rel}'"
            raise MemoryStoreError("invalid_path", rel, message) from exc
        if exc.errno == errno.ELOOP:
            message = f"Too many levels of symbolic links: '{rel}'"
            raise MemoryStoreError("invalid_path", rel, message) from exc
        raise MemoryStoreError("backend", rel, f"{exc.strerror or exc} ({rel or '/'})") from exc


class DirectoryMemoryStore(BaseMemoryStore):
    """One scope's memory files in ``<root>/<scope>/`` on the local filesystem.

    The scope key is percent-encoded into one directory name, so any scope (``"../bob"`` too)
    stays a direct child of `root`; on case-insensitive filesystems scopes that differ only in
    case share a directory. Blocking I/O runs in a worker thread, and a write that has started
    finishes even if the caller is cancelled (the cancellation waits for it).

    Sandbox: beyond the path rules of `MemoryStore`, a path whose real path (symlinks resolved)
    leaves the scope directory is neither read, listed, written nor deleted through; links that
    stay inside are followed for reads and writes, and delete and rename act on the link itself.
    Special files are refused. Directories are created ``0700``, files ``0600``.

    Concurrency: writers of a scope in one process share a lock, and writers in other processes
    wait on the scope's lock file (``flock``); under both a write compares versions (a digest of
    the content) and checks the limits before an atomic replace, so no edit is lost and readers
    never see a torn file. The lock file needs a local POSIX filesystem (``flock`` over NFS is
    not reliable; on Windows only one process's writers are serialised): use `MongoMemoryStore`
    elsewhere.
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        scope: str,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES,
    ) -> None:
        """Bind a store to ``<root>/<scope>/``; nothing is touched on disk until first use.

        Args:
            root: The directory holding every scope's directory.
            scope: The scope key (user, tenant, agent): a non-blank string of at most 128
                characters without control characters.
            max_file_bytes: The largest file this store writes or reads, in UTF-8 bytes.
            max_store_bytes: The largest total of the scope's files, or ``None`` for no limit.

        Raises:
            ValueError: the scope or a limit is invalid.
        """
        super().__init__(scope, max_file_bytes, max_store_bytes)
        base: str = os.fspath(root)
        self._base: str = os.path.abspath(base)
        self._dir = os.path.join(self._base, _scope_dirname(scope))
        digest = hashlib.blake2b(os.path.basename(self._dir).encode(), digest_size=16).hexdigest()
        self._lock_path = os.path.join(self._base, f"#{digest}.lock")
        self._lock_key: str | None = None

    def __repr__(self) -> str:
        return f"DirectoryMemoryStore({self._base!r}, scope={self._scope!r})"

    @property
    def root(self) -> str:
        """The scope's directory, as shown to the model."""
        return self._dir

    def with_scope(self, scope: str) -> DirectoryMemoryStore:
        """Return a store over the same root directory and limits, bound to another scope."""
        return DirectoryMemoryStore(
            self._base,
            scope=scope,
            max_file_bytes=self._max_file_bytes,
            max_store_bytes=self._max_store_bytes,
        )

    async def _stat(self, rel: str) -> MemoryEntry | None:
        return await self._run(self._stat_sync, rel)

    async def _read(self, rel: str) -> MemoryFile | None:
        return await self._run(self._read_sync, rel)

    async def _list_dir(self, rel: str) -> list[MemoryEntry]:
        return await self._run(self._list_sync, rel)

    async def _write(
        self, rel: str, text: str, data: bytes, expected_version: int | None
    ) -> MemoryFile:
        def write_sync(rel: str) -> MemoryFile:
            return MemoryFile(text=text, version=self._write_sync(rel, data, expected_version))

        async with await self._lock():
            return await shielded(self._run(write_sync, rel, exclusive=True))

    async def _delete(self, rel: str) -> MemoryEntry:
        async with await self._lock():
            return await shielded(self._run(self._delete_sync, rel, exclusive=True))

    async def _rename(self, old: str, new: str) -> None:
        def rename_sync(old: str) -> None:
            self._rename_sync(old, new)

        async with await self._lock():
            await shielded(self._run(rename_sync, old, exclusive=True))

    async def _run(self, func: Callable[[str], _T], rel: str, *, exclusive: bool = False) -> _T:
        """Run ``func(rel)`` in a worker thread; ``exclusive`` holds the scope's lock file."""

        def call() -> _T:
            with _map_os_errors(rel):
                if not exclusive:
                    return func(rel)
                with self._file_lock():
                    return func(rel)

        return await anyio.to_thread.run_sync(call)

    @contextlib.contextmanager
    def _file_lock(self) -> Generator[None, None, None]:
        """Hold the scope's lock file (``flock``) so the writers of other processes wait."""
        if fcntl is None:  # pragma: no cover - not on POSIX
            yield
            return
        os.makedirs(self._base, mode=0o700, exist_ok=True)
        fd = os.open(self._lock_path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the lock

    async def _lock(self) -> asyncio.Lock:
        if self._lock_key is None:
            self._lock_key = await anyio.to_thread.run_sync(os.path.realpath, self._dir)
        key = (id(asyncio.get_running_loop()), self._lock_key)
        lock = _SCOPE_LOCKS.get(key)
        if lock is None:
            lock = _SCOPE_LOCKS[key] = asyncio.Lock()
        return lock

    # Everything below runs in a worker thread.

    def _scope_dir(self, *, create: bool) -> str:
        """The real path of the scope directory, checked to lie inside the real root."""
        if create:
            os.makedirs(self._dir, mode=0o700, exist_ok=True)
        real_base = os.path.realpath(self._base)
        real = os.path.realpath(self._dir)
        # The scope directory itself must not be a link: not out of the root, and not into
        # another scope's directory either.
        if real != os.path.join(real_base, os.path.basename(self._dir)):
            raise MemoryStoreError(
                "invalid_path", "", "The scope's memory directory is a symbolic link; refusing"
            )
        return real

    def _resolve(self, scope_dir: str, rel: str) -> str:
        """The real path of `rel`, refused if it resolves outside the scope directory."""
        if not rel:
            return scope_dir
        real = os.path.realpath(os.path.join(scope_dir, *rel.split("/")))
        if not _within(real, scope_dir):
            raise _escape(rel)
        return real

    def _stat_sync(self, rel: str) -> MemoryEntry | None:
        scope_dir = self._scope_dir(create=False)
        real = self._resolve(scope_dir, rel)
        name = split_path(rel)[1]
        try:
            st = os.stat(real)
        except (FileNotFoundError, NotADirectoryError):
            return MemoryEntry(name="", is_dir=True, size=0) if not rel else None
        entry = _entry(name, st)
        if entry is None:
            raise MemoryStoreError("invalid_path", rel, f"Not a regular file or directory: '{rel}'")
        return entry

    def _read_sync(self, rel: str) -> MemoryFile | None:
        real = self._resolve(self._scope_dir(create=False), rel)
        data = self._read_bytes(real, rel)
        if data is None:
            return None
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MemoryStoreError("backend", rel, f"File is not valid UTF-8 text: {rel}") from exc
        return MemoryFile(text=text, version=_version(data))

    def _read_bytes(self, real: str, rel: str) -> bytes | None:
        """Read a regular file without following a final symlink; ``None`` if it is missing."""
        try:
            fd = os.open(real, _READ_FLAGS)
        except (FileNotFoundError, NotADirectoryError):
            return None
        except OSError as exc:
            if exc.errno == errno.ELOOP:  # swapped for a symlink after it was resolved
                raise _escape(rel) from exc
            raise
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise MemoryStoreError("is_a_directory", rel)
            if not stat.S_ISREG(st.st_mode):
                raise MemoryStoreError("invalid_path", rel, f"Not a regular file: '{rel}'")
        except BaseException:
            os.close(fd)
            raise
        with open(fd, "rb", closefd=True) as file:
            data = file.read(self._max_file_bytes + 1)
        if len(data) > self._max_file_bytes:
            raise MemoryStoreError(
                "too_large",
                rel,
                f"File is too large to read: {rel} is over {self._max_file_bytes} bytes",
            )
        return data

    def _list_sync(self, rel: str) -> list[MemoryEntry]:
        scope_dir = self._scope_dir(create=False)
        real = self._resolve(scope_dir, rel)
        try:
            scan = os.scandir(real)
        except FileNotFoundError:
            if not rel:
                return []
            raise MemoryStoreError("not_found", rel) from None
        except NotADirectoryError:
            raise MemoryStoreError("not_a_directory", rel) from None
        entries: list[MemoryEntry] = []
        with scan:
            for item in scan:
                if item.name.startswith(_TMP_PREFIX) or not _is_plain_name(item.name):
                    continue  # our temporary files, and names no tool could address
                try:
                    if item.is_symlink():
                        target = os.path.realpath(item.path)
                        if not _within(target, scope_dir):
                            continue  # never reveal anything about what lies outside
                        st = os.stat(target)
                    else:
                        st = item.stat(follow_symlinks=False)
                except OSError:
                    continue  # vanished or unreadable meanwhile
                entry = _entry(item.name, st)
                if entry is not None:  # special files are left out
                    entries.append(entry)
        entries.sort(key=lambda entry: entry.name)
        return entries

    def _write_sync(self, rel: str, data: bytes, expected_version: int | None) -> int:
        scope_dir = self._scope_dir(create=True)
        parent_rel, name = split_path(rel)
        for attempt in range(3):
            target = os.path.join(self._make_parents(scope_dir, parent_rel), name)
            if os.path.islink(target):
                target = os.path.realpath(target)
                if not _within(target, scope_dir):
                    raise _escape(rel)
            current = self._read_bytes(target, rel)
            if expected_version is None:
                if current is not None:
                    raise MemoryStoreError("exists", rel)
            elif current is None or _version(current) != expected_version:
                raise MemoryStoreError("conflict", rel)
            growth = len(data) - len(current or b"")
            if self._max_store_bytes is not None and growth > 0:
                self._check_total(rel, _total_bytes(scope_dir) + growth)
            try:
                _write_file(target, data, create=expected_version is None, rel=rel)
            except FileNotFoundError:
                # Another process pruned the (then empty) parent directory; make it again.
                if attempt == 2:
                    raise
                continue
            return _version(data)
        raise AssertionError("unreachable")  # pragma: no cover

    def _make_parents(self, scope_dir: str, parent_rel: str) -> str:
        """Create the parent directories of a path one by one, never through an outside link."""
        current = scope_dir
        walked: list[str] = []
        for part in parent_rel.split("/") if parent_rel else ():
            walked.append(part)
            step = os.path.join(current, part)
            with contextlib.suppress(FileExistsError):
                os.mkdir(step, mode=0o700)
            real = os.path.realpath(step)
            if not _within(real, scope_dir):
                raise _escape("/".join(walked))
            if not os.path.isdir(real):
                raise MemoryStoreError("not_a_directory", "/".join(walked))
            current = real
        return current

    def _delete_sync(self, rel: str) -> MemoryEntry:
        scope_dir = self._scope_dir(create=False)
        parent_rel, name = split_path(rel)
        parent = self._resolve(scope_dir, parent_rel)
        entry = os.path.join(parent, name)
        try:
            st = os.lstat(entry)
        except (FileNotFoundError, NotADirectoryError):
            raise MemoryStoreError("not_found", rel) from None
        if stat.S_ISLNK(st.st_mode):
            target = os.path.realpath(entry)
            if not _within(target, scope_dir):
                raise _escape(rel)
            result = MemoryEntry(name=name, is_dir=os.path.isdir(target), size=0)
            os.unlink(entry)  # the link itself, never what it points to
        elif stat.S_ISDIR(st.st_mode):
            shutil.rmtree(entry)  # fd-based on this platform: does not follow inner links
            result = MemoryEntry(name=name, is_dir=True, size=0)
        else:
            os.unlink(entry)
            result = MemoryEntry(name=name, is_dir=False, size=st.st_size)
        _prune(parent, scope_dir)
        return result

    def _rename_sync(self, old: str, new: str) -> None:
        scope_dir = self._scope_dir(create=False)
        old_parent_rel, old_name = split_path(old)
        old_parent = self._resolve(scope_dir, old_parent_rel)
        source = os.path.join(old_parent, old_name)
        try:
            st = os.lstat(source)
        except (FileNotFoundError, NotADirectoryError):
            raise MemoryStoreError("not_found", old) from None
        if stat.S_ISLNK(st.st_mode) and not _within(os.path.realpath(source), scope_dir):
            raise _escape(old)
        self._check_target(old, new)
        if os.path.lexists(self._resolve(scope_dir, new)):
            raise MemoryStoreError("exists", new)
        new_parent_rel, new_name = split_path(new)
        new_parent = self._make_parents(scope_dir, new_parent_rel)
        if stat.S_ISDIR(st.st_mode) and _within(new_parent, source):
            raise MemoryStoreError(
                "invalid_path", new, f"Cannot move '{old}' into itself ('{new}')"
            )
        destination = os.path.join(new_parent, new_name)
        if os.path.lexists(destination):
            raise MemoryStoreError("exists", new)
        os.rename(source, destination)
        _prune(old_parent, scope_dir)
