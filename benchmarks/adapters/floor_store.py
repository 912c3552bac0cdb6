"""The floor: the least a MongoDB turn can cost, with no guarantees at all.

A turn is one range read of the session's newest turn documents (``n > last - k``, the process
knowing ``last``) and one ``insert_one`` of one document holding the question and the reply.
No version, no compare-and-swap, no idempotency, no unique index: a retried write stores a
second copy, concurrent writers may take one number twice. It is what the store's guarantees
are measured against (its after-reply turn has the same two commands), not a system to use.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, ClassVar

from pymongo import ASCENDING, AsyncMongoClient

from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, Target

__all__ = ["FloorStore"]

COLLECTION = "floor_turns"


class FloorStore(MongoStoreBase):
    """One document per turn, ``{session, n, messages: [{role, text}, ...]}``."""

    name: ClassVar[str] = "floor"
    writer_policies: ClassVar[tuple[str, ...]] = ("insert",)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        assert self.counter is not None
        self._client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            target.uri, event_listeners=[self.counter], tz_aware=True
        )
        self._turns = self._client[target.db_name][COLLECTION]
        self._last: dict[str, int] = {}

    async def start(self) -> None:
        """The one (non-unique) index a range read needs."""
        await self._turns.create_index([("session", ASCENDING), ("n", ASCENDING)])

    async def aclose(self) -> None:
        """Close both clients."""
        await self._client.close()
        await self.close_admin()

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """The messages two by two, one document per pair."""
        docs = [
            {
                "session": session_id,
                "n": i // 2 + 1,
                "messages": [{"role": m.role, "text": m.text} for m in messages[i : i + 2]],
            }
            for i in range(0, len(messages), 2)
        ]
        await self.insert_chunks(COLLECTION, docs)
        self._last[session_id] = len(docs)

    async def _window(self, session_id: str, size: int) -> list[str]:
        last = self._last.get(session_id, 0)
        query = {"session": session_id, "n": {"$gt": last - math.ceil(size / 2)}}
        docs = await self._turns.find(query).to_list(None)
        texts = [m["text"] for d in sorted(docs, key=lambda d: d["n"]) for m in d["messages"]]
        return texts[-size:]

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """The range read."""
        return await self._window(session_id, size)

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """The range read, then one insert of the turn."""
        await self._window(session_id, window)
        await self._insert(session_id, [turn.user, turn.reply])
        return 0

    async def _insert(self, session_id: str, messages: Sequence[Message]) -> None:
        n = self._last.get(session_id, 0) + 1
        self._last[session_id] = n
        doc = {
            "session": session_id,
            "n": n,
            "messages": [{"role": m.role, "text": m.text} for m in messages],
        }
        await self._turns.insert_one(doc)

    async def read_all(self, session_id: str) -> list[str]:
        """Every message, by turn number."""
        docs = await self._turns.find({"session": session_id}).sort("n", ASCENDING).to_list(None)
        return [m["text"] for d in docs for m in d["messages"]]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer: it inserts, nothing can conflict."""
        return _Writer(self, session_id)

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Insert the turn; the ack is lost; insert it again: two copies."""
        await self._insert(session_id, [turn.user, turn.reply])
        await self._insert(session_id, [turn.user, turn.reply])
        return ["the retry stored a second copy (no idempotency)"]

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """None: the floor has no compaction."""
        return None

    def describe(self) -> dict[str, Any]:
        """What the floor is."""
        return {
            "package": "pymongo",
            "turn": "range read of the newest turn documents + insert_one of the turn",
        }


class _Writer:
    def __init__(self, store: FloorStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    async def append(self, message: Message) -> AppendOutcome:
        await self.store._insert(self.session_id, [message])  # pyright: ignore[reportPrivateUsage]
        return AppendOutcome(stored=True)
