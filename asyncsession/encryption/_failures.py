"""What goes wrong inside an engine, before it becomes an error of ours in `UserKeys`."""

from __future__ import annotations

__all__ = ["CryptFailure", "KeyTaken"]


class CryptFailure(Exception):
    """The encrypter or the key vault failed; the original error is the ``__cause__``."""


class KeyTaken(Exception):
    """A data key with the alternate name exists already (another task or process made it)."""
