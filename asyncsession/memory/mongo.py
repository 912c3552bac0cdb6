"""`MongoMemoryStore`: one scope's memory files as documents in a MongoDB collection."""

from __future__ import annotations

import contextlib
import secrets
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from bson.binary import Binary
from pymongo import ASCENDING, WriteConcern
from pymongo.asynchronous.collection import AsyncCollection
from pymongo.asynchronous.database import AsyncDatabase
from pymongo.errors import DuplicateKeyError

from .._pymongo_compat import aggregate
from .._pymongo_errors import pymongo_errors
from .._shield import shielded
from ..encryption import EncryptionOptions, UserKeys
from ..exceptions import MemoryStoreError, StorageUnavailable, UsageError
from ._base import DEFAULT_MAX_FILE_BYTES, DEFAULT_MAX_STORE_BYTES, BaseMemoryStore, split_path
from .store import MemoryEntry, MemoryFile

__all__ = ["MongoMemoryStore"]

_SEPARATOR = "\x1f"  # may appear in neither scopes nor paths, so ids cannot collide
_MAX_DOCUMENT_TEXT = 15 * 1024 * 1024  # stay clear of MongoDB's 16 MiB document limit
_INDEX_NAME = "scope_path_unique"
_MOVE_ATTEMPTS = 10
_WRITE_CONCERN = WriteConcern("majority", j=True)  # as durable as the session store's writes


class _MemoryStoreUnavailable(MemoryStoreError, StorageUnavailable):
    """The memory store's server could not be reached: both a backend and a storage outage."""


def _map_pymongo_errors(rel: str) -> contextlib.AbstractContextManager[None]:
    """Translate driver errors into reason ``"backend"`` (at the one PyMongo boundary)."""
    return pymongo_errors(
        lambda text: MemoryStoreError("backend", rel, text),
        lambda exc: f"{type(exc).__name__}: {exc} ({rel or '/'})",
        unavailable=lambda exc: _MemoryStoreUnavailable(
            "backend", rel, f"{type(exc).__name__}: {exc} ({rel or '/'})"
        ),
    )


def _prefix_range(rel: str) -> dict[str, str]:
    """A ``path`` filter matching everything strictly below the directory `rel`."""
    return {"$gte": rel + "/", "$lt": rel + "0"}


