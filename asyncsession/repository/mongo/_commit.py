"""The commit: one guarded update of the session document appends a batch as one version.

Every write that changes a log commits through one update of the session document, guarded by
everything it depends on: the expected version, that none of its event ids is committed yet, and
that its attempt was not fenced off (see `_ids`). An append ``$push``-es its events onto
the tail and ``$inc``-s the version and the position counter, so no read is needed first. When
the `TailHints` say the tail has room, the commit is an ``update_one`` that also checks exactly
that and returns nothing (sent with other sessions' commits due at the same time, see
`_batch`); otherwise it is a ``find_one_and_update`` whose post-image says
whether to roll forward (and, when the hints expect this commit to take the tail to `K_MAX`,
holds the oldest entries to roll forward from). The commit after a roll-forward's copy also
cuts the copied entries from the tail (a `Trim`), guarded by the document being exactly as the
roll-forward left it. A wrong guess costs a retry, never a wrong commit.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from pymongo import ReturnDocument
from pymongo.errors import DuplicateKeyError

from ..._pymongo_errors import storage_errors
from ...exceptions import AccessDenied, SessionNotFound, StorageError
from ._batch import UpdateBatcher
from ._codec import Doc, new_token
from ._drawn import Reservations, write_tokens
from ._hints import K_MAX, TailHints, Trim
from ._ids import MAX_ROUNDS, IdRegistry
from ._layout import (
    ANY_ARCHIVED,
    COMPACTIONS,
    FENCES,
    ID,
    INSERTS,
    PENDING,
    SEQ,
    TAIL,
    TAIL_SIZE,
    USER_ID,
    VERSION,
)
from ._positions import GAP
from ._prepare import Prepared
from ._rollforward import PREFIX, RollForward, prefix_projection
from ._state import ids_in
from ._store import Store

__all__ = ["Committer"]


class Committer:
    """Appends batches to session documents, one attempt at a time."""

    def __init__(
        self,
        store: Store,
        ids: IdRegistry,
        roller: RollForward,
        hints: TailHints,
        reservations: Reservations,
    ) -> None:
        self._store = store
        self._ids = ids
        self._roller = roller
        self._hints = hints
        self._reservations = reservations
        self.updates = UpdateBatcher(lambda: store.sessions)
        """The hot-path commits, batched across sessions while one is on the wire."""

    async def append(
        self,
        session_id: str,
        prepared: Sequence[Prepared],
        expected_version: int | None,
        *,
        user_id: str | None = None,
        whole: bool = False,
        reserve_ids: Sequence[str] = (),
        unseen: Collection[str] = (),
        create: Doc | None = None,
        window: Doc | None = None,
    ) -> tuple[bool, Doc | None]:
        """Append a batch as one version; see ``SessionRepository.append_events``.

        With ``whole``, returns the session document as of the commit (or as read, when every
        event was a replay), projected by ``window`` if given (a ``$slice`` of the tail).
        ``reserve_ids`` are registered too, for a later append by this process that then needs
        no registration of its own. ``create`` is a new session
        document (without its log) to insert, holding the batch, if the session does not exist.
        """
        ids = [p.event.id for p in prepared]
        extra = [i for i in dict.fromkeys(reserve_ids) if i not in set(ids)]
        # Ids registered ahead keep their registrations: only the others, and ``extra``, are
        # registered, under one of the reserved ids' tokens when there is one, and the commit
        # is guarded against a fence on any token the batch's ids are held under. So a batch
        # mixing ids of the pool (of one refill or of several) with fresh ones registers only
        # what is new, and never mistakes its own registrations for a dead attempt's.
        held = self._reservations.take(session_id, ids)
        token, also = write_tokens(held)
        todo = [*(i for i in ids if i not in held), *extra]
        register = registers = bool(todo)
        replayed: set[str] = set()
        fenced: set[str] = set()
        wrote = False  # big-event documents written ahead under ``token``
        for _ in range(MAX_ROUNDS):
            if register:
                registered = await self._ids.reserve(
                    session_id, todo, token, creating=create is not None, unseen=unseen
                )
                replayed |= registered.replayed
                fenced |= registered.fenced
                register = False
            fresh = [p for p in prepared if p.event.id not in replayed]
            if not fresh:
                doc = await self._read_checked(session_id, user_id) if whole else None
                self._reservations.add(session_id, [i for i in extra if i not in replayed], token)
                return True, doc
            big = [p for p in fresh if p.document is not None]
            if big:
                await self._ids.prewrite(session_id, big, token, fenced)
                wrote = True
            doc = await self.commit(
                session_id, fresh, token, expected_version, user_id, whole, window, also
            )
            if doc is None and create is not None:
                doc = await self._create(create, fresh)
            if doc is not None:
                self._reservations.add(session_id, [i for i in extra if i not in replayed], token)
                # registering ids ahead (``extra``) was a command more than this append needed
                paid = bool(extra)
                await self._roller.after_commit(
                    session_id, doc, len(fresh), whole, paid=paid, registered=registers
                )
                return True, doc
            with storage_errors(f"read session {session_id!r}"):
                current = await self._store.sessions.find_one(
                    {ID: session_id},
                    {
                        VERSION: 1,
                        USER_ID: 1,
                        FENCES: 1,
                        f"{TAIL}.{ID}": 1,
                        f"{PENDING}.{INSERTS}.{ID}": 1,
                    },
                )
            if current is None:
                await self._release(session_id, [*ids, *extra], token, also, wrote)
                raise SessionNotFound(session_id)
            if user_id is not None and current[USER_ID] != user_id:
                await self._release(session_id, [*ids, *extra], token, also, wrote)
                raise AccessDenied(session_id, user_id)
            if {token, *also} & set(current.get(FENCES, ())):
                token, register, wrote = new_token(), True, False  # our ids were adopted
                todo, also = [*ids, *extra], []
                continue
            now = ids_in(current, [p.event.id for p in fresh])
            if now:
                replayed |= now  # committed meanwhile by an attempt that adopted them
                continue
            if expected_version is not None and current[VERSION] != expected_version:
                await self._release(session_id, [*ids, *extra], token, also, wrote)
                return False, None
        raise StorageError(f"could not append to session {session_id!r}: it kept changing")

    async def _release(
        self, session_id: str, ids: list[str], token: str, also: list[str], wrote: bool
    ) -> None:
        """Drop the registrations of an append that will not commit, under every token its
        ids are held under (big-event documents were written only under ``token``)."""
        await self._ids.release_held(session_id, ids, token, also, written=wrote)

    async def _create(self, fields: Doc, fresh: Sequence[Prepared]) -> Doc | None:
        """Insert a new session document holding ``fresh`` as its first version, positioned as
        an append to an empty log would be; ``None`` if the session exists."""
        added = len(fresh)
        doc: Doc = {
            **fields,
            VERSION: 1,
            SEQ: added * GAP,
            TAIL: [p.entry for p in fresh],
            TAIL_SIZE: added,
        }
        if any(p.event.archived for p in fresh):
            doc[ANY_ARCHIVED] = True
        with storage_errors(f"create session {fields[ID]!r}"):
            try:
                await self._store.sessions.insert_one(doc)
            except DuplicateKeyError:
                return None  # created meanwhile: the append goes on as for any failed commit
        self._hints.note(fields[ID], added, False)
        return doc

    async def _read_checked(self, session_id: str, user_id: str | None) -> Doc:
        with storage_errors(f"read session {session_id!r}"):
            doc = await self._store.sessions.find_one({ID: session_id})
        if doc is None:
            raise SessionNotFound(session_id)
        if user_id is not None and doc[USER_ID] != user_id:
            raise AccessDenied(session_id, user_id)
        return doc

    async def commit(
        self,
        session_id: str,
        fresh: Sequence[Prepared],
        token: str,
        expected_version: int | None,
        user_id: str | None,
        whole: bool,
        window: Doc | None = None,
        also: Sequence[str] = (),
        batches: int = 1,
    ) -> Doc | None:
        """Try one guarded commit of ``fresh`` (registered under ``token``, and some under the
        ``also`` tokens) as ``batches`` versions.

        Returns ``None`` when the guard failed, an empty document when the commit needed no
        post-image, and else the session document after it (with ``whole``: whole, or projected
        by ``window``; else its version, tail length and pending flag).
        """
        ids = [p.event.id for p in fresh]
        guard: Doc = {
            ID: session_id,
            f"{TAIL}.{ID}": {"$nin": ids},
            f"{PENDING}.{INSERTS}.{ID}": {"$nin": ids},
            FENCES: {"$nin": [token, *also]},
        }
        if expected_version is not None:
            guard[VERSION] = expected_version
        if user_id is not None:
            guard[USER_ID] = user_id
        added = len(fresh)
        update: Doc = {
            "$push": {TAIL: {"$each": [p.entry for p in fresh]}},
            "$inc": {VERSION: batches, SEQ: added * GAP, TAIL_SIZE: added},
        }
        if any(p.event.archived for p in fresh):
            update["$set"] = {ANY_ARCHIVED: True}  # reads of every event then ask for both values
        sessions = self._store.sessions
        trim = self._hints.take_trim(session_id)
        if trim is not None:
            done = await self._commit_trimming(session_id, guard, update, trim, whole, window)
            if done is not None:
                return done
            await self._roller.cut(session_id, trim)  # the tail moved since: cut by id
            if expected_version is not None:
                return None  # most likely a conflict: the caller finds out why
        if not whole and self._hints.room(session_id, added):
            # No post-image needed: the guard makes sure there is nothing to roll forward.
            roomy = {**guard, TAIL_SIZE: {"$lt": K_MAX - added}, PENDING: None}
            with storage_errors(f"append to session {session_id!r}"):
                matched = await self.updates.update_one(roomy, update)
            if matched:
                self._hints.grew(session_id, added)
                return {}
            self._hints.forget(session_id)
            if expected_version is not None:
                return None  # most likely a conflict: the caller finds out why
        crosses = self._hints.crosses(session_id, added)
        if whole and window is not None and crosses:
            window = None  # this commit rolls forward, which then needs the oldest entries
        projection = window if whole else {VERSION: 1, TAIL_SIZE: 1, f"{PENDING}.{COMPACTIONS}": 1}
        if crosses and not whole:
            projection = prefix_projection(K_MAX)
        with storage_errors(f"append to session {session_id!r}"):
            doc = await sessions.find_one_and_update(
                guard, update, projection=projection, return_document=ReturnDocument.AFTER
            )
        if doc is not None:
            self._hints.note(session_id, int(doc[TAIL_SIZE]), bool(doc.get(PENDING)))
            if crosses and not whole:
                doc[PREFIX] = True
        return doc

    async def _commit_trimming(
        self,
        session_id: str,
        guard: Doc,
        update: Doc,
        trim: Trim,
        whole: bool,
        window: Doc | None,
    ) -> Doc | None:
        """The commit of ``update`` that also cuts the entries a roll-forward copied, guarded
        by the document being as the roll-forward left it (plus ``guard``); ``None`` if not."""
        added = int(update["$inc"][TAIL_SIZE])
        after = int(trim.guard[TAIL_SIZE]) - len(trim.ids) + added
        cut: Doc = {
            "$push": {TAIL: {**update["$push"][TAIL], "$slice": -after}},
            "$inc": {**update["$inc"], **trim.changes["$inc"], TAIL_SIZE: added - len(trim.ids)},
            "$set": {**update.get("$set", {}), **trim.changes["$set"]},
        }
        guarded = {**guard, **trim.guard, PENDING: None}
        sessions = self._store.sessions
        with storage_errors(f"append to session {session_id!r}"):
            if not whole:
                result = await sessions.update_one(guarded, cut)
                if not result.matched_count:
                    return None
                self._hints.note(session_id, after, False)
                return {}
            doc = await sessions.find_one_and_update(
                guarded, cut, projection=window, return_document=ReturnDocument.AFTER
            )
        if doc is not None:
            self._hints.note(session_id, int(doc[TAIL_SIZE]), bool(doc.get(PENDING)))
        return doc
