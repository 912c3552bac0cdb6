"""``AgentsSession``: the OpenAI Agents SDK's ``Session`` protocol on a ``SessionService``.

Needs the SDK: the ``[agents]`` extra (``pip install '.[agents]'`` from a clone). ::

    session = AgentsSession("conversation-42", service, user_id="alice")
    result = await Runner.run(agent, "Hello", session=session)

The SDK's items (Responses API input items) are stored as real message events, converted the way
the Responses client converts them: a user item a user message, a run of model items one
assistant message that keeps them as given, a run of function-call outputs one tool message.
``get_items`` returns every item exactly as ``add_items`` got it.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, cast

from pydantic import JsonValue

from .._checks import require_object
from .._lifecycle import Closable
from .._responses_items import items_to_messages, messages_to_items
from ..compaction import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    CompactionTicket,
    CompactionWorker,
)
from ..compaction_protocols import TriggerLike
from ..events import SessionEvent
from ..exceptions import SessionExists, UsageError
from ..messages import Message
from ..service import SessionService
from ._session import AdapterSession, History, whole_turns

try:
    from agents.memory.session_settings import (
        SessionSettings,
        coerce_session_settings,
        resolve_session_limit,
    )
except ImportError as _exc:  # pragma: no cover - depends on the environment
    raise ImportError(
        "asyncsession.integrations.openai_agents needs the OpenAI Agents SDK: "
        "install the [agents] extra (from a clone: pip install '.[agents]')"
    ) from _exc

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["AgentsSession"]


_MAIN_BRANCH = "main"
"""The branch every ``AgentsSession`` starts on: the session itself."""
_BRANCH_OF_KEY = "agents_branch_of"
"""Metadata keys of a branch's session: the session it is a branch of, and its branch id."""
_BRANCH_KEY = "agents_branch"


