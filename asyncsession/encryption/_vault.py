"""`InProcessKeyVault`: libmongocrypt's key vault I/O, answered from a dictionary.

libmongocrypt asks its caller for key documents (by id or alternate name) and hands it new or
rewrapped ones to store; PyMongo answers from the key vault collection. This class answers from
memory, so the in-memory stores encrypt exactly as the MongoDB ones do, without a server. It
understands the filters libmongocrypt and `asyncsession.encryption` send: ``$or``, ``$and``,
``$in``, ``$regex``, ``$exists`` and equality, on ``_id`` and ``keyAltNames``. A second key with
an alternate name that a key already has is refused, as MongoDB's unique index on
``keyAltNames`` does.

Imported only once ``pymongocrypt`` is known to be installed.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import bson
from bson.binary import UUID_SUBTYPE, Binary
from bson.codec_options import CodecOptions
from pymongo.errors import DuplicateKeyError
from pymongocrypt.asynchronous.state_machine import (  # pyright: ignore[reportMissingTypeStubs]
    AsyncMongoCryptCallback,
)

__all__ = ["InProcessKeyVault"]

_KEY_CODEC: CodecOptions[dict[str, Any]] = CodecOptions(document_class=dict)
"""Key documents as dictionaries, ids as BSON binaries (as libmongocrypt writes them)."""


def _decode(raw: bytes) -> dict[str, Any]:
    document: dict[str, Any] = bson.decode(raw, _KEY_CODEC)  # pyright: ignore[reportUnknownMemberType]
    return document


def _values(document: Mapping[str, Any], field: str) -> list[Any]:
    value: object = document.get(field)
    if value is None:
        return []
    if isinstance(value, list):
        items: list[Any] = value  # pyright: ignore[reportUnknownVariableType]
        return list(items)
    return [value]


def _field_matches(document: Mapping[str, Any], field: str, condition: object) -> bool:
    values = _values(document, field)
    if not isinstance(condition, Mapping):
        return condition in values
    operators = cast(Mapping[str, Any], condition)
    if not any(key.startswith("$") for key in operators):
        return condition in values
    for operator, operand in operators.items():
        if operator == "$in":
            choices = cast(list[Any], operand)
            if not any(value in choices for value in values):
                return False
        elif operator == "$regex":
            pattern = str(operand)
            if not any(isinstance(v, str) and re.search(pattern, v) for v in values):
                return False
        elif operator == "$exists":
            if bool(values) != bool(operand):
                return False
        else:
            raise ValueError(f"the in-process key vault does not understand {operator!r}")
    return True


def matches(document: Mapping[str, Any], query: Mapping[str, Any]) -> bool:
    """Whether a key document matches a key vault filter."""
    for field, condition in query.items():
        if field == "$or":
            if not any(matches(document, part) for part in condition):
                return False
        elif field == "$and":
            if not all(matches(document, part) for part in condition):
                return False
        elif not _field_matches(document, field, condition):
            return False
    return True


class InProcessKeyVault(AsyncMongoCryptCallback):  # type: ignore[misc]  # pyright: ignore[reportUntypedBaseClass]
    """Key documents by id, in this process; the I/O libmongocrypt asks of a driver."""

    def __init__(self) -> None:
        self._keys: dict[bytes, bytes] = {}

    def _documents(self) -> list[tuple[bytes, dict[str, Any]]]:
        return [(key_id, _decode(raw)) for key_id, raw in self._keys.items()]

    async def kms_request(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, kms_context: object
    ) -> None:
        raise RuntimeError("the in-process key vault uses local master keys only")

    async def collection_info(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, database: str, filter: bytes
    ) -> None:
        raise RuntimeError("explicit encryption never asks for collection information")

    async def mark_command(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, database: str, cmd: bytes
    ) -> bytes:
        raise RuntimeError("explicit encryption never asks to mark a command")

    async def fetch_keys(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, filter: bytes
    ) -> AsyncIterator[bytes]:
        query = _decode(filter)
        found = [self._keys[key_id] for key_id, doc in self._documents() if matches(doc, query)]
        for raw in found:
            yield raw

    async def insert_data_key(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, data_key: bytes
    ) -> Binary:
        document = _decode(data_key)
        key_id = document["_id"]
        if not isinstance(key_id, Binary) or key_id.subtype != UUID_SUBTYPE:
            raise TypeError("a data key's _id must be a UUID")
        names = set(_values(document, "keyAltNames"))
        for _, other in self._documents():
            if names & set(_values(other, "keyAltNames")):
                raise DuplicateKeyError(f"a data key named {sorted(names)} exists")
        self._keys[bytes(key_id)] = bytes(data_key)
        return key_id

    def bson_encode(  # pyright: ignore[reportIncompatibleMethodOverride]
        self, doc: Mapping[str, Any]
    ) -> bytes:
        return bson.encode(doc)

    async def close(  # pyright: ignore[reportIncompatibleMethodOverride]
        self,
    ) -> None:
        return None

    def has_key(self, *, key_id: Binary | None = None, key_alt_name: str | None = None) -> bool:
        """Whether a key has that id, or that alternate name."""
        if key_id is not None:
            return bytes(key_id) in self._keys
        return any(key_alt_name in _values(doc, "keyAltNames") for _, doc in self._documents())

    def delete_keys(self, key_alt_name: str) -> int:
        """Delete the keys of an alternate name; how many went."""
        gone = [
            key_id
            for key_id, doc in self._documents()
            if key_alt_name in _values(doc, "keyAltNames")
        ]
        for key_id in gone:
            del self._keys[key_id]
        return len(gone)

    def replace_wrapping(self, rewrapped: Sequence[Mapping[str, Any]]) -> int:
        """Store rewrapped keys' new key material and master key, as PyMongo does; how many."""
        count = 0
        for key in rewrapped:
            key_id = bytes(key["_id"])
            if key_id not in self._keys:
                continue  # deleted while it was being rewrapped
            document = _decode(self._keys[key_id])
            document.update(
                keyMaterial=key["keyMaterial"],
                masterKey=dict(key["masterKey"]),
                updateDate=datetime.now(UTC),
            )
            self._keys[key_id] = bson.encode(document)
            count += 1
        return count
