"""Our framework adapters on our MongoDB store, driven through the framework's own interface.

- ``asyncsession-langchain``: ``LangChainHistory`` (``asyncsession.integrations.langchain``), as
  a chain uses it: a turn is ``aget_messages()`` with ``history_size=window``, then one
  ``aadd_messages([human, ai])``.
- ``asyncsession-adk``: ``AdkSessionService`` (``asyncsession.integrations.google_adk``), as
  ADK's ``Runner`` uses it: a turn is ``get_session`` with ``num_recent_events=window``, then
  ``append_event`` of the user's event and of the model's.
- ``asyncsession-pydantic-ai``: ``PydanticAIHistory``
  (``asyncsession.integrations.pydantic_ai``), as its guide shows it around an agent run: a
  turn is ``load(limit=window)`` for ``message_history``, then one ``store`` of the run's
  ``new_messages()`` (the user's request and the model's response).

Seeding, contended writers and compaction are the base system's (``AsyncSessionStore``): the
same store and log. The lost-acknowledgement turn goes through the adapter, its write losing
one acknowledgement (written, then reported failed), retried the way an app retries.
"""

from __future__ import annotations

import importlib.metadata
import json
import uuid
from collections.abc import Coroutine, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar, TypeVar

from asyncsession import Session, SessionEvent
from asyncsession.exceptions import StorageError
from asyncsession.repository import Lease
from asyncsession.service import DefaultSessionService, SessionService

from .._workload import Message, Turn
from ._base import StoreUnavailable
from .asyncsession_store import USER_ID, AsyncSessionStore

try:
    from google.adk.events.event import Event
    from google.adk.sessions.base_session_service import GetSessionConfig
    from google.genai import types
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from pydantic_ai.messages import ModelMessage

    from asyncsession.integrations import google_adk, langchain, pydantic_ai

    from .pydantic_ai_store import message_text, to_model_message
except ImportError as exc:  # the frameworks are extras: .venv-bench has them
    raise StoreUnavailable(f"a framework is not installed ({exc}); use scripts/bench") from exc

__all__ = ["AsyncSessionAdkStore", "AsyncSessionLangChainStore", "AsyncSessionPydanticAIStore"]

_T = TypeVar("_T")
APP = "bench"


class _LosingOnce(DefaultSessionService):
    """Reports the next append failed after writing it: a lost acknowledgement (on the store of
    ``service``, a `DefaultSessionService`)."""

    def __init__(self, service: SessionService) -> None:
        assert isinstance(service, DefaultSessionService)
        super().__init__(service.repository)
        self.lose = True

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        return await self._after(
            super().append_events(session_id, events, expected_version, lease=lease)
        )

    async def _after(self, write: Coroutine[Any, Any, _T]) -> _T:
        result = await write
        if self.lose:
            self.lose = False
            raise StorageError("the acknowledgement was lost")
        return result


def _lc(message: Message) -> BaseMessage:
    if message.role == "user":
        return HumanMessage(content=message.text)
    return AIMessage(content=message.text)


def _text(message: BaseMessage) -> str:
    return message.content if isinstance(message.content, str) else str(message.content)


class AsyncSessionLangChainStore(AsyncSessionStore):
    """``LangChainHistory`` on our MongoDB store."""

    name: ClassVar[str] = "asyncsession-langchain"

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """The session holding ``messages`` as the adapter stores them."""
        await self.repository.save(Session(id=session_id, user_id=USER_ID))
        events = [
            langchain._to_event(_lc(m), session_id, f"{session_id}:{m.tag}") for m in messages
        ]
        for start in range(0, len(events), self.seed_batch):
            await self.repository.append_events(session_id, events[start : start + self.seed_batch])

    def _history(self, session_id: str, size: int | None) -> langchain.LangChainHistory:
        return langchain.LangChainHistory(session_id, self.service, history_size=size)

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``aget_messages()`` with ``history_size=size``."""
        return [_text(m) for m in await self._history(session_id, size).aget_messages()]

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, then add the human and the AI message in one call."""
        history = self._history(session_id, window)
        await history.aget_messages()
        await history.aadd_messages([_lc(turn.user), _lc(turn.reply)])
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``aget_messages()`` without a window."""
        return [_text(m) for m in await self._history(session_id, None).aget_messages()]

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Add both messages; the ack is lost; add them again on the same history object."""
        history = langchain.LangChainHistory(session_id, _LosingOnce(self.service))
        batch = [_lc(turn.user), _lc(turn.reply)]
        try:
            await history.aadd_messages(batch)
        except StorageError:
            await history.aadd_messages(batch)
        return []

    def describe(self) -> dict[str, Any]:
        """Versions."""
        return {
            **super().describe(),
            "langchain-core": importlib.metadata.version("langchain-core"),
        }


