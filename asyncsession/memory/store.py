"""The `MemoryStore` protocol, its values, its errors and the path rules every store shares.

A memory store holds one scope's long-term memory: a small tree of UTF-8 text files (by
convention Markdown with a `MEMORY.md` index at the root) that the model curates itself through
`AutoMemoryTools`. One store instance is bound to exactly one scope (a user, a tenant, an
agent); there is no global store, and a store can never reach another scope's files.

Error hierarchy (re-parented under ``AsyncSessionError`` once ``asyncsession.exceptions`` lands):

```text
MemoryStoreError                 base; never raised directly
├── MemoryPathError              unsafe or invalid path (also ValueError)   .path
├── MemoryNotFound               no file or directory there (also LookupError)   .path
├── MemoryExists                 a file or directory is already there   .path
├── MemoryIsADirectory           a file operation named a directory   .path
├── MemoryNotADirectory          a parent component is a file   .path
├── MemoryWriteConflict          the file changed since it was read   .path
├── MemoryTooLarge               a file or the scope would exceed its limit   .path .size .limit
└── MemoryBackendError           the filesystem or the database failed (chained)
```
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from ..exceptions import AsyncSessionError

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_STORE_BYTES",
    "MAX_NAME_BYTES",
    "MAX_PATH_BYTES",
    "MAX_SCOPE_CHARS",
    "MemoryBackendError",
    "MemoryEntry",
    "MemoryExists",
    "MemoryFile",
    "MemoryIsADirectory",
    "MemoryNotADirectory",
    "MemoryNotFound",
    "MemoryPathError",
    "MemoryStore",
    "MemoryStoreError",
    "MemoryTooLarge",
    "MemoryWriteConflict",
    "normalize_memory_path",
    "validate_memory_scope",
]

MAX_NAME_BYTES = 255
"""Longest path component, in UTF-8 bytes (the usual filesystem ``NAME_MAX``)."""

MAX_PATH_BYTES = 1024
"""Longest path argument, in UTF-8 bytes."""

MAX_SCOPE_CHARS = 128
"""Longest scope key, in characters."""

DEFAULT_MAX_FILE_BYTES = 256 * 1024
"""Default limit on one memory file, in UTF-8 bytes."""

DEFAULT_MAX_STORE_BYTES = 16 * 1024 * 1024
"""Default limit on all of one scope's memory files together, in UTF-8 bytes."""

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_SHOWN_PATH_CHARS = 120


def _shown(path: str) -> str:
    """Render a caller's path for an error message: control characters escaped, long ones cut."""
    text = _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", path)
    if len(text) > _SHOWN_PATH_CHARS:
        text = text[:_SHOWN_PATH_CHARS] + "..."
    return text


class MemoryStoreError(AsyncSessionError):
    """Base class of every memory store error; never raised directly."""


class MemoryPathError(MemoryStoreError, ValueError):
    """A path is unsafe or invalid: absolute, escaping the scope, too long, or malformed."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        """The path as the caller gave it."""


class MemoryNotFound(MemoryStoreError, LookupError):
    """Nothing (no file, no directory) exists at the path."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path does not exist: {_shown(path)}")
        self.path = path
        """The normalised path that was looked up."""


class MemoryExists(MemoryStoreError):
    """A file or directory already exists at the path."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path already exists: {_shown(path)}")
        self.path = path
        """The normalised path that is taken."""


class MemoryIsADirectory(MemoryStoreError):
    """A file operation named a directory."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Path is a directory, not a file: {_shown(path)}")
        self.path = path
        """The normalised path of the directory."""


class MemoryNotADirectory(MemoryStoreError):
    """A component of the path that must be a directory is a file."""

    def __init__(self, path: str) -> None:
        super().__init__(f"Parent path is a file, not a directory: {_shown(path)}")
        self.path = path
        """The normalised path of the file that stands where a directory is needed."""


class MemoryWriteConflict(MemoryStoreError):
    """The file changed (or vanished, or appeared) since the caller read it."""

    def __init__(self, path: str) -> None:
        super().__init__(f"File was changed concurrently: {_shown(path)}")
        self.path = path
        """The normalised path of the contested file."""


