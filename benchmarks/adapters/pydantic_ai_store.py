"""Pydantic AI message history stored in MongoDB the way Pydantic AI's docs show, by hand.

Pydantic AI has no MongoDB store: its guide "Messages and chat history" stores what a run
returns (``result.new_messages()``, or the JSON of ``new_messages_json()``) and loads it back
with ``ModelMessagesTypeAdapter`` for the next run's ``message_history=``. This is that pattern
on PyMongo's ``AsyncMongoClient``, the simplest way a user would keep it in MongoDB: one
document per message, ``{conversation_id, message}`` with the message as
``ModelMessagesTypeAdapter`` dumps it (JSON mode), in a collection with an index on
``(conversation_id, _id)``.

A turn is a ``find`` of the newest ``window`` documents (sorted by ``_id`` descending, limited,
then reversed) validated into ``message_history``, then one ``insert_many`` of the run's
``new_messages()`` (the user's request and the model's response). Nothing in the documented
pattern identifies a message, so a save retried after a lost acknowledgement stores it again.
Imported only when a run asks for this system.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Sequence
from typing import Any, ClassVar

from pymongo import AsyncMongoClient

from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, StoreUnavailable, Target

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        TextPart,
        UserPromptPart,
    )
except ImportError as exc:  # not a dependency of the library: only .venv-bench has it
    raise StoreUnavailable(f"pydantic-ai is not installed ({exc}); use scripts/bench") from exc

__all__ = ["PydanticAIStore", "message_text", "to_model_message"]

COLLECTION = "messages"


def to_model_message(message: Message) -> ModelMessage:
    """What an agent run returns for ``message``: the user's request, or the model's response."""
    if message.role == "user":
        return ModelRequest(parts=[UserPromptPart(content=message.text)])
    return ModelResponse(parts=[TextPart(content=message.text)])


def message_text(message: ModelMessage) -> str:
    """The text of a request's user prompts or of a response's text parts."""
    if isinstance(message, ModelResponse):
        return "".join(p.content for p in message.parts if isinstance(p, TextPart))
    return "".join(
        p.content
        for p in message.parts
        if isinstance(p, UserPromptPart) and isinstance(p.content, str)
    )


def to_documents(conversation_id: str, messages: Sequence[ModelMessage]) -> list[dict[str, Any]]:
    """One document per message, the message as ``ModelMessagesTypeAdapter`` dumps it."""
    dumped = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
    return [{"conversation_id": conversation_id, "message": m} for m in dumped]


class PydanticAIStore(MongoStoreBase):
    """The documented Pydantic AI pattern on one counted ``AsyncMongoClient``."""

    name: ClassVar[str] = "pydantic-ai"
    writer_policies: ClassVar[tuple[str, ...]] = ("insert_many",)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        assert self.counter is not None
        self._client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            target.uri, event_listeners=[self.counter]
        )
        self.collection = self._client[target.db_name][COLLECTION]

    async def start(self) -> None:
        """The index a user would create for reading a conversation's tail (not timed)."""
        await self.collection.create_index([("conversation_id", 1), ("_id", 1)])

    async def aclose(self) -> None:
        """Close both clients."""
        await self._client.close()
        await self.close_admin()

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """The documents ``save`` writes for ``messages``, on the uncounted client."""
        docs = to_documents(session_id, [to_model_message(m) for m in messages])
        await self.insert_chunks(COLLECTION, docs)

    async def load(self, session_id: str, size: int | None) -> list[ModelMessage]:
        """``message_history`` for the next run: the newest ``size`` messages (all if ``None``),
        oldest first."""
        if size is None:
            cursor = self.collection.find({"conversation_id": session_id}).sort("_id", 1)
            docs = await cursor.to_list()
        else:
            cursor = (
                self.collection.find({"conversation_id": session_id}).sort("_id", -1).limit(size)
            )
            docs = list(reversed(await cursor.to_list()))
        return ModelMessagesTypeAdapter.validate_python([d["message"] for d in docs])

    async def save(self, session_id: str, messages: Sequence[ModelMessage]) -> None:
        """Store a run's ``new_messages()``: one ``insert_many``, the documents built per call."""
        await self.collection.insert_many(to_documents(session_id, messages))

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """The newest ``size`` messages."""
        return [message_text(m) for m in await self.load(session_id, size)]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window for ``message_history``, then save the run's two new messages."""
        await self.load(session_id, window)
        await self.save(session_id, [to_model_message(turn.user), to_model_message(turn.reply)])
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """Every stored message, oldest first."""
        return [message_text(m) for m in await self.load(session_id, None)]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer; nothing is versioned, so nothing can conflict."""
        await self.load(session_id, window)
        return _Writer(self, session_id)

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Save the run's messages; the ack is lost, so the app saves them again.

        The documented pattern gives a message no identity, so the retry inserts a second copy
        of both. (Re-sending the very same document dicts would instead fail on the ``_id`` the
        driver put into them, but a save helper builds its documents per call, as here.)
        """
        new = [to_model_message(turn.user), to_model_message(turn.reply)]
        await self.save(session_id, new)
        await self.save(session_id, new)
        return []

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """None: nothing compacts the stored messages (``history_processors`` shape only what
        one run sends the model)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Package version."""
        return {
            "package": "pydantic-ai-slim",
            "version": importlib.metadata.version("pydantic-ai-slim"),
        }


class _Writer:
    def __init__(self, store: PydanticAIStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id

    async def append(self, message: Message) -> AppendOutcome:
        await self.store.save(self.session_id, [to_model_message(message)])
        return AppendOutcome(stored=True)
