"""OpenAI Agents SDK ``MongoDBSession`` (``openai-agents``), driven as its ``Runner`` drives it.

A turn is ``get_items(limit=20)``, then ``add_items([user input])`` and ``add_items([model
output])``: the Runner saves the turn's input before the model call and the output after it,
one logical batch (one document) per call. Imported only when a run asks for this system.
"""

from __future__ import annotations

import importlib.metadata
import json
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, ClassVar

from pymongo import AsyncMongoClient

from .._workload import Message, Turn
from ._base import AppendOutcome, MongoStoreBase, StoreUnavailable, Target

try:
    from agents.extensions.memory.mongodb_session import MongoDBSession
    from agents.memory.openai_responses_compaction_session import (
        OpenAIResponsesCompactionSession,
    )
except ImportError as exc:  # not a dependency of the library: only .venv-bench has it
    raise StoreUnavailable(f"openai-agents is not installed ({exc}); use scripts/bench") from exc

__all__ = ["OpenAIAgentsStore"]

SESSIONS = "agent_sessions"
MESSAGES = "agent_messages"


def to_item(message: Message) -> dict[str, Any]:
    """The Responses input item the Runner stores for ``message``."""
    if message.role == "user":
        return {"role": "user", "content": message.text}
    return {
        "id": f"msg_{uuid.uuid4().hex}",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": message.text, "annotations": []}],
    }


def item_text(item: Any) -> str:
    """The text of a stored item (user string content, or the first output_text part)."""
    content = item.get("content") if isinstance(item, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list) and content and isinstance(content[0], dict):
        return str(content[0].get("text", ""))
    return ""


class _StubResponses:
    """``responses.compact`` without a model: the documented output shape, fixed summary."""

    def __init__(self, summary: str) -> None:
        self.summary = summary

    async def compact(self, **kwargs: Any) -> Any:
        users = [
            {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": item_text(item)}],
            }
            for item in kwargs.get("input", [])
            if isinstance(item, dict) and item.get("role") == "user"
        ]
        compaction = {
            "type": "compaction",
            "id": f"cmp_{uuid.uuid4().hex}",
            "encrypted_content": self.summary,
        }
        return SimpleNamespace(output=[*users, compaction], usage=None)


class OpenAIAgentsStore(MongoStoreBase):
    """The openai-agents adapter: one ``MongoDBSession`` per session on one counted client."""

    name: ClassVar[str] = "openai-agents"
    writer_policies: ClassVar[tuple[str, ...]] = ("add_items",)

    def __init__(self, target: Target) -> None:
        super().__init__(target)
        assert self.counter is not None
        self._client: AsyncMongoClient[dict[str, Any]] = AsyncMongoClient(
            target.uri, event_listeners=[self.counter]
        )
        self._sessions: dict[str, MongoDBSession] = {}

    def session(self, session_id: str) -> MongoDBSession:
        """The (cached) ``MongoDBSession`` of ``session_id``."""
        found = self._sessions.get(session_id)
        if found is None:
            found = MongoDBSession(session_id, client=self._client, database=self.target.db_name)
            self._sessions[session_id] = found
        return found

    async def start(self) -> None:
        """Let the SDK create its indexes (once per client) before anything is timed."""
        await self.session("__warmup__").get_items(limit=1)

    async def aclose(self) -> None:
        """Close both clients (the sessions borrow the counted one)."""
        await self._client.close()
        await self.close_admin()

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """One metadata document and one batch document per message, as the Runner writes."""
        now = datetime.now(UTC)
        await self.admin_db[SESSIONS].insert_one(
            {
                "session_id": session_id,
                "created_at": now,
                "updated_at": now,
                "_seq": len(messages),
                "_generation": 0,
            }
        )
        docs = [
            {
                "session_id": session_id,
                "seq": index,
                "generation": 0,
                "message_data": [json.dumps(to_item(m), separators=(",", ":"))],
            }
            for index, m in enumerate(messages)
        ]
        await self.insert_chunks(MESSAGES, docs)

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``get_items(limit=size)``."""
        return [item_text(i) for i in await self.session(session_id).get_items(limit=size)]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, save the input, save the output."""
        session = self.session(session_id)
        await session.get_items(limit=window)
        await session.add_items([to_item(turn.user)])  # type: ignore[list-item]
        await session.add_items([to_item(turn.reply)])  # type: ignore[list-item]
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``get_items()`` with no limit."""
        return [item_text(i) for i in await self.session(session_id).get_items()]

    async def open_writer(self, session_id: str, policy: str, window: int) -> _Writer:
        """A writer; the API has no version or handle to hold, so nothing can conflict."""
        await self.session(session_id).get_items(limit=window)
        return _Writer(self.session(session_id))

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Save input and output; the output's ack is lost, so the output is saved again.

        ``add_items`` takes no idempotency key and the store has no unique field to reject a
        repeat, so the retry appends a second copy. An application could avoid it only by
        reading the tail back and comparing contents before retrying (the Runner does this on
        resume), which is one more read and racy under concurrent writers.
        """
        session = self.session(session_id)
        await session.add_items([to_item(turn.user)])  # type: ignore[list-item]
        output = [to_item(turn.reply)]
        await session.add_items(output)  # type: ignore[arg-type]
        await session.add_items(output)  # type: ignore[arg-type]
        return []

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """``OpenAIResponsesCompactionSession.run_compaction`` with a stubbed compact call.

        The wrapper's own code reads the history, calls ``responses.compact`` (here a stub
        returning the documented shape: the user messages plus one opaque ``compaction`` item
        holding a summary of the same size as every system's) and replaces the stored history
        with ``clear_session()`` + ``add_items(output)``. ``keep`` does not apply: the
        replacement covers the whole history.
        """
        wrapper = OpenAIResponsesCompactionSession(
            session_id,
            self.session(session_id),
            client=SimpleNamespace(responses=_StubResponses(summary)),  # type: ignore[arg-type]
            compaction_mode="input",
        )
        await wrapper.run_compaction({"compaction_mode": "input", "force": True})
        return "destructive: clear + rewrite (user messages + compaction item)"

    def describe(self) -> dict[str, Any]:
        """Package version."""
        return {"package": "openai-agents", "version": importlib.metadata.version("openai-agents")}


class _Writer:
    def __init__(self, session: MongoDBSession) -> None:
        self.session = session

    async def append(self, message: Message) -> AppendOutcome:
        await self.session.add_items([to_item(message)])  # type: ignore[list-item]
        return AppendOutcome(stored=True)