class MemoryTooLarge(MemoryStoreError):
    """A write would make a file, or the whole scope, larger than its configured limit."""

    def __init__(self, path: str, message: str, *, size: int, limit: int) -> None:
        super().__init__(message)
        self.path = path
        """The normalised path being written or read."""
        self.size = size
        """The size the operation would reach, in bytes."""
        self.limit = limit
        """The configured limit, in bytes."""


class MemoryBackendError(MemoryStoreError):
    """The filesystem or the database failed; the cause is chained as ``__cause__``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryFile:
    """A memory file's text and the version to quote when writing it back."""

    text: str
    """The whole file, decoded from UTF-8."""
    version: int
    """Opaque version token: compare for equality only; it changes whenever the file does."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEntry:
    """One file or directory, as listed or looked up."""

    name: str
    """The last path component (``""`` for the root)."""
    is_dir: bool
    """Whether this is a directory."""
    size: int
    """The file size in UTF-8 bytes; ``0`` for directories."""


class _ScopedLimits:
    """The scope and size limits both stores carry, exposed read-only."""

    _scope: str
    _max_file_bytes: int
    _max_store_bytes: int | None

    @property
    def scope(self) -> str:
        """The scope key this store is bound to."""
        return self._scope

    @property
    def max_file_bytes(self) -> int:
        """The largest file this store writes, in UTF-8 bytes."""
        return self._max_file_bytes

    @property
    def max_store_bytes(self) -> int | None:
        """The largest total of the scope's files, in UTF-8 bytes, or ``None``."""
        return self._max_store_bytes

    def _check_file_size(self, rel: str, size: int) -> None:
        """Refuse writing a file of ``size`` bytes over ``max_file_bytes``."""
        if size > self._max_file_bytes:
            raise MemoryTooLarge(
                rel,
                f"File too large: {rel} would be {size} bytes (limit {self._max_file_bytes} bytes)",
                size=size,
                limit=self._max_file_bytes,
            )

    def _check_store_total(self, rel: str, total: int) -> None:
        """Refuse a write that brings the scope to ``total`` bytes, over ``max_store_bytes``."""
        if self._max_store_bytes is not None and total > self._max_store_bytes:
            raise MemoryTooLarge(
                rel,
                f"Memory store is full: writing {rel} would bring it to {total} bytes "
                f"(limit {self._max_store_bytes} bytes)",
                size=total,
                limit=self._max_store_bytes,
            )


def _split_path(rel: str) -> tuple[str, str]:
    """Split a normalised path into its parent (``""`` at top level) and its last component."""
    parent, _, name = rel.rpartition("/")
    return parent, name


