"""`UserKeys`: a data key per user, found by name, created on first use, erased on request."""

from __future__ import annotations

import asyncio
import time
import uuid
import weakref
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

import bson
from bson.binary import Binary
from bson.errors import BSONError
from pymongo import AsyncMongoClient
from pymongo.errors import ConnectionFailure

from .._checks import require_text
from ..exceptions import ContentErased, EncryptionError, StorageUnavailable, UsageError
from ._engines import (
    CODEC_OPTIONS,
    CryptFailure,
    Engine,
    KeyTaken,
    decode,
    in_process_engine,
    mongo_engine,
)
from ._options import EncryptionOptions

__all__ = ["ENCRYPTED_SUBTYPE", "KEY_NAME_PREFIX", "UserKeys", "key_name"]

KEY_NAME_PREFIX: Final = "asyncsession:user:"
"""The alternate name of a user's data key is this prefix and the user id."""
ENCRYPTED_SUBTYPE: Final = 6
"""The BSON binary subtype of an encrypted value."""

_LIVE: weakref.WeakSet[UserKeys] = weakref.WeakSet()
"""Every `UserKeys` of the process: an erasure makes each forget the data keys it holds."""


MISSING: Final = object()
"""What `Opened.get` returns for a value it does not hold."""


class Opened:
    """Ciphertext -> its value, for values this process encrypted or decrypted lately.

    An encrypted value never changes and one ciphertext always holds one value, so a value once
    opened is handed out again by its ciphertext: kept as BSON (decoded afresh for each reader,
    who may change it) for at most the key cache's lifetime, at most ``capacity`` bytes in all,
    the least recently used going first. Dropped when a data key is deleted in this process.
    """

    __slots__ = ("_bytes", "_capacity", "_entries", "_ttl")

    def __init__(self, capacity: int, ttl_seconds: float) -> None:
        self._capacity = capacity
        self._ttl = ttl_seconds
        self._entries: OrderedDict[bytes, tuple[float, bytes]] = OrderedDict()
        self._bytes = 0

    def get(self, ciphertext: bytes) -> Any:
        """The value of ``ciphertext``, or `MISSING`."""
        entry = self._entries.get(ciphertext)
        if entry is None:
            return MISSING
        expires, plain = entry
        if expires <= time.monotonic():
            self._drop(ciphertext)
            return MISSING
        self._entries.move_to_end(ciphertext)
        return decode(plain, CODEC_OPTIONS)["v"]

    def put(self, ciphertext: bytes, value: Any) -> None:
        """Keep ``value``, the plaintext of ``ciphertext`` (when it fits)."""
        if self._capacity <= 0:
            return
        plain = bson.encode({"v": value}, codec_options=CODEC_OPTIONS)
        if len(plain) > self._capacity // 4:
            return  # a large body would push out a whole window of small ones
        self._drop(ciphertext)
        self._entries[ciphertext] = (time.monotonic() + self._ttl, plain)
        self._bytes += len(plain)
        while self._bytes > self._capacity:
            oldest = next(iter(self._entries))
            self._drop(oldest)

    def clear(self) -> None:
        """Forget every value."""
        self._entries.clear()
        self._bytes = 0

    def _drop(self, ciphertext: bytes) -> None:
        entry = self._entries.pop(ciphertext, None)
        if entry is not None:
            self._bytes -= len(entry[1])


class _KeyVaultUnavailable(EncryptionError, StorageUnavailable):
    """The key vault's server could not be reached: an encryption failure and an outage."""


def key_name(user_id: str) -> str:
    """The alternate name of ``user_id``'s data key in the key vault."""
    return KEY_NAME_PREFIX + require_text(user_id, "user_id")


def _key_id_of(value: Binary) -> str:
    """The id of the data key an encrypted value names (bytes 1 to 16 of its payload)."""
    return str(uuid.UUID(bytes=bytes(value)[1:17]))


def _error(action: str, user_id: str, failure: CryptFailure) -> EncryptionError:
    cause = failure.__cause__
    seen: BaseException | None = cause
    while seen is not None:
        if isinstance(seen, ConnectionFailure):
            return _KeyVaultUnavailable(
                f"the key vault is unreachable; could not {action} for user {user_id!r}: {seen}"
            )
        seen = getattr(seen, "cause", None) or seen.__cause__
    return EncryptionError(f"could not {action} for user {user_id!r}: {cause or failure}")


