"""What both memory stores share: the path and scope rules, the limits, the lifecycle, and the
checks every call makes before a backend runs it.

A subclass implements `_stat`, `_read`, `_list_dir`, `_write`, `_delete` and `_rename` on
normalised paths (``""`` is the root); the public methods check that the store is open,
normalise the paths, refuse what no backend may do with the root, and check a file's size.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar, cast

from .._checks import require_text
from .._display import CONTROL_CHARACTERS, shown_path
from .._lifecycle import Closable
from ..exceptions import MemoryStoreError, UsageError
from .store import MemoryEntry, MemoryFile

__all__ = [
    "DEFAULT_MAX_FILE_BYTES",
    "DEFAULT_MAX_STORE_BYTES",
    "MAX_NAME_BYTES",
    "BaseMemoryStore",
    "normalize_path",
    "split_path",
]

MAX_NAME_BYTES = 255
"""Longest path component, in UTF-8 bytes (the usual filesystem ``NAME_MAX``)."""
MAX_PATH_BYTES = 1024
"""Longest path argument, in UTF-8 bytes."""
MAX_SCOPE_CHARS = 128
"""Longest scope key, in characters."""
DEFAULT_MAX_FILE_BYTES = 256 * 1024
DEFAULT_MAX_STORE_BYTES = 16 * 1024 * 1024


def _invalid(path: str, message: str) -> MemoryStoreError:
    return MemoryStoreError("invalid_path", path, message)


def normalize_path(path: str) -> str:
    """Validate a caller's relative path and return it normalised (``""`` is the root).

    ``.`` and empty segments are dropped and ``..`` is resolved lexically; a path climbing
    above the root is refused, as are absolute paths, control characters (NUL included),
    backslashes, lone surrogates, and over-long paths or components. The refusal's message is
    written for the model.
    """
    require_text(path, "path")
    shown = shown_path(path)
    if "\x00" in path:
        raise _invalid(path, f"Path contains a NUL byte: '{shown}'")
    if len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise _invalid(path, f"Path is too long (over {MAX_PATH_BYTES} bytes): '{shown}'")
    if CONTROL_CHARACTERS.search(path):
        raise _invalid(path, f"Path contains a control character: '{shown}'")
    if path.startswith("/"):
        raise _invalid(path, f"Absolute paths are not allowed: '{shown}'")
    if "\\" in path:
        raise _invalid(path, f"Backslashes are not allowed in paths (use '/'): '{shown}'")
    parts: list[str] = []
    for part in path.split("/"):
        if part in ("", "."):
            continue
        if part == "..":
            if not parts:
                raise _invalid(
                    path,
                    f"Path traversal attempt detected: '{shown}' escapes the memories directory",
                )
            parts.pop()
            continue
        try:
            encoded = part.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise _invalid(path, f"Path is not valid Unicode text: '{shown}'") from exc
        if len(encoded) > MAX_NAME_BYTES:
            raise _invalid(
                path, f"Path component is too long (over {MAX_NAME_BYTES} bytes): '{shown}'"
            )
        parts.append(part)
    return "/".join(parts)


def split_path(rel: str) -> tuple[str, str]:
    """Split a normalised path into its parent (``""`` at top level) and its last component."""
    parent, _, name = rel.rpartition("/")
    return parent, name


class BaseMemoryStore(Closable, ABC):
    """One scope's memory files; see `asyncsession.memory.MemoryStore` for the contract.

    `aclose` (idempotent) ends the store, ``async with`` closes it on exit, and a call after
    closing raises `UsageError`. Closing lets go of nothing borrowed: a MongoDB store's
    database and a directory store's files stay as they are.
    """

    _keep_using: ClassVar[str] = "the store"

    def __init__(
        self, scope: str, max_file_bytes: int, max_store_bytes: int | None, *, file_cap: int = 0
    ) -> None:
        value = cast(object, scope)  # callers outside the type checker may pass anything
        if not isinstance(value, str) or not scope.strip():
            raise UsageError(f"A memory scope must be a non-empty string, got {scope!r}")
        if len(scope) > MAX_SCOPE_CHARS:
            raise UsageError(f"A memory scope must be at most {MAX_SCOPE_CHARS} characters")
        if CONTROL_CHARACTERS.search(scope):
            raise UsageError(f"A memory scope must not contain control characters: {scope!r}")
        if max_file_bytes <= 0 or 0 < file_cap < max_file_bytes:
            bound = f"between 1 and {file_cap}" if file_cap else "positive"
            raise UsageError(f"max_file_bytes must be {bound}, got {max_file_bytes!r}")
        if max_store_bytes is not None and max_store_bytes <= 0:
            raise UsageError(f"max_store_bytes must be positive or None, got {max_store_bytes!r}")
        self._scope = scope
        self._max_file_bytes = max_file_bytes
        self._max_store_bytes = max_store_bytes

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

    async def stat(self, path: str) -> MemoryEntry | None:
        """Describe the file or directory at `path`, or return ``None`` if nothing is there."""
        return await self._stat(self._open_path(path))

    async def read(self, path: str) -> MemoryFile | None:
        """Return the file at `path` with its version, or ``None`` if it does not exist."""
        rel = self._open_path(path)
        if not rel:
            raise MemoryStoreError("is_a_directory", rel)
        return await self._read(rel)

    async def list_dir(self, path: str = "") -> list[MemoryEntry]:
        """List the directory at `path` one level deep, sorted by name."""
        return await self._list_dir(self._open_path(path))

    async def write(self, path: str, text: str, *, expected_version: int | None) -> MemoryFile:
        """Create (``expected_version=None``) or compare-and-replace the file at `path`."""
        rel = self._open_path(path)
        if not rel:
            raise MemoryStoreError("is_a_directory", rel)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise MemoryStoreError(
                "backend", rel, f"Text cannot be encoded as UTF-8 ({rel})"
            ) from exc
        if len(data) > self._max_file_bytes:
            raise MemoryStoreError(
                "too_large",
                rel,
                f"File too large: {rel} would be {len(data)} bytes "
                f"(limit {self._max_file_bytes} bytes)",
            )
        return await self._write(rel, text, data, expected_version)

    async def delete(self, path: str) -> MemoryEntry:
        """Delete the file, or the directory and everything in it; return what was deleted."""
        rel = self._open_path(path)
        if not rel:
            raise _invalid(path, "Cannot delete the memories root directory.")
        return await self._delete(rel)

    async def rename(self, old_path: str, new_path: str) -> None:
        """Move a file or directory, creating the destination's parents."""
        old = self._open_path(old_path)
        new = self._open_path(new_path)
        if not old:
            raise _invalid(old_path, "Cannot rename the memories root directory.")
        await self._rename(old, new)

    def _open_path(self, path: str) -> str:
        self._check_open()
        return normalize_path(path)

    @staticmethod
    def _check_target(old: str, new: str) -> None:
        """Refuse moving a path onto itself, onto the root, or into itself (once it exists)."""
        if not new or new == old:
            raise MemoryStoreError("exists", new)
        if new.startswith(old + "/"):
            raise _invalid(new, f"Cannot move '{old}' into itself ('{new}')")

    def _check_total(self, rel: str, total: int) -> None:
        """Refuse a write that grows the scope to ``total`` bytes, over ``max_store_bytes``."""
        if self._max_store_bytes is not None and total > self._max_store_bytes:
            raise MemoryStoreError(
                "too_large",
                rel,
                f"Memory store is full: writing {rel} would bring it to {total} bytes "
                f"(limit {self._max_store_bytes} bytes)",
            )

    @abstractmethod
    async def _stat(self, rel: str) -> MemoryEntry | None: ...

    @abstractmethod
    async def _read(self, rel: str) -> MemoryFile | None: ...

    @abstractmethod
    async def _list_dir(self, rel: str) -> list[MemoryEntry]: ...

    @abstractmethod
    async def _write(
        self, rel: str, text: str, data: bytes, expected_version: int | None
    ) -> MemoryFile: ...

    @abstractmethod
    async def _delete(self, rel: str) -> MemoryEntry: ...

    @abstractmethod
    async def _rename(self, old: str, new: str) -> None: ...
