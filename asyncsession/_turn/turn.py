"""`Turn`: the steps of one chat call, in order.

1. **Resolve** the session: one snapshot read gives the session, its version, the window the
   history is read from and the newest commit's lease. A missing session is created (owned by
   the call's user, else the default user); a session of another user is refused
   (``AccessDenied``) before anything is written or the model is called.
2. **Wait or replay.** While another attempt's lease is live, the turn waits (reading again,
   with growing pauses) up to a bound, then raises `TurnInProgress`. With a request id, a stored
   reply of the same request is returned without a model call; the same request id with
   another message is refused (`RequestIdReused`).
3. **Store the question** by the chosen policy: ``"first"`` commits it now, at the version read,
   carrying the turn's lease (a lost compare-and-swap reads again); ``"with_reply"`` keeps it
   for the turn's last commit (and, with a request id, takes the lease with one command).
4. **Call the model** with the history prepended once, system messages first, tool calls
   without their results left out; the client's ``model_advisors`` wrap each call.
5. **Run the tool loop**: the calls of one reply run concurrently; each round (the tool call
   and its results) is one commit carrying the lease, or waits for the last commit; a round
   of return-direct tools ends the loop.
6. **Store the reply**: the last commit, at the version the turn knows, carrying no lease (so
   it ends the lease). A reply the server compacted during makes it a compaction commit.
7. **Compact** once the turn is complete, inline or by a background compactor.

A turn that fails or is abandoned releases its lease; every write runs to its end even when
the call is cancelled. Without session memory a turn is steps 4 and 5 only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import JsonValue

from .._shield import shielded
from .._telemetry import tool_span
from .._text import check_event_text
from ..advisors import (
    Advisor,
    CallContext,
    ChunkStream,
    EventIdGenerator,
    IdempotentSessionEventIdGenerator,
    MessageFilter,
)
from ..chat import RETURN_DIRECT, ChatChunk, ChatRequest, ChatResponse, Usage
from ..compaction.triggers import USAGE_METADATA_KEY
from ..events import CreateSessionRequest, SessionEvent, utc_now
from ..exceptions import (
    AccessDenied,
    MissingSessionId,
    RequestIdReused,
    SessionExists,
    ToolLoopLimitExceeded,
    TurnInProgress,
)
from ..filters import EventFilter
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..repository import Lease, SessionSnapshot
from ..service import SessionService
from ..tools import Tool
from .chain import run_call, start_stream
from .log import (
    ACTIVE_VIEW,
    LATEST_SYSTEM_FILTER,
    Compaction,
    LeaseHolder,
    Waiting,
    can_tell_newest,
    commit_compacted,
    compact_after_turn,
    compacted_during,
    contains_run,
    guard_history,
    history_system_messages,
    known_active_view,
    last_request_message,
    latest_system,
    newest_answers,
    same_content,
    system_first,
)

__all__ = ["RETURNED_METADATA_KEY", "SessionMemory", "StoreQuestion", "Turn", "request_event_id"]

logger = logging.getLogger("asyncsession.turn")

StoreQuestion = Literal["first", "with_reply"]
"""When a turn stores the user's message: ``"first"``, before the model call (so it survives a
failed call), or ``"with_reply"``, with the rest of the turn in one commit once it is complete
(nothing is stored for a turn that fails)."""
RETURNED_METADATA_KEY: Final = "return_direct"
"""The metadata key (value ``True``) of the event that holds the results of return-direct
tools: the turn that stored it is complete although its last model message asks for tools."""

_ORPHAN_WARNING = (
    "Session %r: dropped %d tool call/result message(s) without their counterpart from the "
    "prompt (the log is unchanged). Likely causes: an EventFilter with message_types hiding "
    "TOOL events, a MessageFilter that skipped them, or a turn interrupted between a tool "
    "call and its result."
)

Complete = Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]]
"""One model request on the call path."""
OpenStream = Callable[[CallContext, ChatRequest], ChunkStream]
"""One model request on the stream path."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMemory:
    """How a client keeps its turns in sessions: its session keywords, checked once."""

    service: SessionService
    compaction: Compaction | None
    store_question: StoreQuestion
    event_filter: EventFilter
    message_filter: MessageFilter
    event_ids: EventIdGenerator | None
    default_user_id: str
    lease_ttl: float
    wait: float
    read_filter: EventFilter = dataclasses.field(init=False)
    """The client's filter merged with the active view: what a call without a filter of its
    own reads."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "read_filter", self.event_filter.merge(ACTIVE_VIEW))

    def history_filter(self, call_filter: EventFilter | None) -> EventFilter:
        """The filter a call's history is read with: the client's, the call's over it, and
        always the active view."""
        if call_filter is None:
            return self.read_filter
        return self.event_filter.merge(call_filter).merge(ACTIVE_VIEW)


class Turn:
    """One chat call, its steps in order (see the module docs).

    Build one per call; `run` it, or iterate `stream` for its chunks.
    """

    def __init__(
        self,
        *,
        memory: SessionMemory | None,
        ctx: CallContext,
        request: ChatRequest,
        tools: Mapping[str, Tool],
        max_rounds: int,
        model_advisors: Sequence[Advisor],
        complete: Complete,
        open_stream: OpenStream,
    ) -> None:
        self.memory = memory
        self.ctx = ctx
        self.request = request
        self.max_rounds = max_rounds
        self.model_advisors = model_advisors
        self.complete = complete
        self.open_stream = open_stream
        if request.tools:
            registry = dict(tools)
            for tool in request.tools:  # the call's tools win
                registry[tool.name] = tool
            tools = registry
        self.tools: Mapping[str, Tool] = tools
        self.final: ChatResponse | None = None
        self._session_id = ""
        self._version = 0
        self._read_filter = ACTIVE_VIEW
        self._events: tuple[SessionEvent, ...] = ()
        self._history: Sequence[SessionEvent] = ()  # the window before the turn's question
        self._latest: SessionEvent | None = None  # the latest system message in the window
        self._system: SessionEvent | None = None  # the latest system message, looked up
        self._lease: LeaseHolder | None = None
        self._question: SessionEvent | None = None
        self._taken_over = False  # the question was stored by an earlier attempt of the request
        self._replaying = False  # the question was stored already: later commits may be replays
        self._reply_id: str | None = None
        self._turn: list[SessionEvent] = []  # what the turn stored or will store, in order
        self._stored: set[str] = set()  # the ids among them already committed
        self._sent: set[str] = set()  # the events the latest request was built from
        self._summary: str | None = None  # the compacted reply of the turn, if any
        self._covered: set[str] = set()  # what its request was built from
        self._request_ids: list[str] = []
        self._response_ids: list[str] = []

    # --- the two shapes --------------------------------------------------------------------

    async def run(self) -> ChatResponse:
        """Run the turn on the call path; the final response."""
        async with aclosing(self._steps(streaming=False)) as steps:
            async for _ in steps:
                pass
        assert self.final is not None
        return self.final

    def stream(self) -> ChunkStream:
        """The turn's chunks, every round's as they arrive; nothing runs until iterated."""
        return _TurnStream(self)

    # --- the steps -------------------------------------------------------------------------

    async def _steps(self, *, streaming: bool) -> AsyncGenerator[ChatChunk]:
        memory = self.memory
        if memory is not None:
            replayed = await self._open(memory)
            if replayed is not None:
                self.final = self._finished(replayed)
                if streaming:
                    async with aclosing(ChunkStream.of_response(self.final)) as chunks:
                        async for chunk in chunks:
                            yield chunk
                return
        try:
            prompt = self._first_prompt(memory)
            usage: Usage | None = None
            final: ChatResponse | None = None
            for round_number in range(1, self.max_rounds + 1):
                request = dataclasses.replace(
                    self.request, messages=tuple(prompt), tools=tuple(self.tools.values())
                )
                if streaming:
                    chunks = start_stream(self.model_advisors, self.ctx, request, self.open_stream)
                    async with aclosing(chunks):
                        async for chunk in chunks:
                            yield chunk
                    response = chunks.response
                elif self.model_advisors:
                    response = await run_call(self.model_advisors, self.ctx, request, self.complete)
                else:
                    response = await self.complete(self.ctx, request)
                if response.usage is not None:
                    usage = response.usage if usage is None else usage + response.usage
                compacted = compacted_during(response.message)
                if not response.has_tool_calls or not self.tools:
                    # Without tools offered, tool calls are the caller's to run: the reply
                    # ends the call (and its turn is not complete).
                    final = dataclasses.replace(response, usage=usage)
                    if compacted:
                        self._covered = set(self._sent)
                    break
                direct = all(
                    (tool := self.tools.get(call.name)) is not None and tool.return_direct
                    for call in response.tool_calls
                )
                if round_number == self.max_rounds and not direct:
                    raise ToolLoopLimitExceeded(self.max_rounds)
                results = await _run_tools(response.tool_calls, self.tools)
                call_event = await self._store_round(response, results, compacted, direct)
                if direct:
                    final = dataclasses.replace(
                        response, usage=usage, finish_reason=RETURN_DIRECT, tool_results=results
                    )
                    if streaming:
                        for chunk in final.result_chunks():
                            yield chunk
                    break
                if compacted:  # the compaction item stands for everything the request sent
                    prompt = [m for m in prompt if isinstance(m, SystemMessage)]
                prompt = [*prompt, response.message, results]
                if call_event is not None:
                    self._sent.update(e.id for e in self._turn[-2:])
            assert final is not None
            if memory is not None:
                await self._store_reply(memory, final)
        except BaseException:
            if self._lease is not None:
                await self._lease.release()
            raise
        complete = not final.has_tool_calls
        if memory is not None and memory.compaction is not None and self.ctx.session and complete:
            await compact_after_turn(
                memory.service,
                self.ctx.session,
                memory.compaction,
                None
                if self._summary is not None
                else known_active_view(self._read_filter, self._events, self._turn),
            )
        self.final = self._finished(final)

    async def _open(self, memory: SessionMemory) -> ChatResponse | None:
        """Steps 1 to 3: the session, the window, waiting or replaying, the question."""
        ctx = self.ctx
        session_id = ctx.session_id
        if session_id is None:
            raise MissingSessionId("No session id for a client with session memory")
        self._session_id = session_id
        self._read_filter = memory.history_filter(ctx.event_filter)
        service = memory.service
        lease = self._lease = LeaseHolder(service, session_id, memory.lease_ttl)
        question = last_request_message(self.request.messages)
        if question is not None:  # refused before the session is read or created
            check_event_text(SessionEvent(session_id=session_id, message=question))
        request_id = ctx.request_id
        waiting: Waiting | None = None
        while True:
            snapshot = await self._read(memory)
            if snapshot is None:
                continue  # created concurrently: read what the other creator wrote
            events = snapshot.events
            if request_id is not None and isinstance(question, UserMessage):
                replayed = self._replayed(events, question)
                if replayed is not None:
                    return replayed
            other = snapshot.lease
            if other is not None and not lease.mine(other) and other.is_live():
                waiting = waiting or Waiting(memory.wait)
                if not await waiting.pause():
                    raise TurnInProgress(session_id, request_id, _seconds_left(other))
                continue
            self._version, self._events = snapshot.version, events
            if await self._store_question(memory, question, snapshot):
                break
        await self._history_before(memory)
        return None

    async def _read(self, memory: SessionMemory) -> SessionSnapshot | None:
        """The snapshot of the call's window; a missing session is created (then ``None`` when
        a concurrent creator won, to be read again)."""
        ctx, service = self.ctx, memory.service
        snapshot = await service.get_snapshot(self._session_id, self._read_filter)
        if snapshot is None:
            create = CreateSessionRequest(
                id=self._session_id,
                user_id=ctx.user_id or memory.default_user_id,
                metadata=ctx.metadata,
            )
            try:
                session = await shielded(service.create(create))
            except SessionExists:
                return None
            snapshot = SessionSnapshot(session=session, version=0, events=())
        if ctx.user_id is not None and snapshot.session.user_id != ctx.user_id:
            raise AccessDenied(self._session_id, ctx.user_id)
        ctx.session = snapshot.session
        return snapshot

    def _replayed(
        self, events: Sequence[SessionEvent], question: UserMessage
    ) -> ChatResponse | None:
        """The stored reply of this request, if an attempt completed it.

        Raises:
            RequestIdReused: the request's stored question is another message.
        """
        session_id, request_id = self._session_id, self.ctx.request_id
        assert request_id is not None
        q_id = request_event_id(session_id, request_id, question, reply=False)
        reply_id = request_event_id(session_id, request_id, question, reply=True)
        stored = next((e for e in events if e.id == q_id), None)
        if stored is not None and stored.message and not same_content(stored.message, question):
            raise RequestIdReused(session_id, request_id)
        end = next((i for i, e in enumerate(events) if e.id == reply_id), None)
        if end is None:
            return None
        start = next((i for i, e in enumerate(events) if e.id == q_id), end)
        turn = [e for e in events[start : end + 1] if e.message is not None]
        self._request_ids = [e.id for e in turn if not isinstance(e.message, AssistantMessage)]
        self._response_ids = [e.id for e in turn if isinstance(e.message, AssistantMessage)]
        last = events[end].message
        if isinstance(last, ToolResponseMessage):
            call = next(
                (e.message for e in reversed(turn[:-1]) if isinstance(e.message, AssistantMessage)),
                None,
            )
            if call is not None:
                return ChatResponse(message=call, finish_reason=RETURN_DIRECT, tool_results=last)
        if isinstance(last, AssistantMessage):
            return ChatResponse(message=last, finish_reason="stop")
        return None

    async def _store_question(
        self,
        memory: SessionMemory,
        question: UserMessage | ToolResponseMessage | None,
        snapshot: SessionSnapshot,
    ) -> bool:
        """Step 3; ``False`` when a compare-and-swap or a lease race was lost (read again)."""
        lease = self._lease
        assert lease is not None
        request_id = self.ctx.request_id
        event = None if question is None else self._question_event(memory, question, snapshot)
        derived = request_id is not None or memory.event_ids is not None  # else a random id
        if event is not None and derived and any(e.id == event.id for e in snapshot.events):
            # Stored already: by an attempt of this request that is gone (its turn is taken
            # over), or a replay of an id the client's generator derived.
            if not await lease.acquire(snapshot.version):
                return False
            self._question = event
            self._record(event, stored=True, request=True)
            self._taken_over = request_id is not None
            self._replaying = True
            return True
        if request_id is not None and not await lease.acquire(snapshot.version):
            return False  # another attempt took the session first: read again
        if event is not None and memory.store_question == "first":
            # With a request id the question's id is fixed, so an attempt racing this one would
            # see its append taken for a replay: the lease just taken decided the race instead.
            appended = await shielded(
                memory.service.append_events(
                    self._session_id, [event], snapshot.version, lease=lease.lease()
                )
            )
            if not appended:
                await lease.release()
                return False
            self._version += 1
            lease.held_at(self._version)
            self._question = event
            self._record(event, stored=True, request=True)
            return True
        if event is not None:
            self._question = event
            self._record(event, stored=False, request=True)
        return True

    def _question_event(
        self,
        memory: SessionMemory,
        question: UserMessage | ToolResponseMessage,
        snapshot: SessionSnapshot,
    ) -> SessionEvent | None:
        """The event the prompt's last user message (or trailing tool results) is stored as,
        or ``None`` when it is not stored: the message filter rejects it, or (tool results) the
        write guard says its tool call is not the newest stored event."""
        accepted = memory.message_filter.should_persist(question)
        if isinstance(question, ToolResponseMessage) and can_tell_newest(self._read_filter):
            told = newest_answers(reversed(snapshot.events), question)
            accepted = accepted if told is None else told
        if not accepted:
            return None
        event = self._event(memory, question, reply=False)
        check_event_text(event)
        return event

    def _event(
        self,
        memory: SessionMemory,
        message: Message,
        *,
        reply: bool,
        metadata: Mapping[str, JsonValue] | None = None,
    ) -> SessionEvent:
        """A new event of the turn; its id fixed by the request id, or the client's generator,
        else random."""
        ctx = self.ctx
        if ctx.request_id is not None:
            event_id = request_event_id(self._session_id, ctx.request_id, message, reply=reply)
        elif memory.event_ids is not None:
            event_id = memory.event_ids.generate(ctx.context, message)
        else:
            event_id = str(uuid.uuid4())
        return SessionEvent(
            id=event_id,
            session_id=self._session_id,
            message=message,
            metadata=dict(metadata or {}),
        )

    def _record(self, event: SessionEvent, *, stored: bool, request: bool) -> None:
        self._turn.append(event)
        self._sent.add(event.id)
        if stored:
            self._stored.add(event.id)
        (self._request_ids if request else self._response_ids).append(event.id)

    async def _history_before(self, memory: SessionMemory) -> None:
        """The window the history comes from (before the question of a turn taken over), and
        the latest stored system message when a window may have left it out."""
        events: Sequence[SessionEvent] = self._events
        if self._taken_over and self._question is not None:
            ids = [e.id for e in events]
            events = events[: ids.index(self._question.id)]
        self._history = events
        self._latest = latest_system(events)
        if (
            self._latest is None
            and self._read_filter.has_window  # the window may have left it out
            and memory.service.allow_system_messages
        ):
            found = await memory.service.get_events(self._session_id, LATEST_SYSTEM_FILTER)
            self._system = found[-1] if found else None

    def _first_prompt(self, memory: SessionMemory | None) -> list[Message]:
        """The first request's messages: system messages first, the history once, the prompt."""
        prompt = list(self.request.messages)
        if memory is None:
            return prompt
        events = self._history
        conversation: list[Message] = []
        for event in events:
            message = event.message
            if message is not None and not isinstance(message, SystemMessage):
                conversation.append(message)
                self._sent.add(event.id)
        prompt_rest = [m for m in prompt if not isinstance(m, SystemMessage)]
        history, dropped = guard_history(conversation, prompt_rest)
        if dropped:
            logger.warning(_ORPHAN_WARNING, self._session_id, dropped)
        systems = history_system_messages(events, self._latest, self._system)
        if len(prompt_rest) >= len(history) and contains_run(prompt_rest, history):
            history = []  # the prompt holds the history already (a caller that sends it)
        return system_first([*systems, *history, *prompt])

    async def _store_round(
        self,
        response: ChatResponse,
        results: ToolResponseMessage,
        compacted: bool,
        direct: bool,
    ) -> SessionEvent | None:
        """Store a round: its tool call and results (the results exactly when the call is
        stored), as one commit carrying the lease, or kept for the last commit. Return-direct
        results wait for the last commit, marked so a retry knows the turn is complete."""
        memory = self.memory
        if memory is None or not memory.message_filter.should_persist(response.message):
            if memory is not None and memory.message_filter.should_persist(results):
                logger.warning(
                    "Session %r: not storing the result of tool call(s) %s although the "
                    "MessageFilter accepts it, because the tool call was not stored",
                    self._session_id,
                    [r.id for r in results.responses],
                )
            return None
        if not memory.message_filter.should_persist(results):
            logger.warning(
                "Session %r: storing the result of tool call(s) %s although the MessageFilter "
                "rejects it, because the tool call is stored",
                self._session_id,
                [r.id for r in results.responses],
            )
        call = self._event(memory, response.message, reply=False, metadata=_usage(response))
        answered = self._event(
            memory,
            results,
            reply=direct,
            metadata={RETURNED_METADATA_KEY: True} if direct else None,
        )
        check_event_text(answered)
        if compacted:
            self._summary, self._covered = call.id, set(self._sent)
        if direct or memory.store_question == "with_reply":
            self._record(call, stored=False, request=False)
            self._record(answered, stored=False, request=True)
            return call
        lease = self._lease
        assert lease is not None
        await self._commit([call, answered], lease.lease())
        self._record(call, stored=True, request=False)
        self._record(answered, stored=True, request=True)
        lease.held_at(self._version)
        return call

    async def _store_reply(self, memory: SessionMemory, final: ChatResponse) -> None:
        """Step 6: the turn's last commit (no lease: it ends the lease)."""
        if final.tool_results is None and memory.message_filter.should_persist(final.message):
            reply = self._event(memory, final.message, reply=True, metadata=_usage(final))
            check_event_text(reply)
            if compacted_during(final.message):
                self._summary = reply.id
            self._record(reply, stored=False, request=False)
        pending: list[SessionEvent] = []
        for event in self._turn:
            if event.id not in self._stored:
                pending.append(event)
        if self._summary is not None and await commit_compacted(
            memory.service,
            self._session_id,
            self._turn,
            self._stored,
            self._summary,
            self._covered,
            self._known_view(),
        ):
            pass
        elif pending:
            await self._commit(pending, None)
        elif self._lease is not None and self._lease.version is not None:
            await self._lease.release()  # nothing to store: let the next turn in at once
        for event in pending:
            self._stored.add(event.id)
        if self._lease is not None:
            if self._replaying:  # a commit of replays changes nothing, the lease included
                await self._lease.release()
            await self._lease.ended()

    def _known_view(self) -> tuple[Sequence[SessionEvent], int] | None:
        """The active view at the version the turn knows (its read and its own commits), or
        ``None`` when its read was a window of it."""
        stored = [e for e in self._turn if e.id in self._stored]
        view = known_active_view(self._read_filter, self._events, stored)
        return None if view is None else (view, self._version)

    async def _commit(self, events: list[SessionEvent], lease: Lease | None) -> None:
        """Append ``events`` as one commit at the version the turn knows. When that
        compare-and-swap is lost (a writer that ignores leases, or a lease taken over after
        it expired), they are appended after whatever came in between, still together."""
        memory = self.memory
        assert memory is not None
        service = memory.service
        if await shielded(
            service.append_events(self._session_id, events, self._version, lease=lease)
        ):
            self._version += 1
            return
        logger.warning(
            "Session %r changed while its turn ran; the turn's messages are stored after the "
            "other writes",
            self._session_id,
        )
        await shielded(service.append_events(self._session_id, events, lease=lease))
        self._version = await service.get_event_version(self._session_id)

    def _finished(self, response: ChatResponse) -> ChatResponse:
        return dataclasses.replace(
            response,
            context=dict(self.ctx.context),
            request_event_ids=tuple(self._request_ids),
            response_event_ids=tuple(self._response_ids),
        )