def _check_encrypted(value: object) -> Binary:
    if not isinstance(value, Binary) or value.subtype != ENCRYPTED_SUBTYPE or len(value) < 17:
        raise UsageError(
            f"not an encrypted value (a BSON binary of subtype 6): {type(value).__name__}"
        )
    return value


class UserKeys:
    """Each user's data key in one key vault: encrypt and decrypt their values, erase them.

    Built by the stores from an `EncryptionOptions`; build one yourself to share a key cache
    between stores of a process, or to encrypt values of your own. ``client`` is the MongoDB
    client of the deployment that holds the key vault (borrowed, never closed); without one,
    the keys live in this process (local master keys only), as the in-memory stores keep theirs.

    A user's data key is created on their first encryption, with the alternate name
    ``asyncsession:user:<user_id>``; MongoDB's unique index on ``keyAltNames`` (created before
    the first key, see `ensure_indexes`) makes it one key per user whichever processes race to
    create it. A key once fetched is kept in the process for `EncryptionOptions.key_cache_ttl`,
    so encrypting and decrypting a warm user's values sends no command at all; a value encrypted
    or decrypted here is kept decrypted for as long (`EncryptionOptions.opened_cache_bytes`),
    so reading it again decrypts nothing.
    """

    def __init__(
        self, options: EncryptionOptions, client: AsyncMongoClient[Any] | None = None
    ) -> None:
        if not isinstance(options, EncryptionOptions):
            raise UsageError(f"options must be EncryptionOptions, not {type(options).__name__}")
        self._options = options
        try:
            self._engine: Engine = (
                in_process_engine(options) if client is None else mongo_engine(options, client)
            )
        except (ValueError, TypeError) as exc:  # pymongocrypt checks the key services' settings
            if isinstance(exc, UsageError):
                raise
            raise UsageError(f"invalid kms_providers: {exc}") from exc
        self._creating: dict[str, asyncio.Future[None]] = {}
        self._indexed = False
        self._opened = Opened(options.opened_cache_bytes, options.key_cache_ttl.total_seconds())
        _LIVE.add(self)

    def __repr__(self) -> str:
        return f"UserKeys(key_vault_namespace={self._options.key_vault_namespace!r})"

    @property
    def options(self) -> EncryptionOptions:
        """The setting these keys follow."""
        return self._options

    async def ensure_indexes(self) -> None:
        """Create the key vault's unique index on ``keyAltNames`` (idempotent).

        Done by the first key creation of each process too; call it at startup to take it off
        the first user's request.
        """
        try:
            await self._engine.ensure_indexes()
        except CryptFailure as failure:
            raise _error("create the key vault's index", "-", failure) from failure.__cause__
        self._indexed = True

    async def encrypt(self, user_id: str, value: Any) -> Binary:
        """Encrypt ``value`` with ``user_id``'s data key, creating the key on first use.

        ``value`` is any value BSON holds (text, numbers, bytes, lists and documents of them,
        UTC datetimes); the result is a BSON binary of subtype 6 to store in its place.

        Raises:
            UsageError: ``value`` cannot be encoded as BSON.
            EncryptionError: the key vault or the key service failed.
        """
        require_text(user_id, "user_id")
        name = key_name(user_id)
        try:
            encrypted = await self._engine.encrypt(value, name)
        except (BSONError, OverflowError, UnicodeEncodeError) as exc:
            raise UsageError(f"this value cannot be encrypted as BSON: {exc}") from exc
        except CryptFailure:
            # most often: no key yet (a key vault read told it); create it, then retry
            await self._create(user_id, name)
            try:
                encrypted = await self._engine.encrypt(value, name)
            except CryptFailure as failure:
                raise _error("encrypt", user_id, failure) from failure.__cause__
        self._opened.put(bytes(encrypted), value)
        return encrypted

    async def _create(self, user_id: str, name: str) -> None:
        """Create the user's key once, however many tasks of this process ask at once."""
        running = self._creating.get(name)
        if running is not None:
            await asyncio.shield(running)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._creating[name] = future
        try:
            if not self._indexed:
                await self.ensure_indexes()
            try:
                await self._engine.create_key(name)
            except KeyTaken:
                pass  # another process made it first: the same key serves everyone
            except CryptFailure as failure:
                raise _error("create a data key", user_id, failure) from failure.__cause__
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: waiters re-raise it, nobody else must
            raise
        else:
            future.set_result(None)
        finally:
            del self._creating[name]

    async def decrypt(self, user_id: str, value: Binary) -> Any:
        """The value ``encrypt`` encrypted for ``user_id``.

        Raises:
            ContentErased: the data key is no longer in the key vault (the user was erased).
            EncryptionError: the key vault or key service failed, or the master key cannot open
                the data key.
            UsageError: ``value`` is not an encrypted value.
        """
        require_text(user_id, "user_id")
        encrypted = _check_encrypted(value)
        ciphertext = bytes(encrypted)
        known = self._opened.get(ciphertext)
        if known is not MISSING:
            return known
        try:
            opened = await self._engine.decrypt(encrypted)
        except CryptFailure as failure:
            key_id = Binary(bytes(encrypted)[1:17], 4)
            try:
                present = await self._engine.has_key(key_id=key_id)
            except CryptFailure:
                present = True  # the key vault failed too: report the first failure
            if not present:
                raise ContentErased(user_id, _key_id_of(encrypted)) from failure.__cause__
            raise _error("decrypt", user_id, failure) from failure.__cause__
        self._opened.put(ciphertext, opened)
        return opened

    async def has_key(self, user_id: str) -> bool:
        """Whether ``user_id`` has a data key in the key vault (one read of the key vault)."""
        require_text(user_id, "user_id")
        try:
            return await self._engine.has_key(key_alt_name=key_name(user_id))
        except CryptFailure as failure:
            raise _error("read the key vault", user_id, failure) from failure.__cause__

    async def delete_key(self, user_id: str) -> int:
        """Delete ``user_id``'s data key: their content, wherever a copy of it is, is unreadable.

        Every `UserKeys` of this process on the same key vault forgets the keys it holds at
        once; other processes stop using the key within `EncryptionOptions.key_cache_ttl`.
        Returns how many keys were deleted (0 when the user had none).
        """
        require_text(user_id, "user_id")
        try:
            deleted = await self._engine.delete_keys(key_name(user_id))
        except CryptFailure as failure:
            raise _error("delete the data key", user_id, failure) from failure.__cause__
        namespace = self._options.key_vault_namespace
        for keys in list(_LIVE):
            if keys._options.key_vault_namespace == namespace:
                keys._engine.reset()
                keys._opened.clear()
        return deleted

    async def rotate(
        self,
        *,
        user_id: str | None = None,
        provider: str | None = None,
        master_key: Mapping[str, Any] | None = None,
    ) -> int:
        """Encrypt the data keys again under a master key; content is not touched.

        With neither ``provider`` nor ``master_key``, each key is rewrapped under the master key
        it has (a key service that rotated its key material wraps it with the newest); with
        ``provider`` (one of ``kms_providers``, e.g. ``"local:2026"``) and its ``master_key``,
        the keys move to that master key, and the old one can be retired. Every user's key,
        or only ``user_id``'s. Returns how many keys were rewrapped.

        Raises:
            UsageError: ``provider`` is not configured, or ``master_key`` comes without it.
            EncryptionError: a key service or the key vault failed.
        """
        if master_key is not None and provider is None:
            raise UsageError("a master_key needs the provider it belongs to")
        if provider is not None and provider not in self._options.kms_providers:
            raise UsageError(
                f"provider {provider!r} is not one of kms_providers "
                f"{sorted(self._options.kms_providers)}"
            )
        if user_id is not None:
            require_text(user_id, "user_id")
            query: dict[str, Any] = {"keyAltNames": key_name(user_id)}
        else:
            query = {"keyAltNames": {"$regex": "^" + KEY_NAME_PREFIX}}
        try:
            return await self._engine.rewrap(query, provider, master_key)
        except CryptFailure as failure:
            raise _error("rewrap data keys", user_id or "*", failure) from failure.__cause__
