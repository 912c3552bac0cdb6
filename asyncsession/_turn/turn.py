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

import dataclasses
import logging
import uuid
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing

from pydantic import JsonValue

from .._shield import shielded
from .._text import check_event_text
from ..chat import (
    APPROVAL_REQUIRED,
    RETURN_DIRECT,
    Advisor,
    CallContext,
    ChatChunk,
    ChatRequest,
    ChatResponse,
    ChunkStream,
    Usage,
)
from ..events import CreateSessionRequest, SessionEvent
from ..exceptions import (
    AccessDenied,
    RequestIdReused,
    SessionExists,
    ToolLoopLimitExceeded,
    TurnInProgress,
    UsageError,
)
from ..messages import (
    AssistantMessage,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponseMessage,
    UserMessage,
)
from ..repository import Lease, SessionSnapshot
from ..tools import Tool
from .calls import (
    Decisions,
    cut_results,
    needing_approval,
    newest_pause,
    not_run,
    reader_for,
    run_tools,
    still_waiting,
    stored_reply,
    went_on,
)
from .chain import StepStream, run_call, start_stream
from .compaction import commit_compacted, compact_after_turn, known_active_view
from .log import (
    ACTIVE_VIEW,
    APPROVAL_METADATA_KEY,
    LATEST_SYSTEM_FILTER,
    ORPHAN_WARNING,
    READ_TOOL_OUTPUT,
    RETURNED_METADATA_KEY,
    LeaseHolder,
    SessionMemory,
    Waiting,
    can_tell_newest,
    compacted_during,
    contains_run,
    guard_history,
    history_system_messages,
    interrupted_calls,
    last_request_message,
    latest_system,
    newest_answers,
    noted_preview,
    refuse_unknown_results,
    request_event_id,
    same_content,
    seconds_left,
    system_first,
    unanswered,
    usage_metadata,
)

__all__ = ["Turn"]

logger = logging.getLogger("asyncsession.turn")