_ROUNDS = IdempotentSessionEventIdGenerator("session", "request")
"""The ids of a request's tool rounds: their tool-call ids, under the session and request."""


def request_event_id(session_id: str, request_id: str, message: Message, *, reply: bool) -> str:
    """The id of an event a call with a request id stores. The question (a user message) and
    the event that ends the turn (``reply=True``: the reply, or the results of return-direct
    tools) get one id each, whatever they hold; a tool call or its results get the id of their
    tool-call ids, so a round is stored once per request."""
    if reply or isinstance(message, UserMessage):
        kind = "reply" if reply else message.message_type.value
        text = f"{len(session_id)}:{session_id}:{request_id}:{kind}"
        return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()}"
    return _ROUNDS.generate({"session": session_id, "request": request_id}, message)


class _TurnStream(ChunkStream):
    """A turn's chunks: the steps run as they are iterated; closing it early abandons the turn
    (its model stream is closed, its lease released, no reply stored)."""

    __slots__ = ("_steps", "_turn")

    def __init__(self, turn: Turn) -> None:
        super().__init__()
        self._turn = turn
        self._steps = turn._steps(streaming=True)  # pyright: ignore[reportPrivateUsage]

    async def __anext__(self) -> ChatChunk:
        return await self._steps.__anext__()

    def _produced(self) -> ChatResponse | None:
        return self._turn.final

    async def aclose(self) -> None:
        await self._steps.aclose()


