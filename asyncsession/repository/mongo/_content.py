"""What a commit holds of its events' content: encrypted or in clear, whole or a preview with
the body in GridFS (docs/internals/mongodb.md, "Encrypted content", "Offloaded bodies")."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

import bson
from bson.binary import Binary
from pymongo.errors import PyMongoError

from ..._pymongo_errors import storage_errors
from ...encryption import UserKeys
from ...events import EventType, SessionEvent
from ...exceptions import EventTooLarge
from ...filters import EventFilter
from .._sealing import check_candidates, may_match
from ._layout import (
    BODY,
    COMMIT,
    EVENT_ID,
    EVENTS,
    FILE,
    ID,
    INCARNATION,
    LARGE,
    METADATA,
    SEALED,
    SESSION,
    SIZE,
    TIMESTAMP,
    TYPE,
    USER_ID,
    Doc,
    Store,
    as_utc,
    event_to_doc,
    file_id,
)

__all__ = [
    "Batch",
    "encode",
    "open_commits",
    "open_session",
    "seal_session",
    "too_large",
]

_BOUNDARIES: Final = (EventType.COMPACTION.name, EventType.REWIND.name)


async def seal_session(store: Store, user_id: str, fields: Doc) -> None:
    """Encrypt the metadata of a session document's ``fields`` in place (with encryption on
    and metadata to keep)."""
    if store.keys is not None and fields.get(METADATA):
        fields[METADATA] = await store.keys.encrypt(user_id, fields[METADATA])


async def open_session(store: Store, doc: Doc) -> None:
    """Decrypt a session document's metadata in place, and note its owner."""
    user_id: str = doc[USER_ID]
    store.owners.put(doc[ID], user_id)
    metadata = doc.get(METADATA)
    if isinstance(metadata, Binary) and store.keys is not None:
        doc[METADATA] = await store.keys.decrypt(user_id, metadata)


async def open_commits(
    store: Store,
    docs: Sequence[Doc],
    user_id: str,
    search: EventFilter | None = None,
    where: str = "",
) -> None:
    """Decrypt the bodies of commit documents in place (with encryption on).

    For a text ``search`` of encrypted content, the events its criteria on what is clear leave
    (the candidates) and the boundaries are kept and decrypted, the others dropped.

    Raises:
        UsageError: ``search`` has more candidates than ``max_search_candidates``.
    """
    keys = store.keys
    if keys is None:
        return
    if search is not None:
        count = 0
        for doc in docs:
            kept = [
                e
                for e in doc[EVENTS]
                if e[TYPE] in _BOUNDARIES
                or may_match(search, EventType(e[TYPE]), as_utc(e[TIMESTAMP]))
            ]
            count += sum(e[TYPE] not in _BOUNDARIES for e in kept)
            doc[EVENTS] = kept
        check_candidates(count, keys, where)
    for doc in docs:
        for event in doc[EVENTS]:
            body = event[BODY]
            if isinstance(body, Binary):
                event[BODY] = await keys.decrypt(user_id, body)


@dataclass(slots=True)
class Batch:
    """An append's events as their commit holds them, and the files of their offloaded bodies."""

    docs: list[Doc]
    wholes: list[tuple[Doc, SessionEvent, int]] = field(
        default_factory=list[tuple[Doc, SessionEvent, int]]
    )
    """The offloaded events: their entry in ``docs``, the whole event, its content's size."""
    files: dict[str, str] = field(default_factory=dict[str, str])
    """Event id -> the file its whole body was uploaded to."""

    async def upload(self, store: Store, session_id: str, user_id: str | None) -> None:
        """Upload the offloaded bodies and point their entries at them."""
        bucket, keys = store.bucket, store.keys
        assert bucket is not None
        with storage_errors(f"store a large body of session {session_id!r}"):
            for doc, whole, size in self.wholes:
                body = event_to_doc(whole)[BODY]
                if keys is not None:
                    assert user_id is not None
                    data = bytes(await keys.encrypt(user_id, body))
                else:
                    data = bson.encode(body)
                name = file_id(session_id, whole.id)
                await bucket.upload(name, data, {SESSION: session_id, EVENT_ID: whole.id})
                self.files[whole.id] = name
                doc[LARGE] = {FILE: name, SIZE: size, SEALED: keys is not None}

    async def discard(self, store: Store, committed: set[str]) -> None:
        """Delete the files of the events that were not committed (best effort: a file left
        behind goes with its session)."""
        gone = [name for event_id, name in self.files.items() if event_id not in committed]
        if gone and store.bucket is not None:
            with contextlib.suppress(PyMongoError):
                await store.bucket.delete(gone)


async def encode(store: Store, user_id: str | None, events: Sequence[SessionEvent]) -> Batch:
    """The events as their commit holds them: previews of those to offload, bodies encrypted
    for ``user_id`` with encryption on (the uploads are `Batch.upload`'s). The commit's size is
    not measured here: the driver refuses one over the limit (`too_large`)."""
    offloading = store.offloading if store.bucket is not None else None
    keys: UserKeys | None = store.keys
    batch = Batch(docs=[])
    for event in events:
        content = None if offloading is None else offloading.needs(event)
        kept = event
        if content is not None and offloading is not None:
            kept = offloading.preview(event, len(content))
        doc = event_to_doc(kept)
        if keys is not None:
            assert user_id is not None
            doc[BODY] = await keys.encrypt(user_id, doc[BODY])
        if content is not None:
            doc[LARGE] = {FILE: "", SIZE: len(content), SEALED: keys is not None}
            batch.wholes.append((doc, event, len(content)))
        batch.docs.append(doc)
    return batch


def too_large(store: Store, session_id: str, docs: list[Doc]) -> EventTooLarge:
    """The error for a commit over the server's document size limit: it names the event that
    takes it over and the size the commit has with it (measured only on this path)."""
    size = len(bson.encode({SESSION: session_id, COMMIT: 0, INCARNATION: 0, EVENTS: []}))
    for doc in docs:
        size += len(bson.encode(doc)) + 8
        if size > store.max_document_size:
            return EventTooLarge(doc[EVENT_ID], size, store.max_document_size)
    return EventTooLarge(docs[-1][EVENT_ID], size, store.max_document_size)