Complete = Callable[[CallContext, ChatRequest], Awaitable[ChatResponse]]
"""One model request on the call path."""
OpenStream = Callable[[CallContext, ChatRequest], ChunkStream]
"""One model request on the stream path."""


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
        decisions: Decisions | None = None,
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
        self._decisions = decisions  # a resume: the decisions on the paused calls
        self._pause: SessionEvent | None = None  # the paused round a resume continues
        self._request_key = ctx.request_id  # what fixes the turn's event ids, if anything
        self._tail: list[SessionEvent] = []  # stored events of the turn after its question
        self._running_approved = False  # a resume is running the paused round's tools

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
        return StepStream(self._steps(streaming=True), lambda: self.final)

    # --- the steps -------------------------------------------------------------------------

    async def _steps(self, *, streaming: bool) -> AsyncGenerator[ChatChunk]:
        memory = self.memory
        if memory is not None:
            try:
                replayed = await self._open(memory)
            except BaseException:
                await self._abandon()
                raise
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
                waiting = await needing_approval(response.tool_calls, self.tools)
                if waiting:
                    # The turn stops: the round is its last commit, naming the waiting calls.
                    final = dataclasses.replace(
                        response,
                        usage=usage,
                        finish_reason=APPROVAL_REQUIRED,
                        pending_approvals=waiting,
                    )
                    if compacted:
                        self._covered = set(self._sent)
                    if streaming:
                        yield ChatChunk(
                            finish_reason=APPROVAL_REQUIRED,
                            pending_approvals=waiting,
                            id=response.id,
                            model=response.model,
                        )
                    break
                if round_number == self.max_rounds and not direct:
                    raise ToolLoopLimitExceeded(self.max_rounds)
                call_event = await self._store_call(response, compacted)
                results = await run_tools(response.tool_calls, self.tools)
                sent = await self._store_results(response, call_event, results, direct)
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
                prompt = [*prompt, response.message, sent]
                if call_event is not None:
                    self._sent.update(e.id for e in self._turn[-2:])
            assert final is not None
            if memory is not None:
                await self._store_reply(memory, final)
        except BaseException:
            await self._abandon()
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
            raise UsageError("No session id for a client with session memory")
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
            if self._decisions is not None:
                replayed = self._resumed(events)
                if replayed is not None:
                    return replayed
            elif request_id is not None and isinstance(question, UserMessage):
                replayed = self._replayed(events, question)
                if replayed is not None:
                    return replayed
            other = snapshot.lease
            if other is not None and not lease.mine(other) and other.is_live():
                waiting = waiting or Waiting(memory.wait)
                if not await waiting.pause():
                    raise TurnInProgress(session_id, request_id, seconds_left(other))
                continue
            self._version, self._events = snapshot.version, events
            if self._decisions is not None:
                if await self._continue_paused(memory, snapshot):
                    break
            elif await self._store_question(memory, question, snapshot):
                break
        await self._history_before(memory)
        return None

    def _resumed(self, events: Sequence[SessionEvent]) -> ChatResponse | None:
        """For ``resume``: the paused round it continues (the newest), and the stored reply
        when a resume of it completed already.

        Raises:
            UnknownToolCall: the session has no paused round, or its conversation went on.
        """
        decided = list(self._decisions or {})
        start = newest_pause(self._session_id, events, decided)
        pause = self._pause = events[start]
        self._request_key = f"resume:{pause.id}"
        assert pause.message is not None
        reply_id = request_event_id(self._session_id, self._request_key, pause.message, reply=True)
        replayed = self._replay(events, start + 1, reply_id)
        if replayed is None:
            went_on(self._session_id, events[start + 1 :], decided)
        return replayed

    async def _continue_paused(self, memory: SessionMemory, snapshot: SessionSnapshot) -> bool:
        """``resume``'s step 3: take the lease, then answer the paused round's calls still
        unanswered: a rejection with its reason, an approved call (and one that needed no
        approval) with its tool's result. ``False`` when another resume took the lease."""
        pause, lease = self._pause, self._lease
        assert pause is not None
        assert lease is not None
        events = snapshot.events
        after = events[events.index(pause) + 1 :]
        left, decisions = still_waiting(self._session_id, pause, after, self._decisions)
        # A lease on the paused commit is an earlier resume's: its tools may have started.
        started = snapshot.lease is not None and not lease.mine(snapshot.lease)
        if not await lease.acquire(snapshot.version):
            return False
        self._tail = list(after)
        if left:
            fixed = not_run(left, self.tools, decisions, started=started)
            self._running_approved = True  # from here the lease says the tools started
            self._tail.append(await self._answer(memory, left, fixed))
            self._running_approved = False
        self._events = tuple(events[: events.index(pause) + 1])
        return True

    async def _abandon(self) -> None:
        """The turn failed or was cancelled: end its lease so the next turn runs at once;
        while a resume runs approved tools, only stop renewing it, so that a resume after
        it expires knows they may have started."""
        if self._lease is None:
            return
        if self._running_approved:
            await self._lease.ended()
        else:
            await self._lease.release()

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
        stored = next((i for i, e in enumerate(events) if e.id == q_id), None)
        found = None if stored is None else events[stored].message
        if found is not None and not same_content(found, question):
            raise RequestIdReused(session_id, request_id)
        return self._replay(events, stored, reply_id)

    def _replay(
        self, events: Sequence[SessionEvent], start: int | None, reply_id: str
    ) -> ChatResponse | None:
        found = stored_reply(events, start, reply_id)
        if found is None:
            return None
        response, self._request_ids, self._response_ids = found
        return response

    async def _store_question(
        self,
        memory: SessionMemory,
        question: UserMessage | ToolResponseMessage | None,
        snapshot: SessionSnapshot,
    ) -> bool:
        """Step 3; ``False`` when a compare-and-swap or a lease race was lost (read again).

        Calls left without their results are answered first: as interrupted by a new turn
        (in the question's commit, or a commit of their own before the model call); by a
        turn that takes its request over, with their tool's result again when it is
        idempotent."""
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
            if self._taken_over:
                await self._take_over(memory, snapshot, event)
            return True
        repairs = interrupted_calls(self._session_id, self._read_filter, snapshot.events, question)
        if request_id is not None and not await lease.acquire(snapshot.version):
            return False  # another attempt took the session first: read again
        # With a request id the question's id is fixed, so an attempt racing this one would see
        # its append taken for a replay: the lease just taken decided the race instead.
        now = event is not None and memory.store_question == "first"
        batch = [*repairs, event] if event is not None and now else repairs
        if batch:
            held = now or lease.version is not None
            appended = await shielded(
                memory.service.append_events(
                    self._session_id,
                    batch,
                    snapshot.version,
                    lease=lease.lease() if held else None,
                )
            )
            if not appended:
                await lease.release()
                return False
            self._version += 1
            if held:
                lease.held_at(self._version)
            self._events = (*self._events, *repairs)
        if event is not None:
            self._question = event
            self._record(event, stored=now, request=True)
        return True

    async def _take_over(
        self, memory: SessionMemory, snapshot: SessionSnapshot, question: SessionEvent
    ) -> None:
        """Continue a request whose attempt died after storing its question: its stored
        rounds stay (a completed tool never runs again) and a round whose results are
        missing is answered: an idempotent tool runs again, any other is reported
        interrupted."""
        lease = self._lease
        assert lease is not None
        events = snapshot.events
        tail = list(events[[e.id for e in events].index(question.id) + 1 :])
        for event in tail:
            if event.message is not None:
                self._record(
                    event, stored=True, request=not isinstance(event.message, AssistantMessage)
                )
        for call_event, calls in unanswered(tail):
            answered = await self._answer(memory, calls, not_run(calls, self.tools, {}))
            tail.insert(tail.index(call_event) + 1, answered)
        self._tail = tail

    async def _answer(
        self, memory: SessionMemory, calls: Sequence[ToolCall], fixed: Mapping[str, str]
    ) -> SessionEvent:
        """Answer ``calls`` of a stored round: run them (those in ``fixed`` get that text),
        and commit their results with the lease."""
        results = await run_tools(calls, self.tools, fixed)
        event = self._event(memory, results, reply=False)
        check_event_text(event)
        await self._commit_held(event, request=True)
        return event

    def _question_event(
        self,
        memory: SessionMemory,
        question: UserMessage | ToolResponseMessage,
        snapshot: SessionSnapshot,
    ) -> SessionEvent | None:
        """The event the prompt's last user message (or trailing tool results) is stored as,
        or ``None`` when it is not stored: the message filter rejects it, or (tool results) the
        write guard says its tool call is not the newest stored event. Results answering no
        known call raise ``UnknownToolCall`` (`refuse_unknown_results`)."""
        refuse_unknown_results(
            self._session_id, self._read_filter, snapshot.events, self.request.messages, question
        )
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
        if self._request_key is not None:
            event_id = request_event_id(self._session_id, self._request_key, message, reply=reply)
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
        offloaded = False
        for event in events:
            message = event.message
            if message is not None and not isinstance(message, SystemMessage):
                noted = noted_preview(event)
                offloaded = offloaded or noted is not event
                conversation.append(noted.message)  # type: ignore[arg-type]  # a message still
                self._sent.add(event.id)
        if offloaded or any(noted_preview(e) is not e for e in self._tail):
            self._offer_reader()
        tail: list[Message] = []
        for event in self._tail:
            if event.message is not None:
                tail.append(noted_preview(event).message)  # type: ignore[arg-type]
                self._sent.add(event.id)
        prompt_rest = [m for m in prompt if not isinstance(m, SystemMessage)]
        history, dropped = guard_history(conversation, [*prompt_rest, *tail])
        if dropped:
            logger.warning(ORPHAN_WARNING, self._session_id, dropped)
        systems = history_system_messages(events, self._latest, self._system)
        if len(prompt_rest) >= len(history) and contains_run(prompt_rest, history):
            history = []  # the prompt holds the history already (a caller that sends it)
        return system_first([*systems, *history, *prompt, *tail])

    async def _store_call(self, response: ChatResponse, compacted: bool) -> SessionEvent | None:
        """Record a round's tool call before its tools run: a commit carrying the lease (with
        ``"with_reply"``, kept for the last commit). ``None`` when the call is not stored."""
        memory = self.memory
        if memory is None or not memory.message_filter.should_persist(response.message):
            return None
        call = self._event(memory, response.message, reply=False, metadata=usage_metadata(response))
        if compacted:
            self._summary, self._covered = call.id, set(self._sent)
        if memory.store_question == "with_reply":
            self._record(call, stored=False, request=False)
            return call
        await self._commit_held(call, request=False)
        return call

    async def _store_results(
        self,
        response: ChatResponse,
        call: SessionEvent | None,
        results: ToolResponseMessage,
        direct: bool,
    ) -> ToolResponseMessage:
        """Record a round's results once its tools ran (exactly when its call is stored): a
        commit carrying the lease, or kept for the last commit. Return-direct results wait for
        the last commit, marked so a retry knows the turn is complete. Returns the results as
        the model is sent them (long outputs cut, with a note on reading the rest)."""
        memory = self.memory
        if memory is None:
            return results
        if memory.message_filter.should_persist(results) != (call is not None):
            logger.warning(
                "Session %r: %s the result of tool call(s) %s although the MessageFilter "
                "%s it, because the tool call %s stored",
                self._session_id,
                *(
                    ("storing", [r.id for r in results.responses], "rejects", "is")
                    if call is not None
                    else ("not storing", [r.id for r in results.responses], "accepts", "was not")
                ),
            )
        if call is None:
            return results
        answered = self._event(
            memory,
            results,
            reply=direct,
            metadata={RETURNED_METADATA_KEY: True} if direct else None,
        )
        check_event_text(answered)
        if direct or call.id not in self._stored:
            self._record(answered, stored=False, request=True)
        else:
            await self._commit_held(answered, request=True)
        return self._for_model(answered)

    def _for_model(self, event: SessionEvent) -> ToolResponseMessage:
        """A stored result as the model is sent it: long outputs cut, with a note on reading
        the rest (the turn then offers the tool that reads it)."""
        limit = None if self.memory is None else self.memory.max_tool_output
        cut = None if event.id not in self._stored else cut_results(event, limit)
        if cut is None:
            assert isinstance(event.message, ToolResponseMessage)
            return event.message
        self._offer_reader()
        return cut

    def _offer_reader(self) -> None:
        """Offer ``read_tool_output`` on this turn's model calls (once)."""
        if self.memory is not None and READ_TOOL_OUTPUT not in self.tools:
            reader = reader_for(self.memory.service, self._session_id, self.memory.max_tool_output)
            self.tools = {**self.tools, READ_TOOL_OUTPUT: reader} if reader else self.tools

    async def _store_reply(self, memory: SessionMemory, final: ChatResponse) -> None:
        """Step 6: the turn's last commit (no lease: it ends the lease)."""
        if final.tool_results is None and memory.message_filter.should_persist(final.message):
            metadata = usage_metadata(final) or {}
            if final.pending_approvals:
                metadata[APPROVAL_METADATA_KEY] = [call.id for call in final.pending_approvals]
            reply = self._event(memory, final.message, reply=True, metadata=metadata)
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

    async def _commit_held(self, event: SessionEvent, *, request: bool) -> None:
        """Commit one event of the turn carrying its lease, which rides on that commit then."""
        lease = self._lease
        assert lease is not None
        await self._commit([event], lease.lease())
        self._record(event, stored=True, request=request)
        lease.held_at(self._version)

    def _finished(self, response: ChatResponse) -> ChatResponse:
        return dataclasses.replace(
            response,
            context=dict(self.ctx.context),
            request_event_ids=tuple(self._request_ids),
            response_event_ids=tuple(self._response_ids),
        )
