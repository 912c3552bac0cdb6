"""The id registry: event ids unique across sessions, replays told from new events, fencing.

Before a commit, the event ids are registered in the registry collection under a random token,
in one ``insert_many``: that is what makes ids unique across sessions, and what tells a replay
from a new event. An id registered for this session under another token is either committed (it
is in the tail, or its event document has a position: a replay), or left behind by an attempt
that died or is still running. Such an id is *adopted*: its token is first added to the
session's ``fences`` (a commit fails while its token is fenced), which fixes the answer to "is it
committed?", and only then is the registry entry taken over.

The registry lets go of an id the store handed out (`is_drawn`: the id pool's format) once
its event document is in the events collection (see ``_rollforward``). So such an id
that registers without a clash may still be stored: its registration is followed by a lookup
in the events collection (one ``find`` by ``_id``), unless this process minted it for this very
append (``unseen``). The registration comes first, and a copy is written before its
registration is deleted, so an id stored anywhere is found in one of the two places. Ids of
the caller's keep their registrations and need no lookup.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final

from pymongo import ReturnDocument

from ..._pymongo_errors import storage_errors
from ...exceptions import EventIdConflict, SessionNotFound, StorageError
from ._codec import Doc
from ._drawn import is_drawn, loaded_id, stored_id, stored_ids
from ._layout import FENCES, ID, INSERTS, PENDING, SEQ, SESSION_ID, TAIL, TOKEN
from ._prepare import Prepared
from ._state import ids_in
from ._store import Store, chunked, find_by_event_ids, find_by_ids, insert_new

__all__ = ["MAX_ROUNDS", "IdRegistry", "Registered"]

MAX_ROUNDS: Final = 16
"""How often a write retries before it gives up on a session that keeps changing."""
_MAX_FENCES: Final = 256


@dataclass(slots=True)
class Registered:
    """What registering an attempt's ids found."""

    replayed: set[str] = field(default_factory=set[str])
    """Ids already committed in the session."""
    fenced: set[str] = field(default_factory=set[str])
    """Tokens of earlier attempts whose ids this attempt adopted."""


