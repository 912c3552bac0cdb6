"""What both memory stores share: their scope and size limits, and two small path helpers."""

from __future__ import annotations

from ..exceptions import MemoryBackendError, MemoryTooLarge

__all__ = ["ScopedLimits", "encode_text", "split_path"]


class ScopedLimits:
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


def split_path(rel: str) -> tuple[str, str]:
    """Split a normalised path into its parent (``""`` at top level) and its last component."""
    parent, _, name = rel.rpartition("/")
    return parent, name


def encode_text(text: str, rel: str) -> bytes:
    """A file's text as UTF-8."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise MemoryBackendError(f"Text cannot be encoded as UTF-8 ({rel})") from exc
