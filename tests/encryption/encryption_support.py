"""Helpers of the encryption tests: a fixed local master key, a setting per database."""

from __future__ import annotations

import base64
import socket
from typing import Any

from pymongo.asynchronous.database import AsyncDatabase

from asyncsession.encryption import EncryptionOptions

LOCAL_KEY = base64.b64encode(bytes(range(96))).decode()
"""A fixed local master key (base64), so that child processes can be given it."""


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def options_for(
    database: AsyncDatabase[Any] | None, key: str | bytes = LOCAL_KEY
) -> EncryptionOptions:
    """A local-key setting whose key vault is in ``database`` (dropped after the test)."""
    namespace = f"{database.name}.keyvault" if database is not None else "vault.keys"
    return EncryptionOptions.local(key, key_vault_namespace=namespace)


def encrypted(keys: Any) -> dict[str, Any]:
    """The arguments of a session store that encrypts with ``keys`` and keeps bodies over
    2 KiB in its bodies bucket (so the tests' large events are offloaded)."""
    return {"encryption": keys, "offload_threshold": 2048, "preview_chars": 200}
