"""Roll-forward: move the oldest tail events, and a compaction's pending changes, below the tail.

When the tail grows past `K_MAX` entries, its oldest events are copied to the events collection
(``insert_many``; a repeat is harmless) and then pulled from the tail while ``rolled`` moves past
them, in one update guarded by ``rolled`` and ``cv``. After an append, that cut rides on the
next commit of the same process (a `Trim`), so the turn that crosses `K_MAX` pays one command
more, the copy: the commit that crossed returned the oldest entries in its post-image. Until the
cut, the copies lie above ``rolled``, where no reader looks. A cut that never comes (another
process appended first, or this one stopped) is done at once by the roll-forward one step of
``K_MAX - K_MIN`` later, which bounds the tail. A compaction's ``pending`` changes are
rolled forward the same way (``update_many`` archive flags, ``insert_many`` inserts, then
``pending`` is cleared). Event documents carry the ``cv`` they were written at, so a slow roller
can never overwrite what a newer compaction wrote. Anyone may finish a roll-forward; readers
merge ``pending`` until it is done.

Once an event's document is in the events collection, the id registry lets go of its id if
the store handed it out (`is_drawn`; see ``_ids`` for how such an id is still found):
the registrations of the events copied are deleted, by a later commit of this process that
pays no other command (see `RollForward.let_go`), so that such a message stored below the tail
costs no registry document. A let-go never made (the process stopped first) leaves a
registration, which costs bytes and nothing else.
"""

from __future__ import annotations

import logging
import sys
from collections import deque
from collections.abc import Callable, Sequence
from typing import Final

from ..._pymongo_errors import storage_errors
from ...exceptions import StorageError
from ._cache import ENTRY_OVERHEAD, ByteLRU
from ._codec import Doc
from ._drawn import is_drawn, stored_id, stored_ids
from ._hints import K_MAX, K_MIN, TailHints, Trim
from ._layout import (
    ARCHIVE,
    ARCHIVE_SEQ,
    ARCHIVED,
    ARCHIVED_PREFIX,
    COMPACTIONS,
    DATA,
    ID,
    INCARNATION,
    INSERTS,
    LAST_USER,
    LIVE,
    MINOR,
    PENDING,
    ROLLED,
    SEQ,
    SESSION_ID,
    SYNTHETIC,
    TAIL,
    TAIL_SIZE,
    TIMESTAMP,
    TURN,
    TYPE,
    VERSION,
)
from ._state import Entry, decode_entries
from ._store import IN_CHUNK, Store, find_by_event_ids, insert_new

__all__ = ["PREFIX", "RollForward", "moved", "prefix_projection"]

_log = logging.getLogger("asyncsession.mongo")

_PULL_BY_ID: Final = 64
_TURN: Final = 4
"""A let-go waits for a commit that leaves room for this many more tail entries, so that the
rest of the turn does not roll forward as well."""
_PAID_BYTES: Final = 1 << 20
"""A bound on what remembering which sessions' last commit paid a command more holds."""
_LET_GO_BACKLOG: Final = 16
"""Copies whose registrations wait to be let go of; a roll-forward past this many lets go of
the oldest at once (only a writer that rolls forward on every commit, a bulk load, gets here)."""

PREFIX: Final = "\x00prefix"
"""Set (by the commit) in a post-image whose ``tail`` holds only the oldest entries, as
`prefix_projection` projects it: enough to roll forward from without reading the tail again."""


def prefix_projection(size: int) -> Doc:
    """A projection of what rolling a tail of about ``size`` entries forward reads: the
    counters and the oldest entries it would move."""
    return {
        TAIL: {"$slice": max(size - K_MIN, 1) + 8},
        TAIL_SIZE: 1,
        SEQ: 1,
        ROLLED: 1,
        COMPACTIONS: 1,
        INCARNATION: 1,
        LAST_USER: 1,
        ARCHIVED_PREFIX: 1,
        VERSION: 1,
        f"{PENDING}.{COMPACTIONS}": 1,
    }


def _unfinished(session_id: str, exc: StorageError) -> None:
    """Log a roll-forward that failed after its commit: it never undoes the commit, and any
    later write finishes it (readers merge meanwhile)."""
    _log.warning(
        "rolling session %r forward failed (a later write finishes it): %s", session_id, exc
    )


def moved(entries: Sequence[Entry], archived_prefix: int) -> Doc:
    """The counters that change when ``entries`` (a prefix of the tail) leave the tail, whose
    oldest ``archived_prefix`` entries are archived."""
    changes: Doc = {
        "$set": {ROLLED: entries[-1].seq, ARCHIVED_PREFIX: max(0, archived_prefix - len(entries))},
        "$inc": {
            TAIL_SIZE: -len(entries),
            LIVE: sum(1 for e in entries if e.is_message and not e.archived),
        },
    }
    users = [e.seq for e in entries if e.type == "USER"]
    if users:
        changes["$set"][LAST_USER] = max(users)
    return changes


