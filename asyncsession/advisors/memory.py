"""``SessionMemoryAdvisor``: load the session's history into the prompt, store the new messages.

Per model call (per round of a tool loop, at its default order) the advisor:

1. reads the session id from the advisor context (``MissingSessionId`` without one), creating
   the session if it does not exist and checking its owner if a user id is given;
2. loads the history with its ``EventFilter`` merged with the call's, always under the active
   view, so archived events never reach the model. Under a ``SessionTurnAdvisor`` the first
   advisor needing the session resolves it: usually this one, in the step that also stores the
   user's message (``start_turn``); if an advisor in between resolved it first, this one reuses
   that read;
3. keeps only the latest stored system message (looked up separately under a window), moves
   every system message to the front and sends an exact repeat once, never rewriting a text;
4. drops tool calls and tool results that lost their counterpart from the prompt (the read
   guard), with one warning; the log is never changed;
5. prepends the history unless the prompt already holds it (compared by content);
6. stores the prompt's last user message (or, inside a tool loop, the trailing tool results)
   through the ``MessageFilter``; a tool result is stored exactly when its tool call was (the
   write guard), whatever the filter says;
7. after the model answers, stores the reply through the ``MessageFilter``, with the usage
   the model reported in its metadata (``USAGE_METADATA_KEY``, read by
   ``ContextWindowTrigger``); a reply the server compacted during (a Responses API
   ``compaction`` item before its output) also archives the events its request was built from,
   in the same compare-and-swap;
8. once the turn is complete (the reply asks for no tools), compacts if configured and no
   ``SessionTurnAdvisor`` compacts for the call.

Under a ``SessionTurnAdvisor(store_question="with_reply")`` steps 6 and 7 store nothing yet:
the session is resolved with a read of the window (the question is in the prompt, so the model
sees it all the same), and every message the advisor would store is handed to the turn, which
stores them all in one write once the call is complete. A reply the server compacted during
makes that write the compare-and-swap that also archives what its item covers (the question
and any earlier round of the call are written archived) and writes the ``COMPACTION`` record.

The history is read once per call: from round 2 of a tool loop on, the advisor reuses it and
knows what it stored itself, so a round costs no read.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain
from typing import Any, Final

from pydantic import JsonValue

from .._server_compaction import commit_compacted_reply, compacted_during, covered_by_reply
from .._shield import shielded
from ..chat import ChatRequest, ChatResponse
from ..compaction import CompactionStrategy, TriggerLike, usage_metadata
from ..events import Session, SessionEvent
from ..filters import EventFilter
from ..messages import Message, SystemMessage, ToolResponseMessage, UserMessage
from ..service import SessionService, allows_system_messages
from ._history import (
    LATEST_SYSTEM_FILTER,
    can_tell_newest,
    contains_run,
    guard_history,
    history_system_messages,
    last_request_message,
    needs_system_lookup,
    newest_answers,
    system_first,
)
from ._session import (
    TURN_STATE,
    CompactionOptions,
    Resolved,
    TurnState,
    check_service,
    known_active_view,
    open_turn,
    resolve_session,
)
from .base import SESSION_MEMORY_ORDER, BaseAdvisor, CallContext, StateKey
from .contexts import (
    DEFAULT_USER_ID,
    EVENT_FILTER_CONTEXT_KEY,
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    SESSION_ID_CONTEXT_KEY,
    SESSION_METADATA_CONTEXT_KEY,
    USER_ID_CONTEXT_KEY,
    SessionContexts,
)
from .filters import MessageFilter
from .ids import EventIdGenerator, RandomEventIdGenerator

__all__ = ["SessionMemoryAdvisor"]

logger: logging.Logger = logging.getLogger("asyncsession.advisors")

_ORPHAN_WARNING = (
    "Session %r: dropped %d tool call/result message(s) without their counterpart from the "
    "prompt (the log is unchanged). Likely causes: an EventFilter with message_types hiding "
    "TOOL events, a MessageFilter that skipped them, or a turn interrupted between a tool "
    "call and its result."
)


@dataclass(slots=True, kw_only=True)
class _MemoryCall:
    """What one memory advisor knows during one call; lives in ``CallContext.state``."""

    session: Session
    read_filter: EventFilter
    events: tuple[SessionEvent, ...]
    history_system: list[Message]
    history: list[Message]
    turn: TurnState | None
    appended: list[SessionEvent] = field(default_factory=list[SessionEvent])
    stored_requests: list[Message] = field(default_factory=list[Message])
    request_ids: list[str] = field(default_factory=list[str])
    response_ids: list[str] = field(default_factory=list[str])


class SessionMemoryAdvisor(BaseAdvisor):
    """Session history in, new messages out: the conversation memory of a ``ChatClient``.

    Args:
        service: the session service.
        default_user_id: the owner of sessions created without a user id in the context.
        event_filter: which stored events make the history (merged with the call's
            ``EVENT_FILTER_CONTEXT_KEY`` filter and always with ``EventFilter.active()``).
        message_filter: which messages are stored (default: all but empty assistant frames).
        request_event_id_generator: the ids of stored user messages and tool results;
            ``None`` (the default): the store chooses them (random ids).
        response_event_id_generator: the ids of stored replies; ``None``: the store chooses.
        compaction_trigger: when to compact after a complete turn (with a strategy).
        compaction_strategy: how to compact (with a trigger).
        order: the position in the chain; the default runs once per round of the tool loop.
            Below ``ToolCallingAdvisor.DEFAULT_ORDER`` it wraps the loop instead and stores
            only the user message and the final reply.

    Raises:
        UsageError: only one of ``compaction_trigger`` and ``compaction_strategy`` is set.
    """

    DEFAULT_ORDER: Final = SESSION_MEMORY_ORDER
    """The default order: inside the tool loop, so it runs once per round."""

    # The context keys, where the reference documents them (the same strings as the module
    # constants in asyncsession.advisors.contexts, which SessionContexts reads).
    SESSION_ID_CONTEXT_KEY: Final = SESSION_ID_CONTEXT_KEY
    """Routes the call to a session; required on every call."""
    USER_ID_CONTEXT_KEY: Final = USER_ID_CONTEXT_KEY
    """The owner of a session the call creates; when set, enforced on existing sessions."""
    EVENT_FILTER_CONTEXT_KEY: Final = EVENT_FILTER_CONTEXT_KEY
    """An ``EventFilter`` merged over the advisor's own for this call."""
    SESSION_METADATA_CONTEXT_KEY: Final = SESSION_METADATA_CONTEXT_KEY
    """A mapping stored as the metadata of a session the call creates."""
    REQUEST_EVENT_IDS_CONTEXT_KEY: Final = REQUEST_EVENT_IDS_CONTEXT_KEY
    """Set by the advisor: the ids of the request-side events it stored, in order."""
    RESPONSE_EVENT_IDS_CONTEXT_KEY: Final = RESPONSE_EVENT_IDS_CONTEXT_KEY
    """Set by the advisor: the ids of the replies it stored, in order."""

    def __init__(
        self,
        service: SessionService,
        *,
        default_user_id: str = DEFAULT_USER_ID,
        event_filter: EventFilter | None = None,
        message_filter: MessageFilter | None = None,
        request_event_id_generator: EventIdGenerator | None = None,
        response_event_id_generator: EventIdGenerator | None = None,
        compaction_trigger: TriggerLike | None = None,
        compaction_strategy: CompactionStrategy | None = None,
        order: int = DEFAULT_ORDER,
    ) -> None:
        compaction = CompactionOptions.of(compaction_trigger, compaction_strategy)
        self.service: SessionService = check_service(service, "SessionMemoryAdvisor")
        """The session service."""
        self.default_user_id = default_user_id
        """The owner of sessions created without a user id."""
        self.event_filter: EventFilter = event_filter or EventFilter.all()
        """The advisor's history filter."""
        self.message_filter: MessageFilter = message_filter or MessageFilter.skip_empty_messages()
        """Which messages are stored."""
        self.request_event_id_generator: EventIdGenerator = (
            request_event_id_generator or RandomEventIdGenerator()
        )
        """Chooses the ids of stored user messages and tool results."""
        self.response_event_id_generator: EventIdGenerator = (
            response_event_id_generator or RandomEventIdGenerator()
        )
        """Chooses the ids of stored replies."""
        self.compaction_trigger = compaction_trigger
        """When to compact after a complete turn."""
        self.compaction_strategy = compaction_strategy
        """How to compact."""
        self.order = order
        """The position in the chain."""
        self._compaction = compaction
        # No generator given: the store chooses the ids (it may have registered them ahead).
        self._request_ids_by_store = request_event_id_generator is None
        self._response_ids_by_store = response_event_id_generator is None
        self._key: StateKey[_MemoryCall] = StateKey(f"SessionMemoryAdvisor@{id(self):x}")

    def _may_store_system_messages(self) -> bool:
        """False only when the service says it refuses to store system messages, so none can
        exist to look up (a service that does not say is asked every time)."""
        return allows_system_messages(self.service)

    def history_filter(self, context: Mapping[str, Any]) -> EventFilter:
        """The filter the history is read with for a call with this advisor context."""
        own = self.event_filter.merge(SessionContexts.event_filter(context))
        return own.merge(EventFilter.active())

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Load and guard the history (once per call), store the request message, and send the
        history with the request.

        On the stream path the reply is stored by
        [`after`][asyncsession.advisors.memory.SessionMemoryAdvisor.after] once the stream was read
        to the
        end: a stream abandoned before its end stores no reply (the request message stays
        stored, unless the turn stores it with the reply) and runs no compaction.
        """
        session_id = SessionContexts.session_id(ctx.context)
        memory = ctx.state.get(self._key)
        if memory is None or memory.session.id != session_id:
            memory = await self._open(ctx, session_id, request.messages)
            ctx.state[self._key] = memory
        prompt = request.messages
        non_system = [m for m in prompt if not isinstance(m, SystemMessage)]
        history = [] if contains_run(non_system, memory.history) else memory.history
        messages = system_first([*memory.history_system, *history, *prompt])
        await self._store_request(ctx, memory, prompt)
        return request.with_messages(messages)

    async def _open(
        self, ctx: CallContext, session_id: str, prompt: Sequence[Message]
    ) -> _MemoryCall:
        read_filter = self.history_filter(ctx.context)
        turn = ctx.state.get(TURN_STATE)
        if turn is not None and (turn.service is not self.service or turn.session_id != session_id):
            turn = None
        opened: list[SessionEvent] = []

        async def step() -> Resolved:
            """Resolve, check the owner and read the window; store the user's message with it."""
            target = last_request_message(prompt)
            stores_now = turn is None or not turn.stores_with_reply
            if (
                stores_now
                and isinstance(target, UserMessage)
                and self.message_filter.should_persist(target)
            ):
                resolved, event = await open_turn(
                    self.service,
                    ctx.context,
                    session_id,
                    target,
                    read_filter=read_filter,
                    event_id=self._request_event_id(ctx, target),
                    default_user_id=self.default_user_id,
                )
                opened.append(event)
                return resolved
            return await resolve_session(
                self.service,
                ctx.context,
                session_id,
                read_filter=read_filter,
                default_user_id=self.default_user_id,
            )

        if turn is None:
            resolved = await step()
        else:
            # The turn owns the resolve and the compaction; this advisor's options go to it
            # when it has none of its own.
            if turn.compaction is None:
                turn.compaction = self._compaction
            resolved = await turn.resolve(step)
        session = resolved.session
        if opened or (resolved.read_filter == read_filter and resolved.events is not None):
            events = resolved.events or ()  # this advisor's read, or the turn's was the same
        else:
            events = tuple(await self.service.get_events(session_id, read_filter))
        looked_up: SessionEvent | None = None
        if needs_system_lookup(events, read_filter) and self._may_store_system_messages():
            found = await self.service.get_events(session_id, LATEST_SYSTEM_FILTER)
            looked_up = found[-1] if found else None
        conversation = [
            e.message
            for e in events
            if e.message is not None and not isinstance(e.message, SystemMessage)
        ]
        prompt_rest = [m for m in prompt if not isinstance(m, SystemMessage)]
        history, dropped = guard_history(conversation, prompt_rest)
        if dropped:
            logger.warning(_ORPHAN_WARNING, session_id, dropped)
        memory = _MemoryCall(
            session=session,
            read_filter=read_filter,
            events=tuple(events),
            history_system=history_system_messages(events, looked_up),
            history=history,
            turn=turn,
        )
        for event in opened:
            _track(memory, event)
            self._record_request(ctx, memory, event, last_request_message(prompt))
        return memory

    async def _store_request(
        self, ctx: CallContext, memory: _MemoryCall, prompt: Sequence[Message]
    ) -> None:
        target = last_request_message(prompt)
        if target is None or any(target is done for done in memory.stored_requests):
            return
        if isinstance(target, UserMessage):
            store = self.message_filter.should_persist(target)
        else:
            store = self._write_guard(memory, target)
        if not store:
            return
        event = await self._append(ctx, memory, target, self._request_event_id(ctx, target))
        self._record_request(ctx, memory, event, target)

    def _record_request(
        self, ctx: CallContext, memory: _MemoryCall, event: SessionEvent, message: Message | None
    ) -> None:
        """Note a stored request message."""
        if message is not None:
            memory.stored_requests.append(message)
        memory.request_ids.append(event.id)
        ctx.context[REQUEST_EVENT_IDS_CONTEXT_KEY] = list(memory.request_ids)

    def _write_guard(self, memory: _MemoryCall, result: ToolResponseMessage) -> bool:
        """Store a tool result exactly when its tool call is the newest stored event."""
        accepted = self.message_filter.should_persist(result)
        stored_call: bool | None
        if can_tell_newest(memory.read_filter):
            newest_first = chain(reversed(memory.appended), reversed(memory.events))
            stored_call = bool(newest_answers(newest_first, result))
        else:  # the read cannot tell; what this call stored may
            stored_call = newest_answers(reversed(memory.appended), result)
        if stored_call is None:
            return accepted
        if stored_call != accepted:
            ids = [response.id for response in result.responses]
            logger.warning(
                "Session %r: %s the result of tool call(s) %s although the MessageFilter %s it, "
                "because the tool call %s stored",
                memory.session.id,
                "storing" if stored_call else "not storing",
                ids,
                "rejects" if stored_call else "accepts",
                "is" if stored_call else "was not",
            )
        return stored_call

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        """Store the reply (if the message filter lets it through); compact after a complete
        turn if configured."""
        memory = ctx.state[self._key]
        if self.message_filter.should_persist(response.message):
            usage = response.usage
            event = await self._append(
                ctx,
                memory,
                response.message,
                self._response_event_id(ctx, response.message),
                metadata=None
                if usage is None
                else usage_metadata(usage.prompt_tokens, usage.completion_tokens),
                compacted=compacted_during(response.message),
            )
            memory.response_ids.append(event.id)
            ctx.context[RESPONSE_EVENT_IDS_CONTEXT_KEY] = list(memory.response_ids)
        complete = not response.has_tool_calls
        if complete and memory.turn is None and self._compaction is not None:
            # Without a turn advisor this advisor compacts; with one, the turn does.
            await self._compaction.after_turn(
                self.service,
                memory.session,
                known_active_view(memory.read_filter, memory.events, memory.appended),
            )
        return response

    def _request_event_id(self, ctx: CallContext, message: Message) -> str | None:
        """The id to store a request message with; ``None``: the store chooses."""
        if self._request_ids_by_store:
            return None
        return self.request_event_id_generator.generate(ctx.context, message)

    def _response_event_id(self, ctx: CallContext, message: Message) -> str | None:
        """The id to store a reply with; ``None``: the store chooses."""
        if self._response_ids_by_store:
            return None
        return self.response_event_id_generator.generate(ctx.context, message)

    async def _append(
        self,
        ctx: CallContext,
        memory: _MemoryCall,
        message: Message,
        event_id: str | None,
        *,
        metadata: dict[str, JsonValue] | None = None,
        compacted: bool = False,
    ) -> SessionEvent:
        """Store ``message``; a reply the server ``compacted`` during archives what it covers
        (the events this call's request was built from) in the same write."""
        covered = covered_by_reply((*memory.events, *memory.appended)) if compacted else None
        if memory.turn is not None and memory.turn.stores_with_reply:
            # Stored with the reply; a compacted one archives what it covers in that write.
            event = await memory.turn.defer(message, event_id, metadata, covers=covered)
        elif covered is not None:
            reply = SessionEvent(
                id=event_id or str(uuid.uuid4()),
                session_id=memory.session.id,
                message=message,
                metadata=metadata or {},
            )
            event = await shielded(commit_compacted_reply(self.service, reply, covered))
        else:
            event = await shielded(
                self.service.append_message(
                    memory.session.id, message, event_id=event_id, metadata=metadata
                )
            )
        _track(memory, event)
        return event


def _track(memory: _MemoryCall, event: SessionEvent) -> None:
    """Note an event this call stored (and the turn's, for the turn advisor's compaction)."""
    memory.appended.append(event)
    if memory.turn is not None:
        memory.turn.appended.append(event)
