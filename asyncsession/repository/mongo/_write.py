"""The write path of the MongoDB store, assembled: where each part of a write lives.

A write goes through these rooms, in this order:

* `_prepare`: encode the events (tail entries; big bodies as documents of their own);
* `_ids`: register their ids in the id registry (unique across sessions; a replay or an
  attempt that died shows up here, and is told apart by fencing);
* `_group`: queue concurrent appends to one session so that they share round trips;
* `_commit`: the commit itself, one guarded update of the session document;
* `_rollforward`: move the oldest tail events (and a compaction's pending changes) below
  the tail;
* `_compact`: apply a compaction plan with one compare-and-swap.

`_drawn` and `_hints` hold what a process remembers between writes (ids registered
ahead, tail lengths); only hints, never needed for correctness.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from ...compaction_protocols import CompactionPlan
from ._cache import hint_bytes
from ._codec import Doc
from ._commit import Committer
from ._compact import CompactionWriter
from ._drawn import IdPool, Reservations
from ._group import GroupCommit
from ._hints import TailHints
from ._ids import IdRegistry
from ._prepare import Prepared
from ._rollforward import RollForward
from ._state import LogState
from ._store import Store

__all__ = ["LogWriter"]


class LogWriter:
    """The write protocol over the three collections of a `Store`.

    The repository hands it encoded batches; it alone decides how they commit: grouped with
    concurrent batches or on their own, with which ids registered ahead (`_drawn`,
    `Reservations`), and when the tail rolls forward. Its attributes are its parts, for tests.
    """

    def __init__(self, store: Store) -> None:
        self.reservations = Reservations(hint_bytes(store.cache_bytes))
        """Ids registered ahead of their append."""
        self.hints = TailHints(hint_bytes(store.cache_bytes))
        """Tail lengths last seen, for choosing the commit command."""
        self.pool = IdPool(hint_bytes(store.cache_bytes))
        """Ids registered ahead, for `draw_event_id`."""
        self.ids = IdRegistry(store)
        """The id registry."""
        self.roller = RollForward(store, self.hints, spare=self.pool.spare)
        """Roll-forward."""
        self.committer = Committer(store, self.ids, self.roller, self.hints, self.reservations)
        """The one-by-one commit path."""
        self.group = GroupCommit(store, self.ids, self.committer, self.roller, self.hints)
        """The shared commit path for concurrent plain batches."""
        self.compactor = CompactionWriter(
            store, self.ids, self.roller, self.hints, self.reservations
        )
        """Compaction apply."""

    def draw(self, session_id: str) -> str:
        """A new event id for ``session_id``: registered ahead when the pool holds one."""
        return self.pool.draw(session_id)

    def note(self, state: LogState) -> None:
        """Remember the tail of a session document a read decoded, for the next commit."""
        self.hints.note(state.session.id, state.size, state.pending is not None)

    async def let_go(self) -> None:
        """Let go of the registrations of every id this process moved below the tail."""
        await self.roller.let_go(every=True)

    async def append_batch(
        self, session_id: str, prepared: Sequence[Prepared], expected_version: int | None
    ) -> bool:
        """Append a batch as one version; ``False`` when ``expected_version`` is stale.

        A batch of small events none of whose ids is registered ahead shares its commit with
        concurrent batches of the session; any other commits on its own, registering the next
        ids of the pool with its own when one of its ids was drawn from an empty pool.
        """
        ids = [p.event.id for p in prepared]
        refill = self.pool.refill_for(session_id, ids)
        grouped = not refill and all(p.document is None for p in prepared)
        if grouped and not self.reservations.holds(session_id, ids):
            return await self.group.append(session_id, prepared, expected_version)
        unseen = self.pool.minted(session_id, ids, refill)
        done, _ = await self.append(session_id, prepared, expected_version, refill, unseen=unseen)
        if done and refill:
            self.pool.refilled(session_id, refill)
        return done

    async def start_turn(
        self,
        session_id: str,
        prepared: Sequence[Prepared],
        *,
        user_id: str | None,
        reserve_ids: Sequence[str],
        create: Doc | None,
        window: Doc | None,
    ) -> Doc:
        """Append a turn's batch on its own and return the session document after it
        (``window`` projects its tail), registering ``reserve_ids`` and the pool's next ids
        with it."""
        ids = [p.event.id for p in prepared]
        refill = self.pool.refill_for(session_id, ids)
        _, doc = await self.append(
            session_id,
            prepared,
            None,
            user_id=user_id,
            whole=True,
            reserve_ids=[*reserve_ids, *refill],
            unseen=self.pool.minted(session_id, ids, refill),
            create=create,
            window=window,
        )
        assert doc is not None
        if refill:
            self.pool.refilled(session_id, refill)
        return doc

    async def append(
        self,
        session_id: str,
        prepared: Sequence[Prepared],
        expected_version: int | None,
        reserve_ids: Sequence[str] = (),
        *,
        user_id: str | None = None,
        whole: bool = False,
        unseen: Collection[str] = (),
        create: Doc | None = None,
        window: Doc | None = None,
    ) -> tuple[bool, Doc | None]:
        """Append a batch as one version, on its own; see `Committer.append`."""
        return await self.committer.append(
            session_id,
            prepared,
            expected_version,
            user_id=user_id,
            whole=whole,
            reserve_ids=reserve_ids,
            unseen=unseen,
            create=create,
            window=window,
        )

    async def compact(
        self,
        session_id: str,
        plan: CompactionPlan,
        expected_version: int,
        prepared: dict[str, Prepared],
    ) -> bool:
        """Apply ``plan`` if the version is still ``expected_version``."""
        return await self.compactor.compact(session_id, plan, expected_version, prepared)