class RollForward:
    """Moves events from session documents to the events collection of a `Store`."""

    def __init__(
        self, store: Store, hints: TailHints, *, spare: Callable[[str], bool] = lambda _: True
    ) -> None:
        """``spare(session_id)``: whether the session's next append is expected to pay no
        command for its id (the id pool's answer), so that this one may pay for a let-go."""
        self._store = store
        self._hints = hints
        self._spare = spare
        self._let_go: deque[tuple[str, list[str]]] = deque()
        self._paid: ByteLRU[str, bool] = ByteLRU(_PAID_BYTES)

    async def let_go(self, *, every: bool = False) -> None:
        """Delete the registrations of the events of the oldest copy that waits (``every``:
        of every one). The copies are in the events collection, whose ``_id`` guards them now.
        A failure is logged: the registrations stay, which is harmless."""
        while self._let_go:
            session_id, ids = self._let_go.popleft()
            try:
                with storage_errors(f"let go of event ids of session {session_id!r}"):
                    await self._store.event_ids.delete_many(
                        {ID: {"$in": stored_ids(ids)}, SESSION_ID: session_id}
                    )
            except StorageError as exc:
                _log.warning("letting go of event ids of session %r failed: %s", session_id, exc)
            if not every:
                return

    async def _copied(self, session_id: str, ids: list[str]) -> None:
        """Note that the events ``ids`` are in the events collection, to let go of their
        registrations later, a command's worth at a time (at once past `_LET_GO_BACKLOG`)."""
        ids = [i for i in ids if is_drawn(i)]  # ids of the caller's stay registered
        for start in range(0, len(ids), IN_CHUNK):
            self._let_go.append((session_id, ids[start : start + IN_CHUNK]))
        while len(self._let_go) > _LET_GO_BACKLOG:
            await self.let_go()

    async def after_commit(
        self,
        session_id: str,
        doc: Doc,
        added: int,
        whole: bool,
        *,
        paid: bool = False,
        registered: bool = False,
    ) -> None:
        """Roll forward when this commit took the tail to `K_MAX` entries, or past one more
        multiple of ``K_MAX - K_MIN`` beyond it (so a roll-forward that failed is retried soon).

        Commits on one session document are serialized, so exactly one commit crosses each
        boundary: concurrent writers do not all roll forward at once. A commit that returned no
        post-image (``doc`` is empty) was guarded to leave nothing to do. A commit that
        ``paid`` a command more already (it registered ids ahead) leaves the roll-forward to
        this process's next commit, so that no append pays two more. A commit that rolls
        nothing forward may let go of one batch of registrations (see `_let_go_or_note`);
        ``registered``: it registered ids, a command more too."""
        before_paid = self._paid.pop(session_id) is not None
        extra = paid or registered
        if TAIL_SIZE not in doc:
            room = self._hints.room(session_id, _TURN)
            await self._let_go_or_note(session_id, extra, before_paid, room)
            return
        size = int(doc[TAIL_SIZE])
        before = size - added
        step = K_MAX - K_MIN
        boundary = K_MAX if before < K_MAX else K_MAX + ((before - K_MAX) // step + 1) * step
        due = boundary <= size
        pending = bool(doc.get(PENDING))
        small = size < K_MAX + step  # a cut left undone grows the tail one step at most
        if due and paid and small and not pending:
            self._hints.owe_roll(session_id)
            self._note_paid(session_id)
            return
        if self._hints.take_owed(session_id) and size >= K_MAX:
            due = True
        if due or pending:
            await self.housekeep(
                session_id,
                doc if whole or doc.get(PREFIX) else None,
                pending=pending,
                roll=size if due else None,
                defer=small,
            )
            self._note_paid(session_id)
            return
        await self._let_go_or_note(session_id, extra, before_paid, size + _TURN < K_MAX)

    def _note_paid(self, session_id: str) -> None:
        """Remember that this session's last commit here paid a command more."""
        self._paid.put(session_id, True, sys.getsizeof(session_id) + ENTRY_OVERHEAD)

    async def _let_go_or_note(self, session_id: str, extra: bool, before: bool, room: bool) -> None:
        """Let go of one batch of registrations on a commit that may pay for it: neither it
        (``extra``) nor the session's previous commit here (``before``) paid a command more,
        its next one is expected not to (the id pool has ids ready), and the tail has room for
        the rest of a turn. So whichever two consecutive appends of a session make a turn,
        they pay one command more at most."""
        if extra:
            self._note_paid(session_id)
        elif not before and self._let_go and room and self._spare(session_id):
            self._note_paid(session_id)
            await self.let_go()

    async def housekeep(
        self,
        session_id: str,
        doc: Doc | None,
        *,
        pending: bool,
        roll: int | None,
        defer: bool = False,
    ) -> None:
        """Roll forward after a commit (with ``defer``, leaving the cut to the next commit). A
        failure here leaves work any later write finishes (and readers merge meanwhile); it
        never undoes the commit, so it is logged, not raised."""
        try:
            if pending:
                await self.roll_pending(session_id)
            if roll is not None:
                await self.roll_forward(session_id, doc, size=roll, defer=defer and not pending)
        except StorageError as exc:
            _unfinished(session_id, exc)

    @staticmethod
    def _event_document(session_id: str, inc: str, cv: int, entry: Entry) -> Doc:
        assert entry.data is not None
        doc: Doc = {
            ID: stored_id(entry.id),
            SESSION_ID: session_id,
            INCARNATION: inc,
            SEQ: entry.seq,
            TIMESTAMP: entry.ts,
            TYPE: entry.type,
            ARCHIVED: entry.archived,
            TURN: entry.turn,
            DATA: entry.data,
        }
        # Fields at their usual value are left out (readers and queries take absent for it).
        if entry.synthetic:
            doc[SYNTHETIC] = True
        if cv:
            doc[COMPACTIONS] = cv
        if entry.minor:
            doc[MINOR] = entry.minor
        return doc

    async def write_events(
        self, session_id: str, inc: str, cv: int, entries: Sequence[Entry]
    ) -> None:
        """Write entries to the events collection, never over what a newer ``cv`` wrote.

        Copies go in with one ``insert_many``. Where a copy exists already (an earlier
        roll-forward that stopped half-way, a concurrent one, a big event's document), it is
        replaced only if it is older: written at a smaller ``cv``, by another incarnation of the
        session, or not rolled forward yet. The replacement is guarded by exactly the version
        read, so no filter needs an ``$or`` (which some planners answer with a collection scan).
        """
        events = self._store.events
        docs = {e.id: self._event_document(session_id, inc, cv, e) for e in entries if e.data}
        big = {e.id: e for e in entries if e.data is None}
        existing: list[str] = list(big)
        with storage_errors(f"roll session {session_id!r} forward"):
            if docs:
                existing += await insert_new(events, list(docs.values()))
            # Only the copies inserted here are surely this session's documents now.
            taken = set(existing)
            await self._copied(session_id, [i for i in docs if i not in taken])
            if not existing:
                return
            found = await find_by_event_ids(
                events, existing, {SESSION_ID: session_id}, {INCARNATION: 1, COMPACTIONS: 1, SEQ: 1}
            )
            for doc in found:
                if doc.get(INCARNATION) == inc and SEQ in doc and doc.get(COMPACTIONS, 0) >= cv:
                    continue  # as new as this copy, or newer
                absent = {"$exists": False}
                guard: Doc = {ID: stored_id(doc[ID]), SESSION_ID: session_id}
                guard |= {
                    field: doc.get(field, absent) for field in (INCARNATION, COMPACTIONS, SEQ)
                }
                entry = big.get(doc[ID])
                if entry is None:
                    await events.replace_one(guard, docs[doc[ID]])
                    continue
                fields: Doc = {
                    INCARNATION: inc,
                    SEQ: entry.seq,
                    ARCHIVED: entry.archived,
                    TURN: entry.turn,
                    COMPACTIONS: cv,
                }
                if entry.minor:
                    fields[MINOR] = entry.minor
                await events.update_one(guard, {"$set": fields})

    async def roll_forward(
        self,
        session_id: str,
        doc: Doc | None = None,
        *,
        size: int = K_MAX,
        defer: bool = False,
        retry: bool = False,
    ) -> None:
        """Move the oldest tail events to the events collection, leaving `K_MIN`.

        ``doc`` is the whole session document if the caller has it, or a post-image marked
        `PREFIX` (a document with only the newest tail entries does not count); otherwise the
        oldest entries are read, as many as a tail of about ``size`` entries would move. With
        ``defer``, the events are only copied, and the cut is left to this process's next
        commit (see `Trim`). A cut that another roll-forward got ahead of (``rolled`` moved
        under it) is retried once from a fresh read, which rolls only a tail still `K_MAX`
        long, so that racing roll-forwards do not leave the tail long until the next boundary.
        """
        self._hints.forget(session_id)
        whole = doc is not None and len(doc.get(TAIL, ())) >= int(doc[TAIL_SIZE])
        if doc is None or not (whole or doc.get(PREFIX)):  # none, or the newest entries
            with storage_errors(f"read session {session_id!r}"):
                doc = await self._store.sessions.find_one({ID: session_id}, prefix_projection(size))
            if doc is None:
                return
        size = int(doc[TAIL_SIZE])
        if size <= K_MIN or (retry and size < K_MAX):
            return
        entries = decode_entries(doc[TAIL], int(doc[SEQ]), int(doc.get(LAST_USER, -1)), size=size)
        cut = min(size - K_MIN, len(entries))
        while cut < len(entries) and entries[cut].seq == entries[cut - 1].seq:
            cut += 1
        if cut == len(entries) and len(entries) < size:
            cut -= 1  # the slice may end inside a run of equal positions: stop before it
            while cut > 0 and entries[cut].seq == entries[cut - 1].seq:
                cut -= 1
        if cut <= 0:
            return
        moving = entries[:cut]
        inc, cv = doc[INCARNATION], int(doc[COMPACTIONS])
        await self.write_events(session_id, inc, cv, moving)
        guard = {ID: session_id, ROLLED: doc[ROLLED], COMPACTIONS: cv, INCARNATION: inc}
        archived_prefix = int(doc.get(ARCHIVED_PREFIX, 0))
        if defer:
            changes = moved(moving, archived_prefix)
            ids = tuple(e.id for e in moving)
            trim = Trim(guard={**guard, TAIL_SIZE: size}, ids=ids, changes=changes)
            self._hints.defer_trim(session_id, trim)
            return
        sessions = self._store.sessions
        with storage_errors(f"roll session {session_id!r} forward"):
            # Nothing appended since the read: cut the prefix by length, which costs the server
            # O(tail) where pulling by id costs O(tail * moving).
            prefix: Doc = {"$push": {TAIL: {"$each": [], "$slice": len(moving) - size}}}
            done = await sessions.update_one(
                {**guard, TAIL_SIZE: size}, {**moved(moving, archived_prefix), **prefix}
            )
            if done.matched_count:
                return
            # Appends came in meanwhile: pull by id, a short prefix at a time.
            rolled = doc[ROLLED]
            for start in range(0, len(moving), _PULL_BY_ID):
                part = moving[start : start + _PULL_BY_ID]
                pull: Doc = {"$pull": {TAIL: {ID: {"$in": [e.id for e in part]}}}}
                done = await sessions.update_one(
                    {**guard, ROLLED: rolled}, {**moved(part, archived_prefix), **pull}
                )
                if not done.matched_count:
                    break
                rolled = part[-1].seq
                archived_prefix = max(0, archived_prefix - len(part))
            else:
                return
        if not retry:  # another roller cut first: roll what is left, if the tail is still long
            await self.roll_forward(session_id, size=size, retry=True)

    async def cut(self, session_id: str, trim: Trim) -> None:
        """Cut a deferred roll-forward's copied entries from the tail by id, appends having
        come in since (so a cut by length would miss); nothing if the tail moved otherwise."""
        guard = {k: v for k, v in trim.guard.items() if k != TAIL_SIZE}
        pull: Doc = {"$pull": {TAIL: {ID: {"$in": list(trim.ids)}}}}
        try:
            with storage_errors(f"roll session {session_id!r} forward"):
                await self._store.sessions.update_one(guard, {**trim.changes, **pull})
        except StorageError as exc:
            _unfinished(session_id, exc)

    async def roll_pending(self, session_id: str) -> None:
        """Apply a committed compaction's changes below the tail, then clear ``pending``."""
        with storage_errors(f"read session {session_id!r}"):
            doc = await self._store.sessions.find_one(
                {ID: session_id}, {PENDING: 1, INCARNATION: 1}
            )
        if doc is None or not doc.get(PENDING):
            return
        pending: Doc = doc[PENDING]
        inc, cv = doc[INCARNATION], int(pending[COMPACTIONS])
        archive: list[str] = list(pending.get(ARCHIVE, ()))
        seqs: list[int] = list(pending.get(ARCHIVE_SEQ, ()))
        with storage_errors(f"roll session {session_id!r} forward"):
            for start in range(0, len(archive), IN_CHUNK):
                chunk = archive[start : start + IN_CHUNK]
                query: Doc = {
                    ID: {"$in": stored_ids(chunk)},
                    SESSION_ID: session_id,
                    INCARNATION: inc,
                }
                if len(seqs) == len(archive):  # ids in log order: bound the chunk's range
                    span = seqs[start : start + IN_CHUNK]
                    query[SEQ] = {"$gte": min(span), "$lte": max(span)}
                await self._store.events.update_many(
                    query, {"$set": {ARCHIVED: True}, "$max": {COMPACTIONS: cv}}
                )
        inserts = [Entry.from_doc(entry, 0) for entry in pending.get(INSERTS, ())]
        if inserts:
            await self.write_events(session_id, inc, cv, inserts)
        with storage_errors(f"roll session {session_id!r} forward"):
            await self._store.sessions.update_one(
                {ID: session_id, f"{PENDING}.{COMPACTIONS}": cv}, {"$set": {PENDING: None}}
            )
