"""`EncryptionOptions`: the one setting that turns on encryption at rest, per user."""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, Final, cast

from ..exceptions import UsageError

__all__ = [
    "DEFAULT_KEY_CACHE_TTL",
    "DEFAULT_KEY_VAULT_NAMESPACE",
    "DEFAULT_MAX_SEARCH_CANDIDATES",
    "DEFAULT_OPENED_CACHE_BYTES",
    "EncryptionOptions",
]

DEFAULT_KEY_VAULT_NAMESPACE: Final = "encryption.__keyVault"
"""The key vault collection MongoDB's documentation uses: database ``encryption``, collection
``__keyVault``."""
DEFAULT_KEY_CACHE_TTL: Final = timedelta(seconds=60)
"""How long a process keeps a data key it has fetched (libmongocrypt's own default)."""
DEFAULT_MAX_SEARCH_CANDIDATES: Final = 10_000
"""How many events a text search of encrypted content decrypts at most."""
DEFAULT_OPENED_CACHE_BYTES: Final = 8 * 1024 * 1024
"""How many bytes of decrypted values a process keeps (for at most `key_cache_ttl`)."""
LOCAL_KEY_BYTES: Final = 96
"""The size of a local master key: libmongocrypt's requirement."""
_NEEDS_MASTER_KEY: Final = frozenset({"aws", "azure", "gcp"})


def _provider_type(name: str) -> str:
    """The type of a provider name: ``"local:dev"`` is a ``local`` provider."""
    return name.split(":", 1)[0]


def _local_key_bytes(value: object, provider: str) -> bytes:
    if isinstance(value, bytes | bytearray):
        key = bytes(value)
    elif isinstance(value, str):
        try:
            key = base64.b64decode(value, validate=True)
        except binascii.Error:
            raise UsageError(
                f"the {provider!r} master key must be {LOCAL_KEY_BYTES} bytes or their base64 text"
            ) from None
    else:
        raise UsageError(
            f"the {provider!r} master key must be bytes or base64 text, not {type(value).__name__}"
        )
    if len(key) != LOCAL_KEY_BYTES:
        raise UsageError(
            f"the {provider!r} master key must be {LOCAL_KEY_BYTES} bytes long, not {len(key)}"
        )
    return key


def _check_namespace(namespace: object) -> str:
    if not isinstance(namespace, str) or namespace.count(".") < 1:
        raise UsageError(f"key_vault_namespace must be 'database.collection', got {namespace!r}")
    database, collection = namespace.split(".", 1)
    if not database or not collection:
        raise UsageError(f"key_vault_namespace must be 'database.collection', got {namespace!r}")
    return namespace