class MongoMemoryStore(BaseMemoryStore):
    """One scope's memory files in a MongoDB collection (default ``memories``), one document
    per file (the layout is in the internals pages).

    Concurrent agents of one scope, in any number of processes, never lose an edit: a write is
    a compare-and-set on the file's version, and the loser gets reason ``"conflict"``. A move
    that races an edit keeps the edit. A directory moves file by file: not atomic as a whole (a
    reader may briefly see it half done), but once started it runs to completion even if the
    caller is cancelled. The scope's size limit is checked before a write, so racing writers
    can overshoot it by their own writes at most.

    The store borrows the database (a PyMongo `AsyncDatabase`, or a Motor one) and never closes
    the client; call `ensure_indexes` once at startup. Writes use a journaled majority write
    concern whatever the client's default. A server that cannot be reached raises an error that
    is both a `MemoryStoreError` (reason ``"backend"``) and a
    `asyncsession.exceptions.StorageUnavailable`.

    Encryption at rest: given ``encryption``, each file's text is stored encrypted with the
    data key of the user the scope names (the scope is the user id, as
    `asyncsession.advisors.AutoMemoryToolsAdvisor` scopes it); path, size, version and time stay
    in clear. A file of a user whose key was deleted raises
    `asyncsession.exceptions.ContentErased` when read; files written before encryption was
    turned on are read as they are.
    """

    def __init__(
        self,
        database: AsyncDatabase[Any],
        *,
        scope: str,
        collection: str = "memories",
        root: str = "/memories",
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_store_bytes: int | None = DEFAULT_MAX_STORE_BYTES,
        encryption: EncryptionOptions | UserKeys | None = None,
    ) -> None:
        """Bind a store to one scope's documents in ``database[collection]``.

        Args:
            database: A PyMongo ``AsyncDatabase`` (borrowed, never closed).
            scope: The scope key (user, tenant, agent): a non-blank string of at most 128
                characters without control characters.
            collection: The collection holding every scope's memory files.
            root: The virtual root directory shown to the model.
            max_file_bytes: The largest file this store writes, in UTF-8 bytes.
            max_store_bytes: The largest total of the scope's files, or ``None`` for no limit.
            encryption: Encrypt each file's text with the data key of the scope's user (see
                `asyncsession.encryption`); the key vault is on ``database``'s deployment.

        Raises:
            ValueError: the scope or a limit is invalid.
        """
        super().__init__(scope, max_file_bytes, max_store_bytes, file_cap=_MAX_DOCUMENT_TEXT)
        self._database = database
        self._collection_name = collection
        self._collection: AsyncCollection[Any] = database.get_collection(
            collection, write_concern=_WRITE_CONCERN
        )
        self._root = root
        self._keys = (
            encryption
            if encryption is None or isinstance(encryption, UserKeys)
            else UserKeys(encryption, database.client)
        )

    def __repr__(self) -> str:
        return f"MongoMemoryStore(collection={self._collection_name!r}, scope={self._scope!r})"

    @property
    def root(self) -> str:
        """The virtual root directory shown to the model."""
        return self._root

    def with_scope(self, scope: str) -> MongoMemoryStore:
        """Return a store over the same collection and settings, bound to another scope."""
        return MongoMemoryStore(
            self._database,
            scope=scope,
            collection=self._collection_name,
            root=self._root,
            max_file_bytes=self._max_file_bytes,
            max_store_bytes=self._max_store_bytes,
            encryption=self._keys,
        )

    async def ensure_indexes(self) -> None:
        """Create the unique ``(scope, path)`` index listings use; safe to call repeatedly."""
        with _map_pymongo_errors(""):
            await self._collection.create_index(
                [("scope", ASCENDING), ("path", ASCENDING)], unique=True, name=_INDEX_NAME
            )

    def _id(self, rel: str) -> str:
        return f"{self._scope}{_SEPARATOR}{rel}"

    async def _stat(self, rel: str) -> MemoryEntry | None:
        if not rel:
            return MemoryEntry(name="", is_dir=True, size=0)
        name = split_path(rel)[1]
        with _map_pymongo_errors(rel):
            doc = await self._find_file(rel, {"size": 1})
            if doc is not None:
                return MemoryEntry(name=name, is_dir=False, size=int(doc["size"]))
            if await self._is_dir(rel):
                return MemoryEntry(name=name, is_dir=True, size=0)
        return None

    async def _read(self, rel: str) -> MemoryFile | None:
        with _map_pymongo_errors(rel):
            doc = await self._find_file(rel, {"text": 1, "version": 1})
            if doc is None:
                if await self._is_dir(rel):
                    raise MemoryStoreError("is_a_directory", rel)
                return None
        return MemoryFile(text=await self._text_of(doc["text"]), version=int(doc["version"]))

    async def _stored(self, text: str) -> str | Binary:
        """What a file's text is stored as: itself, or encrypted with the scope's user's key."""
        if self._keys is None:
            return text
        return await self._keys.encrypt(self._scope, text)

    async def _text_of(self, stored: object) -> str:
        """A stored text, decrypted if it was encrypted."""
        if isinstance(stored, Binary):
            if self._keys is None:
                raise UsageError(
                    "this memory file is encrypted: give the store the encryption setting"
                )
            return str(await self._keys.decrypt(self._scope, stored))
        return str(stored)

    async def _list_dir(self, rel: str) -> list[MemoryEntry]:
        query: dict[str, Any] = {"scope": self._scope}
        if rel:
            query["path"] = _prefix_range(rel)
        files: dict[str, int] = {}
        dirs: set[str] = set()
        with _map_pymongo_errors(rel):
            if rel and await self._find_file(rel, {"_id": 1}) is not None:
                raise MemoryStoreError("not_a_directory", rel)
            async for doc in self._collection.find(query, {"path": 1, "size": 1}):
                rest = str(doc["path"])[len(rel) + 1 if rel else 0 :]
                head, slash, _ = rest.partition("/")
                if slash:
                    dirs.add(head)
                else:
                    files[head] = int(doc["size"])
        if rel and not files and not dirs:
            raise MemoryStoreError("not_found", rel)
        entries = [MemoryEntry(name=name, is_dir=True, size=0) for name in dirs]
        entries += [MemoryEntry(name=name, is_dir=False, size=size) for name, size in files.items()]
        entries.sort(key=lambda entry: entry.name)
        return entries

    async def _write(
        self, rel: str, text: str, data: bytes, expected_version: int | None
    ) -> MemoryFile:
        size = len(data)
        version = secrets.randbits(63)
        stored = await self._stored(text)
        fields = {"text": stored, "version": version, "size": size, "updated_at": datetime.now(UTC)}
        with _map_pymongo_errors(rel):
            if expected_version is None:
                await self._check_parents(rel)
                if await self._is_dir(rel):
                    raise MemoryStoreError("is_a_directory", rel)
                await self._check_store_limit(rel, size)
                try:
                    await self._collection.insert_one(
                        {"_id": self._id(rel), "scope": self._scope, "path": rel, **fields}
                    )
                except DuplicateKeyError:
                    raise MemoryStoreError("exists", rel) from None
            else:
                await self._check_store_limit(rel, size)
                result = await self._collection.update_one(
                    {"_id": self._id(rel), "scope": self._scope, "version": expected_version},
                    {"$set": fields},
                )
                if result.matched_count != 1:
                    raise MemoryStoreError("conflict", rel)
        return MemoryFile(text=text, version=version)

    async def _delete(self, rel: str) -> MemoryEntry:
        name = split_path(rel)[1]
        with _map_pymongo_errors(rel):
            doc = await self._collection.find_one_and_delete(
                {"_id": self._id(rel), "scope": self._scope}, projection={"size": 1}
            )
            if doc is not None:
                return MemoryEntry(name=name, is_dir=False, size=int(doc["size"]))
            result = await self._collection.delete_many(
                {"scope": self._scope, "path": _prefix_range(rel)}
            )
        if result.deleted_count == 0:
            raise MemoryStoreError("not_found", rel)
        return MemoryEntry(name=name, is_dir=True, size=0)

    async def _rename(self, old: str, new: str) -> None:
        await shielded(self._move_all(old, new))  # never a file left in both places

    async def _move_all(self, old: str, new: str) -> None:
        with _map_pymongo_errors(old):
            source = await self._find_file(old, None)
            moves: list[tuple[Mapping[str, Any], str]]
            if source is not None:
                moves = [(source, new)]
            else:
                query = {"scope": self._scope, "path": _prefix_range(old)}
                moves = [
                    (doc, new + str(doc["path"])[len(old) :])
                    async for doc in self._collection.find(query)
                ]
                if not moves:
                    raise MemoryStoreError("not_found", old)
            self._check_target(old, new)
            if await self._exists(new):
                raise MemoryStoreError("exists", new)
            await self._check_parents(new)
            for doc, target in moves:
                await self._move(doc, target, is_single_file=source is not None)

    async def _move(self, doc: Mapping[str, Any], target: str, *, is_single_file: bool) -> None:
        """Copy one file document to `target`, then drop the original if it is unchanged.

        If the original changed in between, the copy is dropped again and the move retried
        with the fresh original; if it was deleted in between, nothing is left to move.
        """
        path = str(doc["path"])
        for _ in range(_MOVE_ATTEMPTS):
            copy = {
                **doc,
                "_id": self._id(target),
                "path": target,
                "version": secrets.randbits(63),
                "updated_at": datetime.now(UTC),
            }
            try:
                await self._collection.insert_one(copy)
            except DuplicateKeyError:
                raise MemoryStoreError("exists", target) from None
            removed = await self._collection.delete_one(
                {"_id": doc["_id"], "scope": self._scope, "version": doc["version"]}
            )
            if removed.deleted_count == 1:
                return
            await self._collection.delete_one(
                {"_id": copy["_id"], "scope": self._scope, "version": copy["version"]}
            )
            fresh = await self._find_file(path, None)
            if fresh is None:
                if is_single_file:
                    raise MemoryStoreError("not_found", path)
                return
            doc = fresh
        raise MemoryStoreError("conflict", path)

    async def _find_file(self, rel: str, projection: Mapping[str, int] | None) -> Any:
        return await self._collection.find_one(
            {"_id": self._id(rel), "scope": self._scope}, projection
        )

    async def _is_dir(self, rel: str) -> bool:
        query = {"scope": self._scope, "path": _prefix_range(rel)}
        return await self._collection.find_one(query, {"_id": 1}) is not None

    async def _exists(self, rel: str) -> bool:
        return await self._find_file(rel, {"_id": 1}) is not None or await self._is_dir(rel)

    async def _check_parents(self, rel: str) -> None:
        """Refuse a path whose ancestors include a file."""
        parts = rel.split("/")
        prefixes = ["/".join(parts[:i]) for i in range(1, len(parts))]
        if not prefixes:
            return
        doc = await self._collection.find_one(
            {"_id": {"$in": [self._id(prefix) for prefix in prefixes]}, "scope": self._scope},
            {"path": 1},
        )
        if doc is not None:
            raise MemoryStoreError("not_a_directory", str(doc["path"]))

    async def _check_store_limit(self, rel: str, size: int) -> None:
        """Refuse a write that grows the scope beyond its limit (shrinking is always allowed)."""
        if self._max_store_bytes is None:
            return
        sums = await aggregate(
            self._collection,
            [
                {"$match": {"scope": self._scope}},
                {
                    "$group": {
                        "_id": None,
                        "all": {"$sum": "$size"},
                        "old": {"$sum": {"$cond": [{"$eq": ["$path", rel]}, "$size", 0]}},
                    }
                },
            ],
        )
        old_size = int(sums[0]["old"]) if sums else 0
        total = (int(sums[0]["all"]) if sums else 0) - old_size + size
        if size > old_size:
            self._check_total(rel, total)
