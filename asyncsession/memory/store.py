"""The `MemoryStore` protocol, its values, its errors and the path rules every store shares.

A memory store holds one scope's long-term memory: a small tree of UTF-8 text files (by
convention Markdown with a `MEMORY.md` index at the root) that the model curates itself through
`AutoMemoryTools`. One store instance is bound to exactly one scope (a user, a tenant, an
agent); there is no global store, and a store can never reach another scope's files.

The memory errors (`MemoryStoreError` and its subclasses) are part of the one error tree in
`asyncsession.exceptions`; they are re-exported here by name. The limits every store carries
and the path helpers they share are in `asyncsession.memory._common`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, cast, runtime_checkable

from .._checks import require_text
from .._display import CONTROL_CHARACTERS, shown_path
from ..exceptions import (
    MemoryBackendError,
    MemoryExists,
    MemoryIsADirectory,
    MemoryNotADirectory,
    MemoryNotFound,
    MemoryPathError,
    MemoryStoreError,
    MemoryTooLarge,
    MemoryWriteConflict,
    UsageError,
)
from ._common import split_path

__all__ = [
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


_split_path = split_path  # memory/tools.py's name for it, until that module is rewritten


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
        raise UsageError(f"A memory scope must be a non-empty string, got {scope!r}")
    if len(scope) > MAX_SCOPE_CHARS:
        raise UsageError(f"A memory scope must be at most {MAX_SCOPE_CHARS} characters")
    if CONTROL_CHARACTERS.search(scope):
        raise UsageError(f"A memory scope must not contain control characters: {scope!r}")
    return scope


def normalize_memory_path(path: str) -> str:
    """Validate a caller's relative path and return it normalised (``""`` is the root).

    ``.`` segments and empty segments are dropped and ``..`` is resolved lexically; a path that
    would climb above the root is refused, as are absolute paths, NUL bytes and other control
    characters, backslashes, and over-long paths or components.

    Raises:
        MemoryPathError: the path is unsafe or invalid; its message is model-readable.
    """
    require_text(path, "path")
    shown = shown_path(path)
    if "\x00" in path:
        raise MemoryPathError(path, f"Path contains a NUL byte: '{shown}'")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise MemoryPathError(path, f"Path is too long (over {MAX_PATH_BYTES} bytes): '{shown}'")
    if CONTROL_CHARACTERS.search(path):
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