class AsyncSessionAdkStore(AsyncSessionStore):
    """``AdkSessionService`` on our MongoDB store."""

    name: ClassVar[str] = "asyncsession-adk"

    def _adk(self, service: SessionService | None = None) -> google_adk.AdkSessionService:
        return google_adk.AdkSessionService(service or self.service)

    @staticmethod
    def _event(message: Message) -> Event:
        role = "user" if message.role == "user" else "model"
        content = types.Content(role=role, parts=[types.Part(text=message.text)])
        return Event(id=message.tag, author="user" if role == "user" else "agent", content=content)

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """The ADK session holding ``messages`` as the adapter stores them.

        ``create_session``, then the events ``append_event`` would store (the ADK event's
        message, its whole JSON and the session state after it, here always empty), appended
        ``seed_batch`` at a time: one ``append_event`` per message (a read and a versioned
        append each) would make seeding a 1,000-message session take tens of seconds.
        """
        adk = self._adk()
        await adk.create_session(app_name=APP, user_id=USER_ID, session_id=session_id)
        key = self._key(session_id)
        events = [self._stored(key, self._event(m)) for m in messages]
        for start in range(0, len(events), self.seed_batch):
            await self.repository.append_events(key, events[start : start + self.seed_batch])

    @staticmethod
    def _stored(key: str, event: Event) -> SessionEvent:
        """The event ``AdkSessionService.append_event`` stores for ``event`` (no state delta)."""
        assert event.content is not None
        return SessionEvent(
            id=str(uuid.uuid5(google_adk._NAMESPACE, f"{key}\x00{event.id}")),
            session_id=key,
            timestamp=datetime.fromtimestamp(event.timestamp, UTC),
            message=google_adk._to_message(event.content),
            metadata={
                google_adk.METADATA_KEY: json.loads(event.model_dump_json()),
                google_adk._STATE_KEY: {},
            },
        )

    async def _get(self, session_id: str, size: int | None) -> Any:
        config = None if size is None else GetSessionConfig(num_recent_events=size)
        session = await self._adk().get_session(
            app_name=APP, user_id=USER_ID, session_id=session_id, config=config
        )
        assert session is not None, session_id
        return session

    @staticmethod
    def _texts(session: Any) -> list[str]:
        return [
            "".join(p.text or "" for p in (e.content.parts or []))
            for e in session.events
            if e.content is not None
        ]

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``get_session`` with ``num_recent_events=size``."""
        return self._texts(await self._get(session_id, size))

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window, then append the user's event and the model's."""
        session = await self._get(session_id, window)
        adk = self._adk()
        await adk.append_event(session, self._event(turn.user))
        await adk.append_event(session, self._event(turn.reply))
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``get_session`` without a window."""
        return self._texts(await self._get(session_id, None))

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Append both events; one ack is lost; append the failed one again."""
        session = await self._get(session_id, 1)
        for message in (turn.user, turn.reply):
            event = self._event(message)
            losing = self._adk(_LosingOnce(self.service))
            try:
                await losing.append_event(session, event)
            except StorageError:
                await self._adk().append_event(session, event)
        return []

    def _key(self, session_id: str) -> str:
        return self._adk().session_key(APP, USER_ID, session_id)

    async def open_writer(self, session_id: str, policy: str, window: int) -> Any:
        """The base system's writer, on the ADK session's log."""
        return await super().open_writer(self._key(session_id), policy, window)

    async def compact(self, session_id: str, keep: int, summary: str) -> str | None:
        """The base system's compaction, on the ADK session's log."""
        return await super().compact(self._key(session_id), keep, summary)

    def describe(self) -> dict[str, Any]:
        """Versions."""
        return {**super().describe(), "google-adk": importlib.metadata.version("google-adk")}


class AsyncSessionPydanticAIStore(AsyncSessionStore):
    """``PydanticAIHistory`` on our MongoDB store."""

    name: ClassVar[str] = "asyncsession-pydantic-ai"

    def _history(self, session_id: str, service: SessionService | None = None) -> Any:
        return pydantic_ai.PydanticAIHistory(session_id, service or self.service, user_id=USER_ID)

    async def seed(self, session_id: str, messages: Sequence[Message]) -> None:
        """The session holding ``messages`` as the adapter stores them."""
        await self.repository.save(Session(id=session_id, user_id=USER_ID))
        events = [
            pydantic_ai._to_event(to_model_message(m), session_id, f"{session_id}:{m.tag}")
            for m in messages
        ]
        for start in range(0, len(events), self.seed_batch):
            await self.repository.append_events(session_id, events[start : start + self.seed_batch])

    @staticmethod
    def _texts(messages: Sequence[ModelMessage]) -> list[str]:
        return [message_text(m) for m in messages]

    async def load_window(self, session_id: str, size: int) -> list[str]:
        """``load(limit=size)``."""
        return self._texts(await self._history(session_id).load(limit=size))

    async def chat_turn(self, session_id: str, turn: Turn, window: int) -> int:
        """Load the window for ``message_history``, then store the run's two new messages."""
        history = self._history(session_id)
        await history.load(limit=window)
        await history.store([to_model_message(turn.user), to_model_message(turn.reply)])
        return 0

    async def read_all(self, session_id: str) -> list[str]:
        """``load()`` without a limit."""
        return self._texts(await self._history(session_id).load())

    async def lost_ack_turn(self, session_id: str, turn: Turn) -> list[str]:
        """Store the run's messages; the ack is lost; store them again on the same history."""
        history = self._history(session_id, _LosingOnce(self.service))
        new = [to_model_message(turn.user), to_model_message(turn.reply)]
        try:
            await history.store(new)
        except StorageError:
            await history.store(new)
        return []

    def describe(self) -> dict[str, Any]:
        """Versions."""
        return {
            **super().describe(),
            "pydantic-ai-slim": importlib.metadata.version("pydantic-ai-slim"),
        }