def _usage(response: ChatResponse) -> dict[str, JsonValue] | None:
    usage = response.usage
    if usage is None:
        return None
    return {
        USAGE_METADATA_KEY: {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
        }
    }


def _seconds_left(lease: Lease) -> float:
    return max(1.0, (lease.expires_at - utc_now()).total_seconds())


async def _run_tools(calls: Sequence[ToolCall], tools: Mapping[str, Tool]) -> ToolResponseMessage:
    """Run the calls, concurrently when there are several; results in call order."""
    if len(calls) == 1:
        results = [await _run_one(calls[0], tools)]
    else:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_run_one(call, tools)) for call in calls]
        results = [task.result() for task in tasks]
    return ToolResponseMessage(
        responses=tuple(
            ToolResponse(id=call.id, name=call.name, data=result)
            for call, result in zip(calls, results, strict=True)
        )
    )


async def _run_one(call: ToolCall, tools: Mapping[str, Tool]) -> str:
    """One call's result; a failure becomes an error text for the model, never an exception."""
    found = tools.get(call.name)
    if found is None:
        known = ", ".join(sorted(tools)) or "none"
        return f"Error: there is no tool named {call.name!r} (available: {known})"
    try:
        with tool_span(call.name, call.id):  # the error, if any, is on the span too
            return await found.invoke(call.arguments)
    except Exception as exc:
        logger.warning("Tool %r failed on call %r", call.name, call.id, exc_info=True)
        return f"Error: tool {call.name!r} failed: {type(exc).__name__}: {exc}"
