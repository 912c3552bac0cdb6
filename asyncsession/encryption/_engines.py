"""The two places data keys live, behind one small interface: MongoDB, or this process.

Both are libmongocrypt, through ``pymongocrypt``'s explicit encrypter: the MongoDB engine is
PyMongo's `AsyncClientEncryption` (which is that encrypter plus I/O to the key vault collection
and the key services); the in-process engine is the same encrypter with its key vault I/O
answered from a dictionary in this process (`_InProcessKeyVault`), for the in-memory stores and
tests. So a value is encrypted the same way, into the same BSON binary (subtype 6), with key
documents of the same shape, wherever the keys are kept. Each engine keeps the data keys it has
fetched for `EncryptionOptions.key_cache_ttl` (libmongocrypt's own cache); `reset` drops them.

Errors leave an engine as `CryptFailure` (anything the encrypter or the key vault raised, as the
cause) or `KeyTaken` (a data key with that alternate name already exists).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Final, Protocol

import bson
from bson.binary import STANDARD, Binary
from bson.codec_options import CodecOptions
from bson.raw_bson import RawBSONDocument
from pymongo import AsyncMongoClient, WriteConcern
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.errors import DuplicateKeyError, OperationFailure, PyMongoError
from pymongo.read_concern import ReadConcern

from ..exceptions import UsageError
from ._options import EncryptionOptions

if TYPE_CHECKING:
    from pymongo.asynchronous.encryption import AsyncClientEncryption

    from ._vault import InProcessKeyVault

__all__ = [
    "ALGORITHM",
    "CODEC_OPTIONS",
    "CryptFailure",
    "Engine",
    "KeyTaken",
    "decode",
    "in_process_engine",
    "mongo_engine",
]

ALGORITHM: Final = "AEAD_AES_256_CBC_HMAC_SHA_512-Random"
"""Explicit encryption's randomized algorithm: equal values encrypt to different bytes."""
CODEC_OPTIONS: Final[CodecOptions[dict[str, Any]]] = CodecOptions(
    document_class=dict, tz_aware=True, uuid_representation=STANDARD
)
"""How values are turned into BSON before encryption and back after decryption."""
_INSTALL_HINT: Final = (
    "encryption at rest needs pymongocrypt: pip install 'asyncsession[encryption]'"
)
_INDEX_CONFLICTS: Final = frozenset({85, 86})  # IndexOptionsConflict, IndexKeySpecsConflict
decode: Callable[[bytes, CodecOptions[dict[str, Any]]], dict[str, Any]] = bson.decode  # pyright: ignore[reportUnknownMemberType, reportUnknownVariableType]
"""PyMongo's ``bson.decode``, typed (it is partly untyped)."""


class CryptFailure(Exception):
    """The encrypter or the key vault failed; the original error is the ``__cause__``."""


class KeyTaken(Exception):
    """A data key with the alternate name exists already (another task or process made it)."""


class Engine(Protocol):
    """Data keys in one key vault, and values encrypted and decrypted with them."""

    async def ensure_indexes(self) -> None:
        """Make alternate names unique in the key vault (idempotent)."""
        ...

    async def encrypt(self, value: Any, key_alt_name: str) -> Binary:
        """Encrypt ``value`` (any BSON value) with the data key of that alternate name."""
        ...

    async def decrypt(self, value: Binary) -> Any:
        """The value encrypted in ``value``."""
        ...

    async def create_key(self, key_alt_name: str) -> Binary:
        """Create a data key with that alternate name; its id. `KeyTaken` if one exists."""
        ...

    async def has_key(
        self, *, key_id: Binary | None = None, key_alt_name: str | None = None
    ) -> bool:
        """Whether the key vault holds a key with that id, or that alternate name."""
        ...

    async def delete_keys(self, key_alt_name: str) -> int:
        """Delete the data keys of that alternate name from the key vault; how many went."""
        ...

    async def rewrap(
        self, filter: Mapping[str, Any], provider: str | None, master_key: Mapping[str, Any] | None
    ) -> int:
        """Encrypt the matching data keys again under a master key; how many were rewrapped."""
        ...

    def reset(self) -> None:
        """Forget every data key this process holds: the next use fetches it again."""
        ...


def _load_pymongocrypt() -> Any:
    try:
        import pymongocrypt.asynchronous.explicit_encrypter as explicit  # pyright: ignore[reportMissingTypeStubs]
    except ImportError as exc:
        raise UsageError(_INSTALL_HINT) from exc
    return explicit


