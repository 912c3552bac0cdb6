"""The `MemoryStore` protocol and the values it returns.

A memory store holds one scope's long-term memory: a small tree of UTF-8 text files (by
convention Markdown with a `MEMORY.md` index at the root) that the model curates itself through
`AutoMemoryTools`. One store instance is bound to exactly one scope (a user, a tenant, an
agent); there is no global store, and a store can never reach another scope's files.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from ..exceptions import MemoryStoreError

__all__ = ["MemoryEntry", "MemoryFile", "MemoryStore", "MemoryStoreError"]


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


@runtime_checkable
class MemoryStore(Protocol):
    """One scope's memory files: async, path-validated, with versioned (CAS) writes.

    Paths are relative POSIX paths inside the scope (``"MEMORY.md"``, ``"projects/x.md"``);
    ``""`` is the root. ``.`` and ``..`` are resolved lexically; absolute paths, paths that climb
    out of the root, control characters, backslashes and over-long names are refused. Directories
    exist while they hold files: writing a file creates its parents, and deleting or moving the
    last file out of a directory removes it.

    Read-modify-write is made safe by versions: `read` returns the text with a version token and
    `write` only succeeds if the file still has that version (or, with ``expected_version=None``,
    does not exist yet); otherwise it raises with reason ``"conflict"`` and the caller re-reads
    and retries. Every refusal or failure is a `MemoryStoreError`; its ``reason`` is named below.
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
            MemoryStoreError: ``is_a_directory``: `path` is a directory.
        """
        ...

    async def list_dir(self, path: str = "") -> list[MemoryEntry]:
        """List the directory at `path` one level deep, sorted by name.

        Raises:
            MemoryStoreError: ``not_found``: nothing is at `path`; ``not_a_directory``: it is a
                file.
        """
        ...

    async def write(self, path: str, text: str, *, expected_version: int | None) -> MemoryFile:
        """Create or replace the file at `path` and return it with its new version.

        With ``expected_version=None`` the file must not exist yet (parents are created); with
        a version, the file must still have exactly that version.

        Raises:
            MemoryStoreError: ``exists``: creating, but a file is already there; ``conflict``:
                replacing, but the file changed or vanished since it was read;
                ``is_a_directory``: `path` is a directory; ``not_a_directory``: a parent is a
                file; ``too_large``: the file or the scope would exceed its limit.
        """
        ...

    async def delete(self, path: str) -> MemoryEntry:
        """Delete the file, or the directory with everything in it, and describe what went.

        Raises:
            MemoryStoreError: ``not_found``: nothing is at `path`; ``invalid_path``: it is the
                root.
        """
        ...

    async def rename(self, old_path: str, new_path: str) -> None:
        """Move a file or directory; the destination's parents are created.

        Raises:
            MemoryStoreError: ``not_found``: nothing is at `old_path`; ``exists``: something is
                at `new_path`; ``invalid_path``: either path is the root, or a directory would
                move into itself; ``conflict``: a file changed while it was moved (retry).
        """
        ...
