"""Writes for the MongoDB store: reserve ids, commit on the session document, roll forward.

**Commit.** Every write that changes a log commits through one update of the session document
(``update_one`` when :class:`TailHints` say the tail has room, so no post-image is needed; else
``find_one_and_update``), guarded by everything it depends on (the expected version, that none
of its event ids is committed yet, that its attempt was not fenced off). An append ``$push``-es its
events onto the tail and ``$inc``-s the version and the position counter; a compaction replaces
the tail it read (guarded by version, ``rolled`` and ``cv``) and records what it changes below
the tail as ``pending``.

**Ids.** Before the commit, the event ids are registered in the id registry under a random
token, in one ``insert_many``: that is what makes ids unique across sessions, and what tells a
replay from a new event. An id registered for this session under another token is either
committed (it is in the tail, or its event document has a position: a replay), or left behind by
an attempt that died or is still running. Such an id is *adopted*: its token is first added to
the session's ``fences`` (a commit fails while its token is fenced), which fixes the answer to
"is it committed?", and only then is the registry entry taken over.

**Roll-forward.** When the tail grows past :data:`K_MAX` entries, its oldest events are copied to
the events collection (``insert_many``; a repeat is harmless) and then pulled from the tail while
``rolled`` moves past them, in one update guarded by ``rolled`` and ``cv``. A compaction's
``pending`` changes are rolled forward the same way (``update_many`` archive flags,
``insert_many`` inserts, then ``pending`` is cleared). Event documents carry the ``cv`` they were
written at, so a slow roller can never overwrite what a newer compaction wrote. Anyone may finish
a roll-forward; readers merge ``pending`` until it is done.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Final

from pymongo import ReturnDocument
from pymongo.errors import BulkWriteError, DuplicateKeyError

from ..events import SessionEvent
from ..exceptions import (
    AccessDenied,
    EventIdConflict,
    EventTooLarge,
    InvalidCompactionPlan,
    SessionNotFound,
    StorageError,
)
from ..plans import CompactionPlan
from ._mongo_codec import (
    INLINE_LIMIT,
    MESSAGE_TYPE_NAMES,
    Doc,
    body_of,
    bson_size,
    map_pymongo_errors,
    new_token,
    pack_entry,
)
from ._mongo_positions import GAP, Position, place_between
from ._mongo_state import Entry, LogState, decode_entries, decode_state, ids_in
from ._mongo_store import IN_CHUNK, Collection, Store, chunked, find_by_ids

__all__ = ["K_MAX", "K_MIN", "LogWriter", "Prepared", "Reservations", "TailHints", "prepare"]

_log = logging.getLogger("asyncsession.mongo")

K_MIN: Final = 32
"""A roll-forward leaves at least this many of the newest events in the session document."""
K_MAX: Final = 96
"""The append that takes the tail to this many entries rolls the oldest ones forward."""
_MAX_FENCES: Final = 256
_MAX_ROUNDS: Final = 16
_BATCH_INLINE_BUDGET: Final = 1024 * 1024
_DUPLICATE_KEY: Final = 11000
_GROUP_EVENTS: Final = 512
_PULL_BY_ID: Final = 64


@dataclass(slots=True, kw_only=True)
class Prepared:
    """An event encoded for writing."""

    event: SessionEvent
    entry: Doc
    """Its tail entry (:func:`~._mongo_codec.pack_entry`); without its body when the body goes
    to the events collection."""
    document: Doc | None = None
    """For a big event: the events-collection document written before the commit."""


def _text_lower(event: SessionEvent) -> str | None:
    return None if event.text is None else event.text.lower()


def prepare(session_id: str, events: Sequence[SessionEvent], max_size: int) -> list[Prepared]:
    """Encode a batch, checking every event against the document size limit.

    Raises:
        EventTooLarge: an event's document would exceed ``max_size``; nothing was written.
    """
    prepared: list[Prepared] = []
    inline_bytes = 0
    for event in events:
        data = body_of(event)
        document: Doc = {
            "_id": event.id,
            "session_id": session_id,
            "inc": "0" * 24,
            "seq": 0,
            "ts": event.timestamp,
            "type": event.type.name,
            "synthetic": event.is_synthetic,
            "archived": event.archived,
            "turn": 0,
            "cv": 0,
            "token": "0" * 24,
            "data": data,
        }
        text = _text_lower(event)
        if text is not None:
            document["text_lower"] = text
        size = bson_size(document)
        if size > max_size:
            raise EventTooLarge(event.id, size, max_size)
        body = len(data.encode())
        fields = (event.type.name, event.timestamp, event.is_synthetic, event.archived)
        if body > INLINE_LIMIT or inline_bytes + body > _BATCH_INLINE_BUDGET:
            del document["inc"], document["seq"], document["turn"], document["cv"]
            entry = pack_entry(event.id, *fields, None)
            prepared.append(Prepared(event=event, entry=entry, document=document))
        else:
            inline_bytes += body
            prepared.append(Prepared(event=event, entry=pack_entry(event.id, *fields, data)))
    return prepared


class Reservations:
    """Event ids this process registered ahead of their append (``start_turn``'s reply ids)."""

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._tokens: OrderedDict[tuple[str, str], str] = OrderedDict()

    def add(self, session_id: str, event_ids: Sequence[str], token: str) -> None:
        """Remember that ``event_ids`` are registered for ``session_id`` under ``token``."""
        for event_id in event_ids:
            self._tokens[(session_id, event_id)] = token
            self._tokens.move_to_end((session_id, event_id))
        while len(self._tokens) > self._size:
            self._tokens.popitem(last=False)

    def holds(self, session_id: str, event_ids: Sequence[str]) -> bool:
        """Whether any of ``event_ids`` is registered ahead for ``session_id``."""
        return any((session_id, event_id) in self._tokens for event_id in event_ids)

    def take(self, session_id: str, event_ids: Sequence[str]) -> str | None:
        """The token all of ``event_ids`` are registered under (forgetting them), or ``None``."""
        tokens = {self._tokens.get((session_id, event_id)) for event_id in event_ids}
        if len(tokens) != 1 or None in tokens:
            return None
        for event_id in event_ids:
            self._tokens.pop((session_id, event_id), None)
        return tokens.pop()


class TailHints:
    """What this process last saw of each session document: its tail's length, and whether a
    compaction's changes are pending.

    Only a hint, for choosing the commit command: an append that leaves the tail short of
    :data:`K_MAX` with nothing pending needs no post-image, so it commits with ``update_one``
    guarded by exactly that, which costs the server less than ``find_one_and_update``. A stale
    hint makes that guard fail and the append fall back; it never makes a commit wrong.
    """

    def __init__(self, size: int = 10_000) -> None:
        self._size = size
        self._seen: OrderedDict[str, tuple[int, bool]] = OrderedDict()

    def note(self, session_id: str, tail: int, pending: bool) -> None:
        """Record a session document as read or written."""
        self._seen[session_id] = (tail, pending)
        self._seen.move_to_end(session_id)
        while len(self._seen) > self._size:
            self._seen.popitem(last=False)

    def forget(self, session_id: str) -> None:
        """Drop what was seen (the tail was rolled forward or rewritten)."""
        self._seen.pop(session_id, None)

    def room(self, session_id: str, added: int) -> bool:
        """Whether ``added`` more entries are expected to leave the tail short of :data:`K_MAX`
        with nothing pending."""
        seen = self._seen.get(session_id)
        return seen is not None and not seen[1] and seen[0] + added < K_MAX

    def grew(self, session_id: str, added: int) -> None:
        """Record that this process appended ``added`` entries (guarded by :meth:`room`)."""
        seen = self._seen.get(session_id)
        if seen is not None:
            self.note(session_id, seen[0] + added, seen[1])


@dataclass(slots=True, kw_only=True, eq=False)
class _Job:
    prepared: list[Prepared]
    expected: int | None
    result: asyncio.Future[bool]

    @property
    def ids(self) -> list[str]:
        return [p.event.id for p in self.prepared]


@dataclass(slots=True, eq=False)
class _Queue:
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    jobs: list[_Job] = field(default_factory=list[_Job])
    users: int = 0

    def take(self) -> list[_Job]:
        """The queued batches the next group commit carries, oldest first."""
        group: list[_Job] = []
        ids: set[str] = set()
        events = 0
        inline = 0
        for job in list(self.jobs):
            job_ids = job.ids
            size = sum(len(p.entry["e"]) for p in job.prepared)
            if group and (
                ids.intersection(job_ids)
                or events + len(job_ids) > _GROUP_EVENTS
                or inline + size > _BATCH_INLINE_BUDGET
            ):
                continue
            group.append(job)
            ids.update(job_ids)
            events += len(job_ids)
            inline += size
            self.jobs.remove(job)
        return group


@dataclass(slots=True)
class _Registered:
    replayed: set[str] = field(default_factory=set[str])
    """Ids already committed in the session."""
    fenced: set[str] = field(default_factory=set[str])
    """Tokens of earlier attempts whose ids this attempt adopted."""


async def _insert_new(collection: Collection, docs: Sequence[Doc]) -> list[str]:
    """Insert every document whose ``_id`` is free, in one ``insert_many``; returns the ids that
    were taken. Any other write error is raised."""
    try:
        await collection.insert_many(list(docs), ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        if not errors or any(error.get("code") != _DUPLICATE_KEY for error in errors):
            raise
        return [docs[int(error["index"])]["_id"] for error in errors]
    return []


@dataclass(slots=True, kw_only=True)
class _Located:
    position: Position
    archived: bool
    type: str
    turn: int
    in_tail: bool


class LogWriter:
    """The write protocol over the three collections of a :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self._store = store
        self.reservations = Reservations()
        self.hints = TailHints()
        self._queues: dict[str, _Queue] = {}

    # --- the id registry -------------------------------------------------------------------------

    async def _register(self, session_id: str, ids: Sequence[str], token: str) -> list[str]:
        """Register ids; returns those that were taken."""
        docs = [{"_id": event_id, "session_id": session_id, "token": token} for event_id in ids]
        with map_pymongo_errors(f"reserve event ids for session {session_id!r}"):
            return await _insert_new(self._store.event_ids, docs)

    async def release(
        self, session_id: str, ids: Sequence[str], token: str, *, written: bool = True
    ) -> None:
        """Drop this attempt's registrations of ids it never committed, and the big-event
        documents it wrote ahead of its commit unless ``written`` says there are none."""
        if not ids:
            return
        with map_pymongo_errors(f"release event ids of session {session_id!r}"):
            for chunk in chunked(ids):
                await self._store.event_ids.delete_many(
                    {"_id": {"$in": chunk}, "session_id": session_id, "token": token}
                )
                if not written:
                    continue
                await self._store.events.delete_many(
                    {
                        "_id": {"$in": chunk},
                        "session_id": session_id,
                        "token": token,
                        "seq": {"$exists": False},
                    }
                )

    async def reserve(
        self, session_id: str, ids: Sequence[str], token: str, *, creating: bool = False
    ) -> _Registered:
        """Register ``ids`` for ``session_id`` under ``token``; find which are replays.

        ``creating``: the attempt will create the session if it does not exist, so a missing
        session is no error here.

        Raises:
            EventIdConflict: an id belongs to another session; this attempt's ids are released.
            SessionNotFound: the session does not exist (found out on the way).
        """
        result = _Registered()
        todo = list(dict.fromkeys(ids))
        for _ in range(_MAX_ROUNDS):
            taken = await self._register(session_id, todo, token)
            if not taken:
                return result
            with map_pymongo_errors(f"look up event ids for session {session_id!r}"):
                owners = {
                    doc["_id"]: doc for doc in await find_by_ids(self._store.event_ids, taken, {})
                }
            retry: list[str] = []
            foreign: dict[str, Doc] = {}
            theirs: dict[str, str] = {}
            for event_id in taken:
                owner = owners.get(event_id)
                if owner is None:
                    retry.append(event_id)  # released in between: register again
                elif owner["session_id"] != session_id:
                    foreign[event_id] = owner
                elif owner["token"] != token:
                    theirs[event_id] = owner["token"]
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

    async def _settle_foreign(
        self,
        session_id: str,
        ids: Sequence[str],
        token: str,
        foreign: dict[str, Doc],
        creating: bool,
    ) -> list[str]:
        """Raise for ids of live sessions; reclaim ids left behind by deleted ones."""
        owner_ids = sorted({doc["session_id"] for doc in foreign.values()} | {session_id})
        with map_pymongo_errors(f"look up sessions for session {session_id!r}"):
            alive = {
                doc["_id"]
                for doc in await find_by_ids(self._store.sessions, owner_ids, {}, {"_id": 1})
            }
        if session_id not in alive and not creating:
            await self.release(session_id, ids, token, written=False)
            raise SessionNotFound(session_id)
        for event_id in ids:
            owner = foreign.get(event_id)
            if owner is not None and owner["session_id"] in alive:
                await self.release(session_id, ids, token, written=False)
                raise EventIdConflict(event_id, session_id, owner["session_id"])
        with map_pymongo_errors(f"reclaim event ids for session {session_id!r}"):
            for event_id, owner in foreign.items():
                await self._store.event_ids.delete_one(
                    {"_id": event_id, "session_id": owner["session_id"], "token": owner["token"]}
                )
                await self._store.events.delete_many(
                    {"_id": event_id, "session_id": owner["session_id"]}
                )
        return list(foreign)

    async def _committed(self, session_id: str, doc: Doc | None, ids: list[str]) -> set[str]:
        """Which of ``ids`` are committed: in the session document, or rolled forward."""
        committed = ids_in(doc or {}, ids)
        rest = [i for i in ids if i not in committed]
        if rest:
            with map_pymongo_errors(f"look up events of session {session_id!r}"):
                docs = await find_by_ids(
                    self._store.events,
                    rest,
                    {"session_id": session_id, "seq": {"$exists": True}},
                    {"_id": 1},
                )
            committed |= {doc["_id"] for doc in docs}
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
        held = {"tail._id": 1, "pending.inserts._id": 1}
        with map_pymongo_errors(f"read session {session_id!r}"):
            doc = await sessions.find_one({"_id": session_id}, held)
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
        with map_pymongo_errors(f"fence writers of session {session_id!r}"):
            doc = await sessions.find_one_and_update(
                {"_id": session_id},
                {"$push": {"fences": {"$each": tokens, "$slice": -_MAX_FENCES}}},
                projection=held,
                return_document=ReturnDocument.AFTER,
            )
        if doc is None:
            await self.release(session_id, ids, token, written=False)
            raise SessionNotFound(session_id)
        committed |= await self._committed(session_id, doc, rest)
        rest = [i for i in rest if i not in committed]
        adopted = await self._take_over(session_id, token, theirs, rest) if rest else set()
        return committed, adopted, set(tokens)

    async def _take_over(
        self, session_id: str, token: str, theirs: dict[str, str], ids: list[str]
    ) -> set[str]:
        """Register ``ids`` (held by other attempts' tokens) under ``token``; the ids it got."""
        with map_pymongo_errors(f"adopt event ids of session {session_id!r}"):
            for old in sorted({theirs[i] for i in ids}):
                for chunk in chunked([i for i in ids if theirs[i] == old]):
                    await self._store.event_ids.update_many(
                        {"_id": {"$in": chunk}, "session_id": session_id, "token": old},
                        {"$set": {"token": token}},
                    )
            docs = await find_by_ids(
                self._store.event_ids, ids, {"session_id": session_id, "token": token}, {"_id": 1}
            )
        return {doc["_id"] for doc in docs}

    async def _prewrite(
        self, session_id: str, big: Sequence[Prepared], token: str, fenced: set[str]
    ) -> None:
        """Write big events' documents (no position yet, so invisible) before their commit."""
        docs = [{**p.document, "token": token} for p in big if p.document is not None]
        with map_pymongo_errors(f"write events of session {session_id!r}"):
            taken = await _insert_new(self._store.events, docs)
            by_id = {doc["_id"]: doc for doc in docs}
            for event_id in taken:
                await self._store.events.replace_one(
                    {
                        "_id": event_id,
                        "session_id": session_id,
                        "seq": {"$exists": False},
                        "token": {"$in": sorted(fenced | {token})},
                    },
                    by_id[event_id],
                )

    # --- appends ---------------------------------------------------------------------------------

    async def append_grouped(
        self, session_id: str, prepared: Sequence[Prepared], expected_version: int | None
    ) -> bool:
        """Append a batch, sharing round trips with the batches other tasks append concurrently.

        Concurrent batches for one session (in this process) queue up. Whoever holds the
        session's lock registers the ids of every queued batch in one ``insert_many``; tries each
        batch that expects a version on its own (once one of several batches expecting the same
        version has committed, the others cannot, and are answered without a round trip); and
        commits all the batches that expect none in one update, which moves the version once per
        batch. A batch with an id that is already registered (a replay or a conflict) takes the
        one-by-one path instead.
        """
        queue = self._queues.get(session_id)
        if queue is None:
            queue = self._queues[session_id] = _Queue()
        job = _Job(
            prepared=list(prepared),
            expected=expected_version,
            result=asyncio.get_running_loop().create_future(),
        )
        queue.jobs.append(job)
        queue.users += 1
        try:
            while not job.result.done():
                async with queue.lock:
                    if job.result.done():
                        break
                    commits: list[tuple[Doc, int]] = []
                    await self._run_group(session_id, queue.take(), commits)
                    # Still under the lock: one roll-forward at a time per session and process,
                    # which keeps concurrent rollers from undoing each other's work.
                    for doc, added in commits:
                        await self._after_commit(session_id, doc, added, False)
        finally:
            queue.users -= 1
            if not queue.users:
                self._queues.pop(session_id, None)
        return job.result.result()

    async def _run_group(
        self, session_id: str, group: list[_Job], commits: list[tuple[Doc, int]]
    ) -> None:
        token = new_token()
        try:
            ids = [i for job in group for i in job.ids]
            taken = set(await self._register(session_id, ids, token))
            alone = [job for job in group if taken.intersection(job.ids)]
            rest = [job for job in group if job not in alone]
            unused = [i for job in alone for i in job.ids if i not in taken]
            outcome: dict[int, bool] = {}
            plain: list[_Job] = []
            for job in rest:
                if job.expected is None:
                    plain.append(job)
                elif job.expected in outcome:
                    # The first batch expecting this version committed (so this one cannot),
                    # or found the version moved on: either way this one fails.
                    job.result.set_result(False)
                    unused += job.ids
                else:
                    result = await self._try_versioned(session_id, job, token, commits)
                    if result is None:
                        alone.append(job)
                        unused += job.ids
                    else:
                        outcome[job.expected] = result
                        job.result.set_result(result)
                        if not result:
                            unused += job.ids
            if plain:
                fresh = [p for job in plain for p in job.prepared]
                doc = await self._commit(
                    session_id, fresh, token, None, None, False, batches=len(plain)
                )
                if doc is None:
                    unused += [i for job in plain for i in job.ids]
                    alone += plain
                else:
                    for job in plain:
                        job.result.set_result(True)
                    commits.append((doc, len(fresh)))
            await self.release(session_id, unused, token, written=False)
            for job in alone:
                try:
                    done, _ = await self.append(session_id, job.prepared, job.expected)
                except Exception as exc:
                    job.result.set_exception(exc)
                else:
                    job.result.set_result(done)
        except Exception as exc:
            for job in group:
                if not job.result.done():
                    job.result.set_exception(exc)
        finally:
            for job in group:
                if not job.result.done():
                    job.result.cancel()

    async def _try_versioned(
        self, session_id: str, job: _Job, token: str, commits: list[tuple[Doc, int]]
    ) -> bool | None:
        """Commit one versioned batch of fresh ids: ``True``, ``False`` for a stale version, or
        ``None`` when it must take the one-by-one path."""
        doc = await self._commit(session_id, job.prepared, token, job.expected, None, False)
        if doc is None:
            with map_pymongo_errors(f"read session {session_id!r}"):
                current = await self._store.sessions.find_one({"_id": session_id}, {"version": 1})
            if current is not None and current["version"] != job.expected:
                return False
            if current is None or self.hints.room(session_id, len(job.prepared)):
                return None
            # A guarded commit without post-image found the tail fuller than hinted: commit
            # with the post-image, which rolls forward after.
            doc = await self._commit(session_id, job.prepared, token, job.expected, None, False)
            if doc is None:
                return None
        commits.append((doc, len(job.prepared)))
        return True

    async def append(
        self,
        session_id: str,
        prepared: Sequence[Prepared],
        expected_version: int | None,
        *,
        user_id: str | None = None,
        whole: bool = False,
        reserve_ids: Sequence[str] = (),
        create: Doc | None = None,
    ) -> tuple[bool, Doc | None]:
        """Append a batch as one version; see ``SessionRepository.append_events``.

        With ``whole``, returns the whole session document as of the commit (or as read, when
        every event was a replay). ``reserve_ids`` are registered too, for a later append by
        this process that then needs no registration of its own. ``create`` is a new session
        document (without its log) to insert, holding the batch, if the session does not exist.
        """
        ids = [p.event.id for p in prepared]
        extra = [i for i in dict.fromkeys(reserve_ids) if i not in set(ids)]
        token = None if extra else self.reservations.take(session_id, ids)
        register = token is None
        token = token or new_token()
        replayed: set[str] = set()
        fenced: set[str] = set()
        wrote = False  # big-event documents written ahead under ``token``
        for _ in range(_MAX_ROUNDS):
            if register:
                registered = await self.reserve(
                    session_id, [*ids, *extra], token, creating=create is not None
                )
                replayed |= registered.replayed
                fenced |= registered.fenced
                register = False
            fresh = [p for p in prepared if p.event.id not in replayed]
            if not fresh:
                doc = await self._read_checked(session_id, user_id) if whole else None
                self.reservations.add(session_id, [i for i in extra if i not in replayed], token)
                return True, doc
            big = [p for p in fresh if p.document is not None]
            if big:
                await self._prewrite(session_id, big, token, fenced)
                wrote = True
            doc = await self._commit(session_id, fresh, token, expected_version, user_id, whole)
            if doc is None and create is not None:
                doc = await self._create(create, fresh)
            if doc is not None:
                self.reservations.add(session_id, [i for i in extra if i not in replayed], token)
                await self._after_commit(session_id, doc, len(fresh), whole)
                return True, doc
            with map_pymongo_errors(f"read session {session_id!r}"):
                current = await self._store.sessions.find_one(
                    {"_id": session_id},
                    {
                        "version": 1,
                        "user_id": 1,
                        "fences": 1,
                        "tail._id": 1,
                        "pending.inserts._id": 1,
                    },
                )
            if current is None:
                await self.release(session_id, [*ids, *extra], token, written=wrote)
                raise SessionNotFound(session_id)
            if user_id is not None and current["user_id"] != user_id:
                await self.release(session_id, [*ids, *extra], token, written=wrote)
                raise AccessDenied(session_id, user_id)
            if token in current.get("fences", ()):
                token, register, wrote = new_token(), True, False  # our ids were adopted
                continue
            now = ids_in(current, [p.event.id for p in fresh])
            if now:
                replayed |= now  # committed meanwhile by an attempt that adopted them
                continue
            if expected_version is not None and current["version"] != expected_version:
                await self.release(session_id, [*ids, *extra], token, written=wrote)
                return False, None
        raise StorageError(f"could not append to session {session_id!r}: it kept changing")

    async def _create(self, fields: Doc, fresh: Sequence[Prepared]) -> Doc | None:
        """Insert a new session document holding ``fresh`` as its first version, positioned as
        an append to an empty log would be; ``None`` if the session exists."""
        added = len(fresh)
        doc = {
            **fields,
            "version": 1,
            "seq": added * GAP,
            "tail": [p.entry for p in fresh],
            "tn": added,
        }
        with map_pymongo_errors(f"create session {fields['_id']!r}"):
            try:
                await self._store.sessions.insert_one(doc)
            except DuplicateKeyError:
                return None  # created meanwhile: the append goes on as for any failed commit
        self.hints.note(fields["_id"], added, False)
        return doc

    async def _read_checked(self, session_id: str, user_id: str | None) -> Doc:
        with map_pymongo_errors(f"read session {session_id!r}"):
            doc: Doc | None = await self._store.sessions.find_one({"_id": session_id})
        if doc is None:
            raise SessionNotFound(session_id)
        if user_id is not None and doc["user_id"] != user_id:
            raise AccessDenied(session_id, user_id)
        return doc

    async def _commit(
        self,
        session_id: str,
        fresh: Sequence[Prepared],
        token: str,
        expected_version: int | None,
        user_id: str | None,
        whole: bool,
        batches: int = 1,
    ) -> Doc | None:
        ids = [p.event.id for p in fresh]
        guard: Doc = {
            "_id": session_id,
            "tail._id": {"$nin": ids},
            "pending.inserts._id": {"$nin": ids},
            "fences": {"$ne": token},
        }
        if expected_version is not None:
            guard["version"] = expected_version
        if user_id is not None:
            guard["user_id"] = user_id
        added = len(fresh)
        update = {
            "$push": {"tail": {"$each": [p.entry for p in fresh]}},
            "$inc": {"version": batches, "seq": added * GAP, "tn": added},
        }
        sessions = self._store.sessions
        if not whole and self.hints.room(session_id, added):
            # No post-image needed: the guard makes sure there is nothing to roll forward.
            roomy = {**guard, "tn": {"$lt": K_MAX - added}, "pending": None}
            with map_pymongo_errors(f"append to session {session_id!r}"):
                result = await sessions.update_one(roomy, update)
            if result.matched_count:
                self.hints.grew(session_id, added)
                return {}
            self.hints.forget(session_id)
            if expected_version is not None:
                return None  # most likely a conflict: the caller finds out why
        with map_pymongo_errors(f"append to session {session_id!r}"):
            doc: Doc | None = await sessions.find_one_and_update(
                guard,
                update,
                projection=None if whole else {"version": 1, "tn": 1, "pending.cv": 1},
                return_document=ReturnDocument.AFTER,
            )
        if doc is not None:
            self.hints.note(session_id, int(doc["tn"]), bool(doc.get("pending")))
        return doc

    async def _after_commit(self, session_id: str, doc: Doc, added: int, whole: bool) -> None:
        """Roll forward when this commit took the tail to :data:`K_MAX` entries, or past one more
        multiple of ``K_MAX - K_MIN`` beyond it (so a roll-forward that failed is retried soon).

        Commits on one session document are serialized, so exactly one commit crosses each
        boundary: concurrent writers do not all roll forward at once. A commit that returned no
        post-image (``doc`` is empty) was guarded to leave nothing to do."""
        if "tn" not in doc:
            return
        size = int(doc["tn"])
        before = size - added
        step = K_MAX - K_MIN
        boundary = K_MAX if before < K_MAX else K_MAX + ((before - K_MAX) // step + 1) * step
        await self._housekeep(
            session_id,
            doc if whole else None,
            pending=bool(doc.get("pending")),
            roll=size if boundary <= size else None,
        )

    async def _housekeep(
        self, session_id: str, doc: Doc | None, *, pending: bool, roll: int | None
    ) -> None:
        """Roll forward after a commit. A failure here leaves work any later write finishes (and
        readers merge meanwhile); it never undoes the commit, so it is logged, not raised."""
        try:
            if pending:
                await self.roll_pending(session_id)
            if roll is not None:
                await self.roll_forward(session_id, doc, size=roll)
        except StorageError as exc:
            _log.warning(
                "rolling session %r forward failed (a later write finishes it): %s",
                session_id,
                exc,
            )

    # --- roll-forward ----------------------------------------------------------------------------

    def _event_document(self, session_id: str, inc: str, cv: int, entry: Entry) -> Doc:
        assert entry.data is not None
        event = self._store.cache.event(session_id, entry.id, entry.data, entry.archived)
        doc: Doc = {
            "_id": entry.id,
            "session_id": session_id,
            "inc": inc,
            "seq": entry.seq,
            "ts": entry.ts,
            "type": entry.type,
            "synthetic": entry.synthetic,
            "archived": entry.archived,
            "turn": entry.turn,
            "cv": cv,
            "data": entry.data,
        }
        if entry.minor:
            doc["minor"] = entry.minor
        text = _text_lower(event)
        if text is not None:
            doc["text_lower"] = text
        return doc

    async def _write_events(
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
        with map_pymongo_errors(f"roll session {session_id!r} forward"):
            if docs:
                existing += await _insert_new(events, list(docs.values()))
            if not existing:
                return
            found = await find_by_ids(
                events, existing, {"session_id": session_id}, {"inc": 1, "cv": 1, "seq": 1}
            )
            for doc in found:
                if doc.get("inc") == inc and "seq" in doc and doc.get("cv", -1) >= cv:
                    continue  # as new as this copy, or newer
                absent = {"$exists": False}
                guard: Doc = {"_id": doc["_id"], "session_id": session_id}
                guard |= {field: doc.get(field, absent) for field in ("inc", "cv", "seq")}
                entry = big.get(doc["_id"])
                if entry is None:
                    await events.replace_one(guard, docs[doc["_id"]])
                    continue
                fields: Doc = {
                    "inc": inc,
                    "seq": entry.seq,
                    "archived": entry.archived,
                    "turn": entry.turn,
                    "cv": cv,
                }
                if entry.minor:
                    fields["minor"] = entry.minor
                await events.update_one(guard, {"$set": fields})

    async def roll_forward(
        self, session_id: str, doc: Doc | None = None, *, size: int = K_MAX
    ) -> None:
        """Move the oldest tail events to the events collection, leaving :data:`K_MIN`.

        ``doc`` is the whole session document if the caller has it; otherwise the oldest
        entries are read, as many as a tail of about ``size`` entries would move.
        """
        self.hints.forget(session_id)
        if doc is None or "tail" not in doc:
            with map_pymongo_errors(f"read session {session_id!r}"):
                doc = await self._store.sessions.find_one(
                    {"_id": session_id},
                    {
                        "tail": {"$slice": max(size - K_MIN, 1) + 8},
                        "tn": 1,
                        "seq": 1,
                        "rolled": 1,
                        "cv": 1,
                        "inc": 1,
                        "last_user": 1,
                    },
                )
            if doc is None:
                return
        size = int(doc["tn"])
        if size <= K_MIN:
            return
        entries = decode_entries(
            doc["tail"], int(doc["seq"]), int(doc.get("last_user", -1)), size=size
        )
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
        inc, cv = doc["inc"], int(doc["cv"])
        await self._write_events(session_id, inc, cv, moving)
        guard = {"_id": session_id, "rolled": doc["rolled"], "cv": cv, "inc": inc}
        sessions = self._store.sessions
        with map_pymongo_errors(f"roll session {session_id!r} forward"):
            # Nothing appended since the read: cut the prefix by length, which costs the server
            # O(tail) where pulling by id costs O(tail * moving).
            prefix: Doc = {"$push": {"tail": {"$each": [], "$slice": len(moving) - size}}}
            done = await sessions.update_one({**guard, "tn": size}, {**_moved(moving), **prefix})
            if done.matched_count:
                return
            # Appends came in meanwhile: pull by id, a short prefix at a time.
            rolled = doc["rolled"]
            for start in range(0, len(moving), _PULL_BY_ID):
                part = moving[start : start + _PULL_BY_ID]
                pull: Doc = {"$pull": {"tail": {"_id": {"$in": [e.id for e in part]}}}}
                done = await sessions.update_one(
                    {**guard, "rolled": rolled}, {**_moved(part), **pull}
                )
                if not done.matched_count:
                    return
                rolled = part[-1].seq

    async def roll_pending(self, session_id: str) -> None:
        """Apply a committed compaction's changes below the tail, then clear ``pending``."""
        with map_pymongo_errors(f"read session {session_id!r}"):
            doc = await self._store.sessions.find_one({"_id": session_id}, {"pending": 1, "inc": 1})
        if doc is None or not doc.get("pending"):
            return
        pending = doc["pending"]
        inc, cv = doc["inc"], int(pending["cv"])
        archive = list(pending.get("archive", ()))
        seqs = list(pending.get("archive_seq", ()))
        with map_pymongo_errors(f"roll session {session_id!r} forward"):
            for start in range(0, len(archive), IN_CHUNK):
                chunk = archive[start : start + IN_CHUNK]
                query: Doc = {"_id": {"$in": chunk}, "session_id": session_id, "inc": inc}
                if len(seqs) == len(archive):  # ids in log order: bound the chunk's range
                    span = seqs[start : start + IN_CHUNK]
                    query["seq"] = {"$gte": min(span), "$lte": max(span)}
                await self._store.events.update_many(
                    query, {"$set": {"archived": True}, "$max": {"cv": cv}}
                )
        inserts = [Entry.from_doc(entry, 0) for entry in pending.get("inserts", ())]
        if inserts:
            await self._write_events(session_id, inc, cv, inserts)
        with map_pymongo_errors(f"roll session {session_id!r} forward"):
            await self._store.sessions.update_one(
                {"_id": session_id, "pending.cv": cv}, {"$set": {"pending": None}}
            )

    # --- compaction ------------------------------------------------------------------------------

    async def compact(
        self,
        session_id: str,
        plan: CompactionPlan,
        expected_version: int,
        prepared: dict[str, Prepared],
    ) -> bool:
        """Apply ``plan`` if the version is still ``expected_version``."""
        inserted = [event.id for event in plan.inserted_events]
        token = new_token()
        reserved = False
        for _ in range(_MAX_ROUNDS):
            with map_pymongo_errors(f"read session {session_id!r}"):
                doc = await self._store.sessions.find_one({"_id": session_id})
            if doc is None:
                if reserved:
                    await self.release(session_id, inserted, token)
                raise SessionNotFound(session_id)
            state = decode_state(doc)
            if state.version != expected_version:
                if reserved:
                    await self.release(session_id, inserted, token)
                return False
            if state.pending is not None:
                await self.roll_pending(session_id)
                continue
            if token in doc.get("fences", ()):
                token, reserved = new_token(), False
            try:
                located = await self._locate(state, plan)
            except InvalidCompactionPlan:
                if reserved:
                    await self.release(session_id, inserted, token)
                raise
            if inserted and not reserved:
                registered = await self.reserve(session_id, inserted, token)
                reserved = True
                if registered.replayed:
                    await self.release(session_id, inserted, token)
                    replayed = next(i for i in inserted if i in registered.replayed)
                    raise EventIdConflict(replayed, session_id, session_id)
                big = [prepared[i] for i in inserted if prepared[i].document is not None]
                if big:
                    await self._prewrite(session_id, big, token, registered.fenced)
            update, has_pending = await self._plan_update(state, plan, located, prepared)
            guard = {
                "_id": session_id,
                "version": expected_version,
                "inc": state.inc,
                "rolled": state.rolled,
                "cv": state.cv,
                "pending": None,
                "fences": {"$ne": token},
            }
            with map_pymongo_errors(f"compact session {session_id!r}"):
                done = await self._store.sessions.find_one_and_update(
                    guard, update, projection={"tn": 1}, return_document=ReturnDocument.AFTER
                )
            if done is None:
                continue  # re-read: a stale version returns False, anything else retries
            size = int(done["tn"])
            self.hints.note(session_id, size, has_pending)
            await self._housekeep(
                session_id, None, pending=has_pending, roll=size if size >= K_MAX else None
            )
            return True
        raise StorageError(f"could not compact session {session_id!r}: it kept changing")

    async def _locate(self, state: LogState, plan: CompactionPlan) -> dict[str, _Located]:
        """Where the plan's archive and anchor ids are.

        Raises:
            InvalidCompactionPlan: an id is not in the session's log.
        """
        session_id = state.session.id
        located = {
            e.id: _Located(
                position=e.position, archived=e.archived, type=e.type, turn=e.turn, in_tail=True
            )
            for e in state.tail
        }
        wanted = set(plan.archive_ids) | set(plan.anchor_ids)
        missing = sorted(wanted - located.keys())
        if missing and state.rolled >= 0:
            # Index-shaped: the session and a range of positions; the incarnation is checked here.
            query = {"session_id": session_id, "seq": {"$lte": state.rolled}}
            fields = {"seq": 1, "minor": 1, "archived": 1, "type": 1, "turn": 1, "inc": 1}
            with map_pymongo_errors(f"read session {session_id!r}"):
                if len(missing) > IN_CHUNK:  # one range scan beats many long $in lists
                    wanted_below = set(missing)
                    docs = [
                        doc
                        for doc in await self._store.events.find(query, fields).to_list(None)
                        if doc["_id"] in wanted_below
                    ]
                else:
                    docs = await find_by_ids(self._store.events, missing, query, fields)
            for doc in docs:
                if doc.get("inc") != state.inc:
                    continue
                located[doc["_id"]] = _Located(
                    position=(int(doc["seq"]), doc.get("minor", "")),
                    archived=bool(doc.get("archived")),
                    type=doc["type"],
                    turn=int(doc.get("turn", -1)),
                    in_tail=False,
                )
        unknown = wanted - located.keys()
        if unknown:
            raise InvalidCompactionPlan(session_id, unknown)
        return located

    async def _predecessor(self, state: LogState, position: Position) -> tuple[Position, int]:
        """The position (and turn hint) of the event right before ``position``, in the events
        collection; ``(0, "")`` (no event there) when it is the first."""
        session_id = state.session.id
        with map_pymongo_errors(f"read session {session_id!r}"):
            docs = await self._store.events.find(
                {
                    "session_id": session_id,
                    "seq": {"$gte": max(0, position[0] - GAP), "$lte": position[0]},
                },
                {"seq": 1, "minor": 1, "turn": 1, "inc": 1},
            ).to_list(None)
        before = [
            ((int(doc["seq"]), doc.get("minor", "")), int(doc.get("turn", -1)))
            for doc in docs
            if doc.get("inc") == state.inc
        ]
        before = [item for item in before if item[0] < position]
        return max(before) if before else ((0, ""), -1)

    async def _plan_update(
        self,
        state: LogState,
        plan: CompactionPlan,
        located: dict[str, _Located],
        prepared: dict[str, Prepared],
    ) -> tuple[Doc, bool]:
        """The compare-and-swap update that applies ``plan`` to ``state``."""
        groups: OrderedDict[str | None, list[SessionEvent]] = OrderedDict()
        for group in plan.inserts:
            groups.setdefault(group.before_event_id, []).extend(group.events)
        tail_index = {entry.id: i for i, entry in enumerate(state.tail)}
        new_entries: list[Entry] = []
        for anchor_id, events in groups.items():
            if anchor_id is None:
                continue
            anchor = located[anchor_id]
            index = tail_index.get(anchor_id)
            if index is not None and index > 0:
                previous = state.tail[index - 1]
                before, turn = previous.position, previous.turn
            elif index is not None and state.rolled < 0:
                before, turn = (0, ""), state.last_user
            elif index is not None and anchor.position[0] - state.rolled - 1 >= len(events):
                before, turn = (state.rolled, ""), state.last_user
            else:
                before, turn = await self._predecessor(state, anchor.position)
            positions = place_between(before, anchor.position, len(events))
            for (seq, minor), event in zip(positions, events, strict=True):
                if event.type.name == "USER":
                    turn = seq
                new_entries.append(self._new_entry(prepared[event.id], seq, minor, turn))
        counter = state.counter
        turn = state.tail[-1].turn if state.tail else state.last_user
        for event in groups.get(None, ()):
            counter += GAP
            if event.type.name == "USER":
                turn = counter
            new_entries.append(self._new_entry(prepared[event.id], counter, "", turn))

        live = state.live
        archive_below = sorted(
            (
                event_id
                for event_id in plan.archive_ids
                if not located[event_id].in_tail and not located[event_id].archived
            ),
            key=lambda event_id: located[event_id].position,
        )
        live -= sum(1 for i in archive_below if located[i].type in MESSAGE_TYPE_NAMES)
        tail: list[Entry] = []
        for entry in state.tail:
            if entry.id in plan.archive_ids and not entry.archived:
                entry = replace(entry, archived=True)
            tail.append(entry)
        below = [e for e in new_entries if e.seq <= state.rolled]
        tail += [e for e in new_entries if e.seq > state.rolled]
        tail.sort(key=lambda e: e.position)
        live += sum(1 for e in below if e.is_message and not e.archived)
        users = [e.seq for e in below if e.type == "USER"]
        pending: Doc | None = None
        if archive_below or below:
            pending = {
                "cv": state.cv + 1,
                "archive": archive_below,
                "archive_seq": [located[i].position[0] for i in archive_below],
                "inserts": [e.to_doc() for e in below],
            }
        changes: Doc = {
            "tail": [_tail_doc(e) for e in tail],
            "tn": len(tail),
            "seq": counter,
            "live": live,
            "compacted": counter,
            "last_user": max([state.last_user, *users]),
            "pending": pending,
        }
        return {"$set": changes, "$inc": {"version": 1, "cv": 1}}, pending is not None

    @staticmethod
    def _new_entry(prepared: Prepared, seq: int, minor: str, turn: int) -> Entry:
        return replace(Entry.from_doc(prepared.entry, seq), minor=minor, turn=turn)


def _moved(entries: Sequence[Entry]) -> Doc:
    """The counters that change when ``entries`` (a prefix of the tail) leave the tail."""
    changes: Doc = {
        "$set": {"rolled": entries[-1].seq},
        "$inc": {
            "tn": -len(entries),
            "live": sum(1 for e in entries if e.is_message and not e.archived),
        },
    }
    users = [e.seq for e in entries if e.type == "USER"]
    if users:
        changes["$set"]["last_user"] = max(users)
    return changes


def _tail_doc(entry: Entry) -> Doc:
    doc = entry.to_doc()
    doc.pop("turn", None)
    return doc