def mongo_engine(options: EncryptionOptions, client: AsyncMongoClient[Any]) -> Engine:
    """Data keys in the key vault collection that ``client`` reaches."""
    _load_pymongocrypt()
    if not isinstance(client, AsyncMongoClient):
        raise UsageError(
            "encryption at rest needs a PyMongo AsyncMongoClient for the key vault, "
            f"not {type(client).__name__} (Motor clients are not supported)"
        )
    return _MongoEngine(options, client)


_VAULTS: weakref.WeakKeyDictionary[EncryptionOptions, InProcessKeyVault] = (
    weakref.WeakKeyDictionary()
)
"""The in-process key vault of each setting: every in-memory store given one setting object
shares its keys."""


def in_process_vault(options: EncryptionOptions) -> InProcessKeyVault:
    """The in-process key vault of ``options`` (one per setting object, for the process)."""
    vault = _VAULTS.get(options)
    if vault is None:
        _load_pymongocrypt()
        from ._vault import InProcessKeyVault

        vault = _VAULTS[options] = InProcessKeyVault()
    return vault


def in_process_engine(options: EncryptionOptions) -> Engine:
    """Data keys in a dictionary of this process: local master keys only, no server."""
    if not options.is_local_only():
        raise UsageError(
            "the in-memory stores keep their data keys in the process and encrypt with local "
            f"master keys only; kms_providers names {sorted(options.kms_providers)}"
        )
    return _InProcessEngine(options)


class _MongoEngine:
    """PyMongo's `AsyncClientEncryption` over the key vault collection."""

    def __init__(self, options: EncryptionOptions, client: AsyncMongoClient[Any]) -> None:
        self._options = options
        self._client = client
        database, collection = options.key_vault
        self._vault: AsyncCollection[RawBSONDocument] = client[database].get_collection(
            collection,
            codec_options=CodecOptions(document_class=RawBSONDocument),
            read_concern=ReadConcern("majority"),
            write_concern=WriteConcern("majority"),
        )
        self._encryption = self._new()

    def _new(self) -> AsyncClientEncryption[dict[str, Any]]:
        from pymongo.asynchronous.encryption import AsyncClientEncryption

        encryption: AsyncClientEncryption[dict[str, Any]] = AsyncClientEncryption(
            dict(self._options.kms_providers),
            self._options.key_vault_namespace,
            self._client,
            CODEC_OPTIONS,
            kms_tls_options=(
                dict(self._options.kms_tls_options) if self._options.kms_tls_options else None
            ),
            key_expiration_ms=self._options.key_expiration_ms,
        )
        return encryption

    def reset(self) -> None:
        # Operations under way finish with the old encrypter; it is closed when they let go.
        self._encryption = self._new()

    async def ensure_indexes(self) -> None:
        try:
            # MongoDB's documented index for finding data keys by alternate name.
            await self._vault.create_index(
                "keyAltNames",
                unique=True,
                partialFilterExpression={"keyAltNames": {"$exists": True}},
            )
        except OperationFailure as exc:
            if exc.code not in _INDEX_CONFLICTS or not await self._has_unique_alt_names():
                raise CryptFailure("could not create the key vault's index") from exc
        except PyMongoError as exc:
            raise CryptFailure("could not create the key vault's index") from exc

    async def _has_unique_alt_names(self) -> bool:
        indexes = await self._vault.index_information()
        return any(
            spec.get("unique") and [field for field, _ in spec["key"]] == ["keyAltNames"]
            for spec in indexes.values()
        )

    async def encrypt(self, value: Any, key_alt_name: str) -> Binary:
        try:
            encrypted: Binary = await self._encryption.encrypt(
                value, ALGORITHM, key_alt_name=key_alt_name
            )
        except PyMongoError as exc:
            raise CryptFailure("could not encrypt") from exc
        return encrypted

    async def decrypt(self, value: Binary) -> Any:
        try:
            return await self._encryption.decrypt(value)
        except PyMongoError as exc:
            raise CryptFailure("could not decrypt") from exc

    async def create_key(self, key_alt_name: str) -> Binary:
        options = self._options
        try:
            key_id: Binary = await self._encryption.create_data_key(
                options.data_key_provider,
                master_key=dict(options.master_key) if options.master_key else None,
                key_alt_names=[key_alt_name],
            )
        except PyMongoError as exc:
            if isinstance(getattr(exc, "cause", None), DuplicateKeyError):
                raise KeyTaken(key_alt_name) from exc
            raise CryptFailure("could not create a data key") from exc
        return key_id

    async def has_key(
        self, *, key_id: Binary | None = None, key_alt_name: str | None = None
    ) -> bool:
        query = {"_id": key_id} if key_id is not None else {"keyAltNames": key_alt_name}
        try:
            return await self._vault.find_one(query, {"_id": 1}) is not None
        except PyMongoError as exc:
            raise CryptFailure("could not read the key vault") from exc

    async def delete_keys(self, key_alt_name: str) -> int:
        try:
            result = await self._vault.delete_many({"keyAltNames": key_alt_name})
        except PyMongoError as exc:
            raise CryptFailure("could not delete a data key") from exc
        return result.deleted_count

    async def rewrap(
        self, filter: Mapping[str, Any], provider: str | None, master_key: Mapping[str, Any] | None
    ) -> int:
        try:
            result = await self._encryption.rewrap_many_data_key(
                dict(filter), provider=provider, master_key=dict(master_key) if master_key else None
            )
        except PyMongoError as exc:
            raise CryptFailure("could not rewrap the data keys") from exc
        written = result.bulk_write_result
        return 0 if written is None else int(written.modified_count)