def _is_user(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user"


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        parts = cast("list[object]", content)
        return [
            str(cast("dict[str, Any]", part).get("text", ""))
            for part in parts
            if isinstance(part, dict)
        ]
    return []


def _stamp(moment: datetime) -> str:
    """A time as SQLite's ``CURRENT_TIMESTAMP`` spells it (UTC, to the second)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _turn(
    number: int, item: Mapping[str, Any], event: SessionEvent, cut: int | None
) -> dict[str, Any]:
    content = item.get("content", "")
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return {
        "turn": number,
        "content": text[:cut] + "..." if cut is not None and len(text) > cut else text,
        "full_content": content,
        "timestamp": _stamp(event.timestamp),
        "can_branch": True,
    }


def _always(request: CompactionRequest) -> bool:
    return True


def _items_of(event: SessionEvent) -> list[dict[str, Any]]:
    """The SDK items an event of the active view holds (one or more)."""
    assert event.message is not None  # the active view holds message events only
    return messages_to_items([event.message])


def _starts_turn(item: Mapping[str, Any]) -> bool:
    return item.get("role") == "user" and item.get("type", "message") == "message"


def _fingerprint(messages: Sequence[Message]) -> str:
    digest = hashlib.sha256()
    for message in messages:
        digest.update(message.model_dump_json().encode())
        digest.update(b"\x00")
    return digest.hexdigest()


class _Archive:
    """A one-off strategy: archive every active event, or (``pop``) the newest item: the newest
    event, its other items written back. ``newest`` is the newest item (``None``: none)."""

    def __init__(self, pop: bool) -> None:
        self._pop = pop
        self.newest: dict[str, Any] | None = None

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        events = request.events
        self.newest = _items_of(events[-1])[-1] if events else None
        if not events:
            return CompactionResult.unchanged(events)
        if not self._pop:
            return CompactionResult(compacted_events=(), archived_events=events)
        newest = events[-1]
        rest = tuple(
            SessionEvent(
                session_id=newest.session_id,
                timestamp=newest.timestamp,
                message=message,
                metadata=dict(newest.metadata),
            )
            for message in items_to_messages(_items_of(newest)[:-1])
        )
        return CompactionResult(compacted_events=(*events[:-1], *rest), archived_events=(newest,))


class AgentsSession(History, Closable):
    """An OpenAI Agents SDK ``Session`` whose history is a session of a ``SessionService``.

    Pass it to ``Runner.run``, ``Runner.run_streamed`` or ``Runner.run_sync`` as ``session=``.
    One object may serve concurrent runs; several objects and processes may share a session
    id. What it guarantees (the Agents SDK guide has the details):

    - given a ``user_id``, every call on another user's session raises `AccessDenied` and
      touches nothing; a session it creates is owned by ``user_id`` (else by ``session_id``);
    - each ``add_items`` is one batch of events with random ids, so concurrent runs each store
      their items once; a failed batch keeps its ids for a retry with the same items on this
      object (a retry from another process is not recognised);
    - nothing is deleted: ``pop_item`` archives the newest event and writes back its other
      items in the same compare-and-swap, ``clear_session`` archives every active event; both
      retry when another writer came first and run to their end when the caller is cancelled;
    - ``get_items(limit)`` returns exactly the newest ``limit`` items (``session_settings.limit``
      without one); ``whole_turns=True`` extends the window back to the user item of its turn;
    - compaction runs inline (``trigger`` and ``strategy``) or through a ``worker``, when the
      Runner calls ``run_compaction`` or you call ``compact``;
    - the branch operations of the SDK's ``AdvancedSQLiteSession``, by the same names: a branch
      is a fork (`SessionService.fork`) in the session ``<session_id>/branches/<branch id>``,
      and the protocol's calls read and write the current branch (``main`` at first);
    - every call runs on the event loop the store belongs to, so ``Runner.run_sync`` in any
      thread works on MongoDB; ``close`` (or ``async with``) ends this object, not the service,
      its store or the worker, and later calls raise ``UsageError``.

    System and developer items are stored only by a service built with
    ``allow_system_messages=True``.

    Args:
        session_id: the session's id (the SDK's ``session_id``).
        service: where the session lives.
        user_id: the user whose session this is; ``None``: any session.
        session_settings: the SDK's settings (``limit``); a ``SessionSettings`` or a dict.
        metadata: metadata of a session this object creates.
        whole_turns: extend limited windows back to the start of their turn.
        trigger: compact inline when this fires (needs ``strategy``).
        strategy: what inline compaction does (needs ``trigger``).
        worker: compact through this worker instead (its own trigger and strategy apply).

    Raises:
        UsageError: a blank id, only one of ``trigger`` and ``strategy``, or both inline
            compaction and a worker.
    """

    session_settings: SessionSettings | None
    """The SDK's session settings: ``limit`` applies when ``get_items`` gets none."""
    _keep_using = "the session"

    def __init__(
        self,
        session_id: str,
        service: SessionService,
        *,
        user_id: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        metadata: Mapping[str, JsonValue] | None = None,
        whole_turns: bool = False,
        trigger: TriggerLike | None = None,
        strategy: CompactionStrategy | None = None,
        worker: CompactionWorker | None = None,
    ) -> None:
        super().__init__(session_id, service, user_id, metadata, trigger, strategy)
        if worker is not None and trigger is not None:
            raise UsageError("compact inline (trigger and strategy) or through a worker, not both")
        if worker is not None:
            require_object(worker, "worker", "a CompactionWorker", methods=("submit",))
        self.whole_turns = whole_turns
        """Whether limited windows are extended back to the start of their turn."""
        self.session_settings = (
            coerce_session_settings(dict(session_settings))
            if isinstance(session_settings, Mapping)
            else session_settings or SessionSettings()
        )
        self._worker = worker
        self._branch = _MAIN_BRANCH
        self._sessions: dict[str, AdapterSession] = {_MAIN_BRANCH: self._session}

    def _branch_key(self, branch_id: str) -> str:
        """The id of the session that holds a branch (the session itself for ``main``)."""
        if branch_id == _MAIN_BRANCH:
            return self.session_id
        return f"{self.session_id}/branches/{branch_id}"

    def _adapter(self, branch_id: str) -> AdapterSession:
        session = self._sessions.get(branch_id)
        if session is None:
            session = self._sessions[branch_id] = self._new_session(self._branch_key(branch_id))
        return session

    async def close(self) -> None:
        """End this session object; closing again does nothing. The service stays open."""
        await self.aclose()

    async def _release(self) -> None:
        for session in self._sessions.values():
            session.forget_retries()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The active items, oldest first; with a limit, the newest ``limit`` of them.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        limit = resolve_session_limit(limit, self.session_settings)
        if limit is not None and limit <= 0:
            return []
        return await self._loop.run(self._read(limit))

    async def _read(self, limit: int | None) -> list[TResponseInputItem]:
        events = await self._session.active(limit)
        items = [item for event in events for item in _items_of(event)]
        if limit is not None and len(items) > limit:
            items = whole_turns(items, limit, _starts_turn) if self.whole_turns else items[-limit:]
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items as one batch of message events; the write runs to its end if the
        caller is cancelled.

        Raises:
            AccessDenied: the session belongs to another user; nothing was written.
            UsageError: a system or developer item while the service stores none.
        """
        self._check_open()
        if not items:
            return
        try:
            messages = items_to_messages(cast("list[Mapping[str, Any]]", items))
        except (TypeError, ValueError) as exc:
            raise UsageError(
                f"session {self.session_id!r} cannot store these items: {exc}"
            ) from exc

        target = self._session

        def build(ids: Sequence[str]) -> list[SessionEvent]:
            return [
                SessionEvent(id=event_id, session_id=target.session_id, message=message)
                for event_id, message in zip(ids, messages, strict=True)
            ]

        write = target.append_retrying(
            _fingerprint(messages), len(messages), build, lambda _: str(uuid.uuid4())
        )
        await self._loop.run(write, write=True)

    async def pop_item(self) -> TResponseInputItem | None:
        """Archive the newest item and return it; ``None`` when the active view is empty.

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        return await self._loop.run(self._archive(pop=True), write=True)

    async def _archive(self, pop: bool) -> TResponseInputItem | None:
        while True:  # until no other writer moved the version between the read and the swap
            strategy = _Archive(pop)
            result = await self._session.compact(_always, strategy)
            if result is None or strategy.newest is None:
                return None
            if result.applied:
                return cast("TResponseInputItem", strategy.newest)

    async def clear_session(self) -> None:
        """Archive every active event, so the session's history is empty (nothing is deleted).

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        await self._loop.run(self._archive(pop=False), write=True)

    async def compact(self) -> CompactionResult | CompactionTicket | None:
        """Compact now: inline (the result), through the worker (its ticket), or not (``None``,
        also when the session does not exist yet).

        Raises:
            AccessDenied: the session belongs to another user; nothing was changed.
        """
        self._check_open()
        if self._worker is not None:
            if self._owner is not None:
                await self._loop.run(self._session.exists())
            return self._worker.submit(self._session.session_id)
        return await self._loop.run(self._compact(), write=True)

    async def run_compaction(self, args: Mapping[str, Any] | None = None) -> None:
        """The SDK's compaction hook (the Runner calls it after storing a model response):
        [`compact`][asyncsession.integrations.openai_agents.AgentsSession.compact]. Its
        arguments are ignored: the session's own log is the history."""
        await self.compact()

    @property
    def current_branch_id(self) -> str:
        """The branch this object reads and writes: ``"main"`` (the session itself) until
        [`switch_to_branch`][asyncsession.integrations.openai_agents.AgentsSession.switch_to_branch]
        or a new branch moves it."""
        return self._branch

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns of a branch (the current one when ``None``), numbered from 1.

        Each is a dict of ``turn``, ``content`` (its first 100 characters), ``full_content``,
        ``timestamp`` and ``can_branch`` (always true), as the SDK's advanced session gives.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        return await self._loop.run(self._turns(branch_id, None))

    async def find_turns_by_content(
        self, search_term: str, branch_id: str | None = None
    ) -> list[dict[str, Any]]:
        """The user turns of a branch whose text contains ``search_term`` (ASCII letters in
        any case), in the form of
        [`get_conversation_turns`][asyncsession.integrations.openai_agents.AgentsSession.get_conversation_turns]
        with the whole content as ``content``.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        return await self._loop.run(self._turns(branch_id, search_term))

    async def _turns(self, branch_id: str | None, term: str | None) -> list[dict[str, Any]]:
        pattern = None if term is None else re.compile(re.escape(term), re.IGNORECASE | re.ASCII)
        turns: list[dict[str, Any]] = []
        users = await self._user_items(self._adapter(branch_id or self._branch))
        for number, (event, item) in enumerate(users, 1):
            if pattern is None:
                turns.append(_turn(number, item, event, 100))
            elif any(pattern.search(text) for text in _texts(item.get("content", ""))):
                turns.append(_turn(number, item, event, None))
        return turns

    @staticmethod
    async def _user_items(
        session: AdapterSession,
    ) -> list[tuple[SessionEvent, Mapping[str, Any]]]:
        return [
            (event, item)
            for event in await session.active(None)
            for item in _items_of(event)
            if _is_user(item)
        ]

    async def create_branch_from_turn(
        self, turn_number: int, branch_name: str | None = None
    ) -> str:
        """Branch the current branch just before the user message of turn ``turn_number``
        and switch to the new branch; returns its id.

        The branch is a fork of the current branch's session (`SessionService.fork`): it reads
        the turns before ``turn_number`` without a copy, and what is written to it leaves the
        branch it came from as it was. Without ``branch_name`` the id is
        ``branch_from_turn_<n>_<unix time>`` (with ``_2``, ``_3``... when that is taken).

        Raises:
            UsageError: (a ``ValueError``) the turn has no user message on the current branch,
                ``branch_name`` is blank, or a branch of this session has that id.
            AccessDenied: the session belongs to another user.
        """
        if branch_name is not None and not branch_name.strip():
            raise UsageError("Branch name cannot be empty")
        self._check_open()
        return await self._loop.run(self._create_branch(turn_number, branch_name), write=True)

    async def create_branch_from_content(
        self, search_term: str, branch_name: str | None = None
    ) -> str:
        """[`create_branch_from_turn`][asyncsession.integrations.openai_agents.AgentsSession.create_branch_from_turn]
        at the first user turn of the current branch whose text contains ``search_term``.

        Raises:
            UsageError: no user turn contains it, or as ``create_branch_from_turn``.
        """
        matches = await self.find_turns_by_content(search_term)
        if not matches:
            raise UsageError(f"No user turns found containing {search_term!r}")
        return await self.create_branch_from_turn(int(matches[0]["turn"]), branch_name)

    async def _create_branch(self, turn_number: int, branch_name: str | None) -> str:
        source = self._session
        users = await self._user_items(source)
        if not 1 <= turn_number <= len(users):
            raise UsageError(
                f"Turn {turn_number} does not contain a user message in branch {self._branch!r}"
            )
        point = users[turn_number - 1][0].id
        parent = await self.service.find_by_id(source.session_id)
        inherited = dict(parent.metadata) if parent is not None else {}
        if branch_name is not None:
            names = [branch_name]
        else:
            base = f"branch_from_turn_{turn_number}_{int(time.time())}"
            names = [base, *(f"{base}_{n}" for n in range(2, 1000))]
        for name in names:
            key = self._branch_key(name)
            # A fork id names one fork: the same parent and point again would return it.
            if name != _MAIN_BRANCH and await self.service.find_by_id(key) is None:
                metadata = {**inherited, _BRANCH_OF_KEY: self.session_id, _BRANCH_KEY: name}
                try:
                    await self.service.fork(
                        source.session_id, before=point, fork_id=key, metadata=metadata
                    )
                except SessionExists:
                    continue
                self._switch(name)
                return name
        raise UsageError(f"Branch ID {names[-1]!r} has already been used. Choose a new branch ID.")

    def _switch(self, branch_id: str) -> None:
        self._branch = branch_id
        self._session = self._adapter(branch_id)

    async def switch_to_branch(self, branch_id: str) -> None:
        """Read and write ``branch_id`` from now on (this object only).

        Raises:
            UsageError: (a ``ValueError``) the branch does not exist.
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        await self._loop.run(self._switch_checked(branch_id))

    async def _switch_checked(self, branch_id: str) -> None:
        if not await self._branch_exists(branch_id):
            raise UsageError(f"Branch {branch_id!r} does not exist")
        self._switch(branch_id)

    async def _branch_exists(self, branch_id: str) -> bool:
        if not branch_id.strip():
            return False
        session = self._adapter(branch_id)
        session.check(found := await self.service.find_by_id(session.session_id))
        if found is None:
            return False
        return branch_id == _MAIN_BRANCH or found.metadata.get(_BRANCH_OF_KEY) == self.session_id

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Delete a branch: its session and the events written to it (what it read from the
        branch it came from stays there). Other branches made from it keep what they read.

        Raises:
            UsageError: (a ``ValueError``) ``branch_id`` is blank, ``main``, does not exist,
                or is the current branch and ``force`` is false (with ``force`` this object
                switches to ``main`` first).
            AccessDenied: the session belongs to another user.
        """
        if not branch_id or not branch_id.strip():
            raise UsageError("Branch ID cannot be empty")
        if branch_id == _MAIN_BRANCH:
            raise UsageError("Cannot delete the 'main' branch")
        if branch_id == self._branch and not force:
            raise UsageError(
                f"Cannot delete current branch {branch_id!r}. "
                "Use force=True or switch branches first"
            )
        self._check_open()
        await self._loop.run(self._delete_branch(branch_id), write=True)

    async def _delete_branch(self, branch_id: str) -> None:
        if not await self._branch_exists(branch_id):
            raise UsageError(f"Branch {branch_id!r} does not exist")
        if branch_id == self._branch:
            self._switch(_MAIN_BRANCH)
        await self.service.delete(self._branch_key(branch_id))
        self._sessions.pop(branch_id, None)

    async def list_branches(self) -> list[dict[str, Any]]:
        """The branches of this session: ``main`` first (once it exists), then the others
        oldest first, each a dict of ``branch_id``, ``message_count`` (items), ``user_turns``,
        ``is_current`` and ``created_at``, as the SDK's advanced session gives.

        Raises:
            AccessDenied: the session belongs to another user.
        """
        self._check_open()
        return await self._loop.run(self._list_branches())

    async def _list_branches(self) -> list[dict[str, Any]]:
        main = await self.service.find_by_id(self.session_id)
        self._adapter(_MAIN_BRANCH).check(main)
        if main is None:
            return []
        # A branch belongs to the session's owner, as every fork belongs to its parent's.
        found = await self.service.find_by_user_id(main.user_id)
        names = [
            str(session.metadata.get(_BRANCH_KEY))
            for session in sorted(found, key=lambda session: (session.created_at, session.id))
            if session.metadata.get(_BRANCH_OF_KEY) == self.session_id
            and session.id == self._branch_key(str(session.metadata.get(_BRANCH_KEY)))
        ]
        branches: list[dict[str, Any]] = []
        for name in [_MAIN_BRANCH, *names]:
            session = self._adapter(name)
            found_session = await self.service.find_by_id(session.session_id)
            if found_session is None:  # deleted meanwhile
                continue
            items = [item for event in await session.active(None) for item in _items_of(event)]
            branches.append(
                {
                    "branch_id": name,
                    "message_count": len(items),
                    "user_turns": sum(1 for item in items if _is_user(item)),
                    "is_current": name == self._branch,
                    "created_at": _stamp(found_session.created_at),
                }
            )
        return branches