def _encode_text(text: str, rel: str) -> bytes:
    """A file's text as UTF-8."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryBackendError(f"Text cannot be encoded as UTF-8 ({rel})") from exc


@runtime_checkable
class MemoryStore(Protocol):
    """One scope's memory files: async, path-validated, with versioned (CAS) writes.

    Paths are relative POSIX paths inside the scope (``"MEMORY.md"``, ``"projects/x.md"``);
    ``""`` is the root. Every method validates its paths with `normalize_memory_path` and raises
    `MemoryPathError` for unsafe ones. Directories exist while they hold files: writing a file
    creates its parents, and deleting or moving the last file out of a directory removes it.

    Read-modify-write is made safe by versions: `read` returns the text with a version token and
    `write` only succeeds if the file still has that version (or, with ``expected_version=None``,
    does not exist yet); otherwise it raises `MemoryWriteConflict` and the caller re-reads and
    retries.
    """

    @property
    def scope(self) -> str:
        """The scope key this store is bound to."""
        ...

    @property
    def root(self) -> str:
        """The root shown to the model (a directory path, or a virtual root like ``/memories``)."""
        ...

    def with_scope(self, scope: str) -> MemoryStore:
        """Return a store over the same backend and settings, bound to another scope."""
        ...

    async def stat(self, path: str) -> MemoryEntry | None:
        """Describe the file or directory at `path`, or return ``None`` if nothing is there."""
        ...

    async def read(self, path: str) -> MemoryFile | None:
        """Return the file at `path`, or ``None`` if it does not exist.

        Raises:
            MemoryIsADirectory: `path` is a directory.
        """
        ...

    async def list_dir(self, path: str = "") -> list[MemoryEntry]:
        """List the directory at `path` one level deep, sorted by name.

        Raises:
            MemoryNotFound: nothing is at `path`.
            MemoryNotADirectory: `path` is a file.
        """
        ...

    async def write(self, path: str, text: str, *, expected_version: int | None) -> MemoryFile:
        """Create or replace the file at `path` and return it with its new version.

        With ``expected_version=None`` the file must not exist yet (parents are created); with
        a version, the file must still have exactly that version.

        Raises:
            MemoryExists: creating, but a file is already there.
            MemoryWriteConflict: replacing, but the file changed or vanished since it was read.
            MemoryIsADirectory: `path` is a directory.
            MemoryNotADirectory: a parent component is a file.
            MemoryTooLarge: the file or the scope would exceed its limit.
        """
        ...

    async def delete(self, path: str) -> MemoryEntry:
        """Delete the file, or the directory with everything in it, and describe what went.

        Raises:
            MemoryNotFound: nothing is at `path`.
            MemoryPathError: `path` is the root.
        """
        ...

    async def rename(self, old_path: str, new_path: str) -> None:
        """Move a file or directory; the destination's parents are created.

        Raises:
            MemoryNotFound: nothing is at `old_path`.
            MemoryExists: something is already at `new_path`.
            MemoryPathError: either path is the root, or a directory would move into itself.
            MemoryWriteConflict: a file changed while it was being moved (retry).
        """
        ...


def validate_memory_scope(scope: str) -> str:
    """Check a scope key and return it unchanged.

    A scope must be a non-blank string of at most `MAX_SCOPE_CHARS` characters without control
    characters. Stores map it to storage safely themselves (the directory store percent-encodes
    it), so any such string, ``"../bob"`` included, stays inside its own scope.

    Raises:
        ValueError: the scope is empty, blank, too long, or contains control characters.
    """
    value = cast(object, scope)  # callers outside the type checker may pass anything
    if not isinstance(value, str) or not scope.strip():
        raise ValueError(f"A memory scope must be a non-empty string, got {scope!r}")
    if len(scope) > MAX_SCOPE_CHARS:
        raise ValueError(f"A memory scope must be at most {MAX_SCOPE_CHARS} characters")
    if _CONTROL.search(scope):
        raise ValueError(f"A memory scope must not contain control characters: {scope!r}")
    return scope


def normalize_memory_path(path: str) -> str:
    """Validate a caller's relative path and return it normalised (``""`` is the root).

    ``.`` segments and empty segments are dropped and ``..`` is resolved lexically; a path that
    would climb above the root is refused, as are absolute paths, NUL bytes and other control
    characters, backslashes, and over-long paths or components.

    Raises:
        MemoryPathError: the path is unsafe or invalid; its message is model-readable.
    """
    shown = _shown(path)
    if "\x00" in path:
        raise MemoryPathError(path, f"Path contains a NUL byte: '{shown}'")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise MemoryPathError(path, f"Path is too long (over {MAX_PATH_BYTES} bytes): '{shown}'")
    if _CONTROL.search(path):
        raise MemoryPathError(path, f"Path contains a control character: '{shown}'")
    if path.startswith("/"):
        raise MemoryPathError(path, f"Absolute paths are not allowed: '{shown}'")
    if "\\" in path:
        raise MemoryPathError(path, f"Backslashes are not allowed in paths (use '/'): '{shown}'")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise MemoryPathError(
                    path,
                    f"Path traversal attempt detected: '{shown}' escapes the memories directory",
                )
            parts.pop()
            continue
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MemoryPathError(path, f"Path is not valid Unicode text: '{shown}'") from exc
        if len(encoded) > MAX_NAME_BYTES:
            raise MemoryPathError(
                path, f"Path component is too long (over {MAX_NAME_BYTES} bytes): '{shown}'"
            )
        parts.append(part)
    return "/".join(parts)