class _InProcessEngine:
    """pymongocrypt's explicit encrypter over `_InProcessKeyVault`."""

    def __init__(self, options: EncryptionOptions) -> None:
        self._options = options
        self._vault = in_process_vault(options)
        self._encrypter = self._new()

    def _new(self) -> Any:
        explicit = _load_pymongocrypt()
        from pymongocrypt.options import (  # pyright: ignore[reportMissingTypeStubs]
            MongoCryptOptions,
        )

        crypt_options = MongoCryptOptions(
            {name: dict(config) for name, config in self._options.kms_providers.items()},
            bypass_encryption=True,
            key_expiration_ms=self._options.key_expiration_ms,
        )
        return explicit.AsyncExplicitEncrypter(self._vault, crypt_options)

    def reset(self) -> None:
        self._encrypter = self._new()

    async def ensure_indexes(self) -> None:
        return None  # the dictionary refuses a second key of an alternate name itself

    async def encrypt(self, value: Any, key_alt_name: str) -> Binary:
        document = bson.encode({"v": value}, codec_options=CODEC_OPTIONS)
        try:
            encrypted = await self._encrypter.encrypt(
                document, ALGORITHM, key_alt_name=key_alt_name
            )
        except Exception as exc:
            raise CryptFailure("could not encrypt") from exc
        result: Binary = decode(encrypted, CODEC_OPTIONS)["v"]
        return result

    async def decrypt(self, value: Binary) -> Any:
        try:
            decrypted = await self._encrypter.decrypt(bson.encode({"v": value}))
        except Exception as exc:
            raise CryptFailure("could not decrypt") from exc
        return decode(decrypted, CODEC_OPTIONS)["v"]

    async def create_key(self, key_alt_name: str) -> Binary:
        try:
            key_id: Binary = await self._encrypter.create_data_key(
                self._options.data_key_provider, key_alt_names=[key_alt_name]
            )
        except DuplicateKeyError as exc:  # the in-process key vault refuses it as MongoDB does
            raise KeyTaken(key_alt_name) from exc
        except Exception as exc:
            raise CryptFailure("could not create a data key") from exc
        return key_id

    async def has_key(
        self, *, key_id: Binary | None = None, key_alt_name: str | None = None
    ) -> bool:
        return self._vault.has_key(key_id=key_id, key_alt_name=key_alt_name)

    async def delete_keys(self, key_alt_name: str) -> int:
        return self._vault.delete_keys(key_alt_name)

    async def rewrap(
        self, filter: Mapping[str, Any], provider: str | None, master_key: Mapping[str, Any] | None
    ) -> int:
        try:
            raw = await self._encrypter.rewrap_many_data_key(
                dict(filter), provider, dict(master_key) if master_key else None
            )
        except Exception as exc:
            raise CryptFailure("could not rewrap the data keys") from exc
        if raw is None:
            return 0
        return self._vault.replace_wrapping(RawBSONDocument(bytes(raw))["v"])
