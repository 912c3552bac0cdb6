"""Offloaded bodies in a GridFS bucket: written whole, read whole, deleted by session.

GridFS (``gridfs.AsyncGridFSBucket``) keeps a file as a ``files`` document and ``chunks`` of
255 KiB, and writes the chunks before the ``files`` document, so a reader never sees a file in
part. The store names each file ``<session id>\\x00<event id>\\x00<random>`` (ids hold no NUL),
so everything of one session, the chunks of an upload that died before its ``files`` document
included, is one range of ids: a delete removes the chunks of the range, then its ``files``
documents, and a delete that dies between the two is finished by the next (the ``files``
documents still name the session).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any, Final

from gridfs import AsyncGridFSBucket
from gridfs.errors import NoFile
from pymongo import WriteConcern
from pymongo.asynchronous.database import AsyncDatabase

__all__ = ["Bucket", "file_id"]

_SEPARATOR: Final = "\x00"
_WRITE_CONCERN: Final = WriteConcern("majority", j=True)


def file_id(session_id: str, event_id: str) -> str:
    """A new file id for ``event_id``'s body in ``session_id``."""
    return f"{session_id}{_SEPARATOR}{event_id}{_SEPARATOR}{secrets.token_hex(8)}"


def _range(session_id: str) -> dict[str, str]:
    """The ids of ``session_id``'s files (NUL sorts first, and ``\\x01`` right after it)."""
    return {"$gte": session_id + _SEPARATOR, "$lt": session_id + "\x01"}


class Bucket:
    """One GridFS bucket of a database."""

    __slots__ = ("_bucket", "_chunks", "_files")

    def __init__(self, database: AsyncDatabase[Any], name: str) -> None:
        self._bucket = AsyncGridFSBucket(database, name, write_concern=_WRITE_CONCERN)
        self._files = database.get_collection(f"{name}.files", write_concern=_WRITE_CONCERN)
        self._chunks = database.get_collection(f"{name}.chunks", write_concern=_WRITE_CONCERN)

    async def upload(self, file: str, data: bytes, metadata: Mapping[str, Any]) -> None:
        """Store ``data`` as the file ``file``."""
        filename = file.split(_SEPARATOR)[1]
        await self._bucket.upload_from_stream_with_id(file, filename, data, metadata=metadata)

    async def download(self, file: str) -> bytes | None:
        """The whole file, or ``None`` when it is gone."""
        try:
            stream = await self._bucket.open_download_stream(file)
        except NoFile:
            return None
        return await stream.read()

    async def delete(self, files: list[str]) -> None:
        """Delete these files (the chunks first: a file whose chunks are gone is gone)."""
        if files:
            await self._chunks.delete_many({"files_id": {"$in": files}})  # layout: GridFS's
            await self._files.delete_many({"_id": {"$in": files}})  # layout: GridFS's

    async def delete_session(self, session_id: str) -> None:
        """Delete every file of ``session_id``, whole or in part."""
        await self._chunks.delete_many({"files_id": _range(session_id)})  # layout: GridFS's
        await self._files.delete_many({"_id": _range(session_id)})  # layout: GridFS's
