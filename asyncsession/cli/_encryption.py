"""The command line's encryption setting: a JSON file (`--encryption FILE`, else
`$ASYNCSESSION_ENCRYPTION`) holding the arguments of `EncryptionOptions`::

    {"kms_providers": {"local": {"key": "<96 bytes as base64>"}},
     "key_vault_namespace": "encryption.__keyVault"}

With it, every command reads encrypted sessions decrypted (`show`, `export`, ...), and
`erase-user` and `rotate-keys` reach the data keys.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final, cast

from ..encryption import EncryptionOptions
from ..exceptions import UsageError

__all__ = ["ENCRYPTION_ENV", "encryption_from_file"]

ENCRYPTION_ENV: Final = "ASYNCSESSION_ENCRYPTION"
"""The environment variable naming the encryption setting's JSON file."""
_FIELDS: Final = frozenset({"kms_providers", "provider", "master_key", "key_vault_namespace"})


def encryption_from_file(path: str) -> EncryptionOptions:
    """The encryption setting a JSON file describes.

    Raises:
        UsageError: the file cannot be read, is not a JSON object with ``kms_providers``,
            holds other fields, or describes a setting `EncryptionOptions` refuses.
    """
    try:
        loaded: object = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read the encryption setting {path!r}: {exc}") from exc
    if not isinstance(loaded, dict) or "kms_providers" not in loaded:
        raise UsageError(f"{path!r} must hold a JSON object with kms_providers")
    data = cast(dict[str, Any], loaded)
    unknown = set(data) - _FIELDS
    if unknown:
        raise UsageError(f"{path!r} holds unknown fields: {sorted(unknown)}")
    return EncryptionOptions(**data)