class IdRegistry:
    """Registers, adopts and releases event ids in a store's registry collection."""

    def __init__(self, store: Store) -> None:
        self._store = store

    async def register(self, session_id: str, ids: Sequence[str], token: str) -> list[str]:
        """Register ids; returns those that were taken."""
        docs: list[Doc] = [
            {ID: stored_id(event_id), SESSION_ID: session_id, TOKEN: token} for event_id in ids
        ]
        with storage_errors(f"reserve event ids for session {session_id!r}"):
            return await insert_new(self._store.event_ids, docs)

    async def release_held(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        also: Sequence[str],
        *,
        written: bool = True,
    ) -> None:
        """`release` an attempt that will not commit under every token its ids are held under:
        ``token`` (with the big-event documents it wrote ahead, unless ``written`` says there
        are none) and each of ``also`` (registrations only)."""
        await self.release(session_id, ids, token, written=written)
        for other in also:
            await self.release(session_id, ids, other, written=False)

    async def release(
        self, session_id: str, ids: Sequence[str], token: str, *, written: bool = True
    ) -> None:
        """Drop this attempt's registrations of ids it never committed, and the big-event
        documents it wrote ahead of its commit unless ``written`` says there are none."""
        if not ids:
            return
        with storage_errors(f"release event ids of session {session_id!r}"):
            for chunk in chunked(ids):
                await self._store.event_ids.delete_many(
                    {ID: {"$in": stored_ids(chunk)}, SESSION_ID: session_id, TOKEN: token}
                )
                if not written:
                    continue
                await self._store.events.delete_many(
                    {
                        ID: {"$in": stored_ids(chunk)},
                        SESSION_ID: session_id,
                        TOKEN: token,
                        SEQ: {"$exists": False},
                    }
                )

    async def stored_below(self, ids: Sequence[str]) -> dict[str, str]:
        """Which of ``ids`` have a committed event document (one with a position), each with
        the session that holds it."""
        if not ids:
            return {}
        with storage_errors("look up stored events by id"):
            docs = await find_by_event_ids(
                self._store.events, ids, {SEQ: {"$exists": True}}, {SESSION_ID: 1}
            )
        return {doc[ID]: doc[SESSION_ID] for doc in docs}

    async def reserve(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        *,
        creating: bool = False,
        unseen: Collection[str] = (),
    ) -> Registered:
        """Register ``ids`` for ``session_id`` under ``token``; find which are replays.

        ``creating``: the attempt will create the session if it does not exist, so a missing
        session is no error here. ``unseen``: ids this process minted for this append, which
        no one can have stored, so they are not looked up in the events collection.

        Raises:
            EventIdConflict: an id belongs to another session; this attempt's ids are released.
            SessionNotFound: the session does not exist (found out on the way).
        """
        result = Registered()
        todo = list(dict.fromkeys(ids))
        for _ in range(MAX_ROUNDS):
            taken = await self.register(session_id, todo, token)
            clashed = set(taken)
            new = [i for i in todo if i not in clashed and i not in unseen and is_drawn(i)]
            if new:
                await self._settle_stored(session_id, ids, token, new, result)
            if not taken:
                return result
            with storage_errors(f"look up event ids for session {session_id!r}"):
                owners = {
                    doc[ID]: doc
                    for doc in await find_by_event_ids(self._store.event_ids, taken, {})
                }
            retry: list[str] = []
            foreign: dict[str, Doc] = {}
            theirs: dict[str, str] = {}
            for event_id in taken:
                owner = owners.get(event_id)
                if owner is None:
                    retry.append(event_id)  # released in between: register again
                elif owner[SESSION_ID] != session_id:
                    foreign[event_id] = owner
                elif owner[TOKEN] != token:
                    theirs[event_id] = owner[TOKEN]
            if foreign:
                # A drawn id let go of and stored in this session may be registered for a
                # moment by another session's attempt (whose own lookup then refuses it): a
                # replay all the same.
                drawn = [i for i in foreign if is_drawn(i)]
                stored = await self.stored_below(drawn) if drawn else {}
                mine = {i for i, owner in stored.items() if owner == session_id}
                result.replayed |= mine
                foreign = {i: doc for i, doc in foreign.items() if i not in mine}
            if foreign:
                retry += await self._settle_foreign(session_id, ids, token, foreign, creating)
            if theirs:
                committed, adopted, fenced = await self._adopt(
                    session_id, ids, token, theirs, creating
                )
                result.replayed |= committed
                result.fenced |= fenced
                retry += [i for i in theirs if i not in committed and i not in adopted]
            todo = retry
            if not todo:
                return result
        raise StorageError(
            f"could not reserve event ids for session {session_id!r}: they kept changing hands"
        )

    async def _settle_stored(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        new: list[str],
        result: Registered,
    ) -> None:
        """Look up ids that registered without a clash in the events collection: this
        session's are replays (their registrations are let go of again), a live session's are
        a conflict, and a deleted session's documents are removed."""
        stored = await self.stored_below(new)
        if not stored:
            return
        mine = [i for i, owner in stored.items() if owner == session_id]
        foreign = {i: owner for i, owner in stored.items() if owner != session_id}
        if foreign:
            alive = await self._alive(session_id, foreign.values())
            for event_id, owner in foreign.items():
                if owner in alive:
                    await self.release(session_id, ids, token, written=False)
                    raise EventIdConflict(event_id, session_id, owner)
            with storage_errors(f"reclaim event ids for session {session_id!r}"):
                for event_id, owner in foreign.items():
                    await self._store.events.delete_many(
                        {ID: stored_id(event_id), SESSION_ID: owner}
                    )
        if mine:
            result.replayed.update(mine)
            await self.release(session_id, mine, token, written=False)

    async def _alive(self, session_id: str, owners: Iterable[str]) -> set[str]:
        """Which of the sessions ``owners`` exist (looked up for ``session_id``'s append)."""
        with storage_errors(f"look up sessions for session {session_id!r}"):
            docs = await find_by_ids(self._store.sessions, sorted(set(owners)), {}, {ID: 1})
        return {doc[ID] for doc in docs}

    async def _settle_foreign(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        foreign: dict[str, Doc],
        creating: bool,
    ) -> list[str]:
        """Raise for ids of live sessions; reclaim ids left behind by deleted ones."""
        owners = [doc[SESSION_ID] for doc in foreign.values()]
        alive = await self._alive(session_id, [*owners, session_id])
        if session_id not in alive and not creating:
            await self.release(session_id, ids, token, written=False)
            raise SessionNotFound(session_id)
        for event_id in ids:
            owner = foreign.get(event_id)
            if owner is not None and owner[SESSION_ID] in alive:
                await self.release(session_id, ids, token, written=False)
                raise EventIdConflict(event_id, session_id, owner[SESSION_ID])
        with storage_errors(f"reclaim event ids for session {session_id!r}"):
            for event_id, owner in foreign.items():
                await self._store.event_ids.delete_one(
                    {
                        ID: stored_id(event_id),
                        SESSION_ID: owner[SESSION_ID],
                        TOKEN: owner[TOKEN],
                    }
                )
                await self._store.events.delete_many(
                    {ID: stored_id(event_id), SESSION_ID: owner[SESSION_ID]}
                )
        return list(foreign)

    async def _committed(self, session_id: str, doc: Doc | None, ids: list[str]) -> set[str]:
        """Which of ``ids`` are committed: in the session document, or rolled forward."""
        committed = ids_in(doc or {}, ids)
        rest = [i for i in ids if i not in committed]
        if rest:
            with storage_errors(f"look up events of session {session_id!r}"):
                docs = await find_by_event_ids(
                    self._store.events,
                    rest,
                    {SESSION_ID: session_id, SEQ: {"$exists": True}},
                    {ID: 1},
                )
            committed |= {doc[ID] for doc in docs}
        return committed

    async def _adopt(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        theirs: dict[str, str],
        creating: bool,
    ) -> tuple[set[str], set[str], set[str]]:
        """Sort ids registered for this session by another attempt into replays and adoptions.

        Returns the committed ids, the ids now registered under ``token``, and the fenced
        tokens.
        """
        sessions = self._store.sessions
        held = {f"{TAIL}.{ID}": 1, f"{PENDING}.{INSERTS}.{ID}": 1}
        with storage_errors(f"read session {session_id!r}"):
            doc = await sessions.find_one({ID: session_id}, held)
        if doc is None and creating:
            # No session, so nothing is committed; whichever attempt inserts the session
            # document first decides what it holds, and the other finds its ids there.
            return set(), await self._take_over(session_id, token, theirs, list(theirs)), set()
        if doc is None:
            await self.release(session_id, ids, token, written=False)
            raise SessionNotFound(session_id)
        committed = await self._committed(session_id, doc, list(theirs))
        rest = [i for i in theirs if i not in committed]
        if not rest:
            return committed, set(), set()
        # Fence the other attempts first: from here on they cannot commit, so "not committed
        # now" stays true and the ids can be taken over.
        tokens = sorted({theirs[i] for i in rest})
        with storage_errors(f"fence writers of session {session_id!r}"):
            doc = await sessions.find_one_and_update(
                {ID: session_id},
                {"$push": {FENCES: {"$each": tokens, "$slice": -_MAX_FENCES}}},
                projection=held,
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            await self.release(session_id, ids, token, written=False)
            raise SessionNotFound(session_id)
        committed |= await self._committed(session_id, doc, rest)
        rest = [i for i in rest if i not in committed]
        adopted = await self._take_over(session_id, token, theirs, rest) if rest else set[str]()
        return committed, adopted, set(tokens)

    async def _take_over(
        self, session_id: str, token: str, theirs: dict[str, str], ids: list[str]
    ) -> set[str]:
        """Register ``ids`` (held by other attempts' tokens) under ``token``; the ids it got."""
        with storage_errors(f"adopt event ids of session {session_id!r}"):
            for old in sorted({theirs[i] for i in ids}):
                for chunk in chunked([i for i in ids if theirs[i] == old]):
                    await self._store.event_ids.update_many(
                        {ID: {"$in": stored_ids(chunk)}, SESSION_ID: session_id, TOKEN: old},
                        {"$set": {TOKEN: token}},
                    )
            docs = await find_by_event_ids(
                self._store.event_ids, ids, {SESSION_ID: session_id, TOKEN: token}, {ID: 1}
            )
        return {doc[ID] for doc in docs}

    async def prewrite(
        self, session_id: str, big: Sequence[Prepared], token: str, fenced: set[str]
    ) -> None:
        """Write big events' documents (no position yet, so invisible) before their commit.

        A document an adopted attempt (one of ``fenced``) wrote ahead is replaced by this one.
        """
        docs: list[Doc] = [{**p.document, TOKEN: token} for p in big if p.document is not None]
        with storage_errors(f"write events of session {session_id!r}"):
            taken = await insert_new(self._store.events, docs)
            by_id = {loaded_id(doc[ID]): doc for doc in docs}
            for event_id in taken:
                await self._store.events.replace_one(
                    {
                        ID: stored_id(event_id),
                        SESSION_ID: session_id,
                        SEQ: {"$exists": False},
                        TOKEN: {"$in": sorted(fenced | {token})},
                    },
                    by_id[event_id],
                )
