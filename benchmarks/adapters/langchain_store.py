"""LangChain ``MongoDBChatMessageHistory`` (``langchain-mongodb``), as a chat chain uses it.

A turn is ``aget_messages()`` on a history with ``history_size=20`` (``count_documents``, then a
``find`` that skips the rest), then ``aadd_messages([human, ai])``, which the base class runs in
the default executor as one ``insert_one`` per message on the sync driver. The counted
``MongoClient`` is the one handed to it. Imported only when a run asks for this system.

``langchain-model`` is the same turn with the model call an application makes between the read
and the write: the window and the question, sent through the ``openai`` SDK to the same
in-process stub model as the advisor turn (`StubModel`). It is the peer to hold the advisor
turn against, whose CPU includes that call.
"""

from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Sequence
from typing import Any, ClassVar

from pymongo import MongoClient

from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, StoreUnavailable, Target
from ._stub_model import STUB_MODEL, StubModel

try:
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, message_to_dict
    from langchain_mongodb import MongoDBChatMessageHistory
except ImportError as exc:  # not a dependency of the library: only .venv-bench has it
    raise StoreUnavailable(f"langchain-mongodb not installed ({exc}); use scripts/bench") from exc

__all__ = ["LangChainModelStore", "LangChainStore"]

COLLECTION = "message_store"


def to_message(message: Message) -> BaseMessage:
    """The LangChain message for ``message``."""
    if message.role == "user":
        return HumanMessage(content=message.text)
    return AIMessage(content=message.text)


def text_of(message: BaseMessage) -> str:
    """The message's text content."""
    return message.content if isinstance(message.content, str) else str(message.content)


class LangChainStore(MongoStoreBase):
    """The langchain adapter: one history object per (session, window) on one counted client.

    The histories are built once, with ``create_index=False`` after the first: its constructor
    sends ``createIndexes`` every time, which an app building one per request (the usual
    ``get_session_history`` factory) pays on every turn; we leave it out of the turn.
    """

    name: ClassVar[str] = "langchain"
    writer_policies: ClassVar[tuple[str, ...]] = ("add_message",)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        assert self.counter is not None
        self._client: MongoClient[dict[str, Any]] = MongoClient(
            target.uri, event_listeners=[self.counter]
        )
        self._histories: dict[tuple[str, int | None], MongoDBChatMessageHistory] = {}

    def history(self, session_id: str, size: int | None) -> MongoDBChatMessageHistory:
        """The (cached) history of ``session_id`` reading ``size`` messages (all if ``None``)."""
        key = (session_id, size)
        found = self._histories.get(key)
        if found is None:
            found = MongoDBChatMessageHistory(
                None,
                session_id,
                database_name=self.target.db_name,
                collection_name=COLLECTION,
                create_index=False,
                history_size=size,
                client=self._client,
            )
            self._histories[key] = found
        return found

    async def start(self) -> None:
        """Create the ``SessionId`` index the way the constructor does, before timing."""
        MongoDBChatMessageHistory(
            None,
            "__warmup__",
            database_name=self.target.db_name,
            collection_name=COLLECTION,
            client=self._client,
        )

    async def aclose(self) -> None:
        """Close both clients."""
        self._client.close()
        await self.close_admin()

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """One ``{SessionId, History}`` document per message, as ``add_message`` writes."""
        docs = [
            {"SessionId": session_id, "History": json.dumps(message_to_dict(to_message(m)))}
            for m in messages
        ]
        await self.insert_chunks(COLLECTION, docs)

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``aget_messages()`` with ``history_size=size``."""
        return [text_of(m) for m in await self.history(session_id, size).aget_messages()]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, then add the human and the AI message."""
        history = self.history(session_id, window)
        await history.aget_messages()
        await history.aadd_messages([to_message(turn.user), to_message(turn.reply)])
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``aget_messages()`` without ``history_size`` (natural order: there is no sort key)."""
        return [text_of(m) for m in await self.history(session_id, None).aget_messages()]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer; the API has no version or handle to hold, so nothing can conflict."""
        history = self.history(session_id, window)
        await history.aget_messages()
        return _Writer(history)

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Add both messages; the ack is lost, so both are added again.

        There is no id, key or sequence on the stored documents, so the retry stores a second
        copy of each. An application could only avoid it by reading the whole session back
        (there is no sort key to read just the tail) and comparing contents. Write errors are
        logged, not raised, so a failed write would not be reported either.
        """
        history = self.history(session_id, None)
        batch = [to_message(turn.user), to_message(turn.reply)]
        await history.aadd_messages(batch)
        await history.aadd_messages(batch)
        return []

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """None: the store has no compaction (summarization middleware works on graph state)."""
        return None

    def describe(self) -> dict[str, Any]:
        """Package version."""
        return {
            "package": "langchain-mongodb",
            "version": importlib.metadata.version("langchain-mongodb"),
        }


class _Writer:
    def __init__(self, history: MongoDBChatMessageHistory) -> None:
        self.history = history

    async def append(self, message: Message) -> AppendOutcome:
        await self.history.aadd_messages([to_message(message)])
        return AppendOutcome(stored=True)


class LangChainModelStore(LangChainStore):
    """The langchain turn with the model call between its read and its write (see the module)."""

    name: ClassVar[str] = "langchain-model"

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        self._model = StubModel()

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, ask the model with it and the question, add both messages."""
        history = self.history(session_id, window)
        prompt: list[Any] = [
            {"role": "user" if m.type == "human" else "assistant", "content": text_of(m)}
            for m in await history.aget_messages()
        ]
        prompt.append({"role": "user", "content": turn.user.text})
        self._model.replies[turn.user.tag] = turn.reply.text
        completion = await self._model.client.chat.completions.create(
            model=STUB_MODEL, messages=prompt
        )
        reply = completion.choices[0].message.content or ""
        assert reply == turn.reply.text, (reply[:40], turn.reply.tag)
        await history.aadd_messages(
            [HumanMessage(content=turn.user.text), AIMessage(content=reply)]
        )
        return 0

    async def model_call_cpu_ms(self, calls: int = 200) -> float | None:
        """The client CPU of the turn's model call alone (`StubModel.call_cpu_ms`)."""
        return await self._model.call_cpu_ms(calls)

    def describe(self) -> dict[str, Any]:
        """The versions, and the longest prompt the model was sent."""
        return {**super().describe(), "longest_prompt_messages": self._model.longest_prompt}

    async def aclose(self) -> None:
        """Close the model client and both Mongo clients."""
        await self._model.aclose()
        await super().aclose()