@dataclass(frozen=True, slots=True, kw_only=True, eq=False, repr=False, weakref_slot=True)
class EncryptionOptions:
    """Encrypt each user's content at rest with a data key of their own.

    Give the same object to every store of a process (`MongoMemoryStore`, `DirectoryMemoryStore`,
    the session stores): stores given one object share its data keys and their cache. Each
    user's data key is created on first use in the key vault collection and found again by its
    alternate name, ``asyncsession:user:<user_id>``; the data keys are themselves encrypted with
    the master key of ``kms_providers``, which never leaves your key service (or, for
    development, your process).

    For development, `EncryptionOptions.local` with a 96-byte key. In production, the key
    services PyMongo supports, configured as PyMongo takes them::

        EncryptionOptions(
            kms_providers={"aws": {"accessKeyId": ..., "secretAccessKey": ...}},
            master_key={"region": "eu-west-1", "key": "arn:aws:kms:eu-west-1:...:key/..."},
        )

    Requires the ``[encryption]`` extra (``pip install 'asyncsession[encryption]'``).
    """

    kms_providers: Mapping[str, Mapping[str, Any]]
    """The key services, as PyMongo's ``kms_providers``: ``{"local": {"key": <96 bytes>}}``,
    ``{"aws": {...}}``, ``{"azure": {...}}``, ``{"gcp": {...}}``, ``{"kmip": {...}}``; a
    provider may carry a name (``"local:2025"``), so that two master keys can be configured
    while data keys are rotated from one to the other."""
    provider: str | None = None
    """The provider new data keys are created with; may be omitted when there is only one."""
    master_key: Mapping[str, Any] | None = None
    """The master key new data keys are encrypted with, as PyMongo's ``master_key`` (an AWS
    key's region and ARN, an Azure key vault and key name, ...); none for a local provider."""
    key_vault_namespace: str = DEFAULT_KEY_VAULT_NAMESPACE
    """``database.collection`` of the key vault on the MongoDB deployment of the store."""
    key_cache_ttl: timedelta = DEFAULT_KEY_CACHE_TTL
    """How long a process keeps a data key after fetching it: no command on the warm path, and
    a key deleted elsewhere stops working in this process after at most this long."""
    kms_tls_options: Mapping[str, Mapping[str, Any]] | None = None
    """TLS options per key service, as PyMongo's ``kms_tls_options``."""
    max_search_candidates: int = DEFAULT_MAX_SEARCH_CANDIDATES
    """How many events a session store decrypts at most to answer one text search (a keyword,
    keywords or a pattern): the server cannot read encrypted text, so the events the search's
    other criteria (session, user, types, times) leave are decrypted and matched in the
    process. A search that would decrypt more is refused with `UsageError`, never answered
    in part."""
    opened_cache_bytes: int = DEFAULT_OPENED_CACHE_BYTES
    """How many bytes of values a process keeps decrypted (0: none), each for at most
    `key_cache_ttl` after it was encrypted or decrypted here, so that a turn reads its window
    again without decrypting the events it has seen. They are no more than the process holds
    already (the data keys themselves, for as long); an erasure in this process drops them at
    once, and in another process they go within `key_cache_ttl`, as the data key does."""
    _provider: str = field(init=False, repr=False)

    def __post_init__(self) -> None:
        providers = self.kms_providers
        if not isinstance(providers, Mapping) or not providers:
            raise UsageError("kms_providers must name at least one key service")
        for name, config in providers.items():
            if not isinstance(name, str) or not isinstance(config, Mapping):
                raise UsageError(f"kms_providers[{name!r}] must be a mapping of its settings")
            if _provider_type(name) == "local":
                _local_key_bytes(config.get("key"), name)
        provider = self.provider
        if provider is None:
            if len(providers) != 1:
                raise UsageError(
                    f"kms_providers names {len(providers)} key services: say which one new "
                    "data keys use with provider="
                )
            provider = next(iter(providers))
        if provider not in providers:
            raise UsageError(
                f"provider {provider!r} is not one of kms_providers {sorted(providers)}"
            )
        if _provider_type(provider) in _NEEDS_MASTER_KEY and self.master_key is None:
            raise UsageError(f"data keys of provider {provider!r} need a master_key")
        _check_namespace(self.key_vault_namespace)
        ttl = self.key_cache_ttl
        if not isinstance(ttl, timedelta) or ttl < timedelta(milliseconds=1):
            raise UsageError(f"key_cache_ttl must be a timedelta of at least 1 ms, got {ttl!r}")
        limit = cast(object, self.max_search_candidates)
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
            raise UsageError(f"max_search_candidates must be an int >= 1, got {limit!r}")
        cache = cast(object, self.opened_cache_bytes)
        if isinstance(cache, bool) or not isinstance(cache, int) or cache < 0:
            raise UsageError(f"opened_cache_bytes must be an int >= 0, got {cache!r}")
        object.__setattr__(self, "_provider", provider)

    def __repr__(self) -> str:  # never the keys or credentials themselves
        return (
            f"EncryptionOptions(providers={sorted(self.kms_providers)!r}, "
            f"provider={self._provider!r}, key_vault_namespace={self.key_vault_namespace!r}, "
            f"key_cache_ttl={self.key_cache_ttl!r}, "
            f"max_search_candidates={self.max_search_candidates!r}, "
            f"opened_cache_bytes={self.opened_cache_bytes!r})"
        )

    @classmethod
    def local(
        cls,
        key: bytes | str,
        *,
        key_vault_namespace: str = DEFAULT_KEY_VAULT_NAMESPACE,
        key_cache_ttl: timedelta = DEFAULT_KEY_CACHE_TTL,
        max_search_candidates: int = DEFAULT_MAX_SEARCH_CANDIDATES,
        opened_cache_bytes: int = DEFAULT_OPENED_CACHE_BYTES,
    ) -> EncryptionOptions:
        """Encrypt with a local master key: 96 bytes, or their base64 text.

        For development and tests: whoever holds the key can read everything, so keep it out of
        the database, its backups and the source code. `generate_local_key` makes one.
        """
        return cls(
            kms_providers={"local": {"key": key}},
            key_vault_namespace=key_vault_namespace,
            key_cache_ttl=key_cache_ttl,
            max_search_candidates=max_search_candidates,
            opened_cache_bytes=opened_cache_bytes,
        )

    @staticmethod
    def generate_local_key() -> bytes:
        """A new random 96-byte local master key."""
        return os.urandom(LOCAL_KEY_BYTES)

    @property
    def data_key_provider(self) -> str:
        """The provider new data keys are created with (`provider`, or the only one)."""
        return self._provider

    @property
    def key_vault(self) -> tuple[str, str]:
        """The key vault's database and collection names."""
        database, collection = self.key_vault_namespace.split(".", 1)
        return database, collection

    @property
    def key_expiration_ms(self) -> int:
        """`key_cache_ttl` in whole milliseconds (at least 1), as libmongocrypt takes it."""
        return max(1, int(self.key_cache_ttl / timedelta(milliseconds=1)))

    def is_local_only(self) -> bool:
        """Whether every key service is a local master key (no network, no key service)."""
        return all(_provider_type(name) == "local" for name in self.kms_providers)

    def local_keys(self) -> dict[str, bytes]:
        """The local master keys by provider name, as bytes."""
        return {
            name: _local_key_bytes(config.get("key"), name)
            for name, config in self.kms_providers.items()
            if _provider_type(name) == "local"
        }
