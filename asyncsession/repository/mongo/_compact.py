"""Compaction apply: one compare-and-swap on the session document, then roll-forward.

The update rewrites the tail it read (archive flags, new events between their neighbours),
guarded by the expected version, ``rolled`` and ``cv``, and records what it changes below the
tail as ``pending``, which `RollForward.roll_pending` then applies. An unknown archive or anchor
id raises `InvalidCompactionPlan` before anything is written; the cost follows the plan, not the
log.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, replace

from pymongo import ReturnDocument

from ..._pymongo_errors import storage_errors
from ...compaction_protocols import CompactionPlan
from ...events import SessionEvent
from ...exceptions import EventIdConflict, InvalidCompactionPlan, SessionNotFound, StorageError
from .._compaction_key import compaction_key
from ._codec import MESSAGE_TYPE_NAMES, Doc, new_token
from ._drawn import Reservations, write_tokens
from ._hints import K_MAX, TailHints
from ._ids import MAX_ROUNDS, IdRegistry, Registered
from ._layout import (
    ANY_ARCHIVED,
    ARCHIVE,
    ARCHIVE_SEQ,
    ARCHIVED,
    ARCHIVED_PREFIX,
    COMPACTED,
    COMPACTION_KEY,
    COMPACTIONS,
    FENCES,
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
    TAIL,
    TAIL_SIZE,
    TURN,
    TYPE,
    VERSION,
)
from ._positions import GAP, Position, place_between
from ._prepare import Prepared
from ._rollforward import RollForward
from ._state import Entry, LogState, decode_state
from ._store import IN_CHUNK, Store, find_by_event_ids, find_by_position, session_version

__all__ = ["CompactionWriter"]


@dataclass(slots=True, kw_only=True)
class _Located:
    position: Position
    archived: bool
    type: str
    turn: int
    in_tail: bool


def _new_entry(prepared: Prepared, seq: int, minor: str, turn: int) -> Entry:
    return replace(Entry.from_doc(prepared.entry, seq), minor=minor, turn=turn)


def _tail_doc(entry: Entry) -> Doc:
    doc = entry.to_doc()
    doc.pop(TURN, None)
    return doc


class CompactionWriter:
    """Applies compaction plans to the logs of a `Store`."""

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

    async def compact(
        self,
        session_id: str,
        plan: CompactionPlan,
        expected_version: int,
        prepared: dict[str, Prepared],
    ) -> bool:
        """Apply ``plan`` if the version is still ``expected_version``; ``True`` too for a retry
        of the newest compaction, which was applied (its reply was lost)."""
        inserted = [event.id for event in plan.inserted_events]
        key = compaction_key(plan, expected_version)
        ids = self._ids
        # Ids registered ahead (drawn from the pool, as a turn stored with its reply draws
        # them) keep their registrations, as on an append: only the others are registered,
        # under one of their tokens, and the commit is guarded against a fence on any of them.
        held = self._reservations.take(session_id, inserted)
        token, also = write_tokens(held)
        reserved = False
        for _ in range(MAX_ROUNDS):
            with storage_errors(f"read session {session_id!r}"):
                doc = await self._store.sessions.find_one({ID: session_id})
            if doc is None:
                await self._let_go(session_id, inserted, held, token, also, reserved)
                raise SessionNotFound(session_id)
            state = decode_state(doc)
            if state.version != expected_version:
                await self._let_go(session_id, inserted, held, token, also, reserved)
                return doc.get(COMPACTION_KEY) == key  # this very call committed before: applied
            if state.pending is not None:
                await self._roller.roll_pending(session_id)
                continue
            if {token, *also} & set(doc.get(FENCES, ())):  # our registrations were adopted
                token, also, held, reserved = new_token(), [], {}, False
            try:
                located = await self._locate(state, plan)
            except InvalidCompactionPlan:
                await self._let_go(session_id, inserted, held, token, also, reserved)
                raise
            if inserted and not reserved:
                todo = [i for i in inserted if i not in held]
                registered = await ids.reserve(session_id, todo, token) if todo else Registered()
                reserved = True
                if registered.replayed:
                    await self._let_go(session_id, inserted, held, token, also, reserved)
                    token, also, held, reserved = new_token(), [], {}, False
                    if await session_version(self._store, session_id) != expected_version:
                        continue  # an equal plan committed them first: re-read, and lose
                    replayed = next(i for i in inserted if i in registered.replayed)
                    raise EventIdConflict(replayed, session_id, session_id)
                big = [prepared[i] for i in inserted if prepared[i].document is not None]
                if big:
                    await ids.prewrite(session_id, big, token, registered.fenced)
            update, has_pending = await self._plan_update(key, state, plan, located, prepared)
            guard = {
                ID: session_id,
                VERSION: expected_version,
                INCARNATION: state.inc,
                ROLLED: state.rolled,
                COMPACTIONS: state.cv,
                PENDING: None,
                FENCES: {"$nin": [token, *also]},
            }
            with storage_errors(f"compact session {session_id!r}"):
                done = await self._store.sessions.find_one_and_update(
                    guard, update, projection={TAIL_SIZE: 1}, return_document=ReturnDocument.AFTER
                )
            if done is None:
                continue  # re-read: a stale version returns False, anything else retries
            size = int(done[TAIL_SIZE])
            self._hints.note(session_id, size, has_pending)
            await self._roller.housekeep(
                session_id, None, pending=has_pending, roll=size if size >= K_MAX else None
            )
            return True
        raise StorageError(f"could not compact session {session_id!r}: it kept changing")

    async def _let_go(
        self,
        session_id: str,
        inserted: list[str],
        held: dict[str, str],
        token: str,
        also: list[str],
        reserved: bool,
    ) -> None:
        """Undo what an attempt that will not commit did to the plan's ids: drop the
        registrations it holds (under every token, the documents written ahead only under
        ``token``), or, when it registered nothing, keep the ones registered ahead for a
        later append."""
        if not reserved:
            for event_id, held_token in held.items():
                self._reservations.add(session_id, [event_id], held_token)
            return
        await self._ids.release_held(session_id, inserted, token, also)

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
            below: Doc = {"$lte": state.rolled}
            fields = {SEQ: 1, MINOR: 1, ARCHIVED: 1, TYPE: 1, TURN: 1, INCARNATION: 1}
            events = self._store.events
            with storage_errors(f"read session {session_id!r}"):
                if len(missing) > IN_CHUNK:  # one range scan beats many long $in lists
                    wanted_below = set(missing)
                    docs = [
                        doc
                        for doc in await find_by_position(
                            events, session_id, below, fields, state.archived_below
                        )
                        if doc[ID] in wanted_below
                    ]
                else:
                    query: Doc = {SESSION_ID: session_id, SEQ: below}
                    docs = await find_by_event_ids(events, missing, query, fields)
            for doc in docs:
                if doc.get(INCARNATION) != state.inc:
                    continue
                located[doc[ID]] = _Located(
                    position=(int(doc[SEQ]), doc.get(MINOR, "")),
                    archived=bool(doc.get(ARCHIVED)),
                    type=doc[TYPE],
                    turn=int(doc.get(TURN, -1)),
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
        with storage_errors(f"read session {session_id!r}"):
            docs = await find_by_position(
                self._store.events,
                session_id,
                {"$gte": max(0, position[0] - GAP), "$lte": position[0]},
                {SEQ: 1, MINOR: 1, TURN: 1, INCARNATION: 1},
                state.archived_below,
            )
        before: list[tuple[Position, int]] = [
            ((int(doc[SEQ]), doc.get(MINOR, "")), int(doc.get(TURN, -1)))
            for doc in docs
            if doc.get(INCARNATION) == state.inc
        ]
        before = [item for item in before if item[0] < position]
        return max(before) if before else ((0, ""), -1)

    async def _plan_update(
        self,
        key: str,
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
                new_entries.append(_new_entry(prepared[event.id], seq, minor, turn))
        counter = state.counter
        turn = state.tail[-1].turn if state.tail else state.last_user
        for event in groups.get(None, ()):
            counter += GAP
            if event.type.name == "USER":
                turn = counter
            new_entries.append(_new_entry(prepared[event.id], counter, "", turn))

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
                COMPACTIONS: state.cv + 1,
                ARCHIVE: archive_below,
                ARCHIVE_SEQ: [located[i].position[0] for i in archive_below],
                INSERTS: [e.to_doc() for e in below],
            }
        changes: Doc = {
            TAIL: [_tail_doc(e) for e in tail],
            TAIL_SIZE: len(tail),
            ARCHIVED_PREFIX: next((i for i, e in enumerate(tail) if not e.archived), len(tail)),
            SEQ: counter,
            LIVE: live,
            COMPACTED: counter,
            ANY_ARCHIVED: True,
            LAST_USER: max([state.last_user, *users]),
            PENDING: pending,
            COMPACTION_KEY: key,  # the newest compaction's key, for its retries
        }
        return {"$set": changes, "$inc": {VERSION: 1, COMPACTIONS: 1}}, pending is not None
