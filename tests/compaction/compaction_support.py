"""Doubles, log builders and the invariant checker shared by the compaction tests."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from hypothesis import strategies as st

from asyncsession import CreateSessionRequest, DefaultSessionService
from asyncsession._compaction_pass import compaction_commit, format_event
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TurnWindowCompactionStrategy,
)
from asyncsession.events import COMPACTION_SOURCE, SYNTHETIC, EventType, Session, SessionEvent
from asyncsession.filters import EventFilter
from asyncsession.messages import (
    AssistantMessage,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.testing._contract._support import SHADOW_PROMPT

SESSION = Session(id="s-compaction", user_id="alice")
SID = SESSION.id


class WordCountEstimator:
    """One token per whitespace-separated word: easy to reason about in worked examples."""

    def estimate(self, text: str) -> int:
        return len(text.split())


@dataclass
class ScriptedSummarizer:
    """A summarizer double: answers with scripted replies (or raises them) and records prompts."""

    replies: list[str | BaseException] = field(default_factory=list)
    default: str | None = None
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        self.calls.append((system_prompt, prompt))
        await asyncio.sleep(0)
        reply = self.replies.pop(0) if self.replies else self.default
        if reply is None:
            raise AssertionError(f"unexpected summarize() call #{len(self.calls)}")
        if isinstance(reply, BaseException):
            raise reply
        return reply

    @property
    def prompts(self) -> list[str]:
        return [prompt for _, prompt in self.calls]


class CountingSummarizer:
    """Answers every call with a numbered summary; never fails."""

    def __init__(self) -> None:
        self.count = 0

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        self.count += 1
        await asyncio.sleep(0)
        return f"summary {self.count}"


# --- building events --------------------------------------------------------------------------

_ids = itertools.count()


def _next_id(prefix: str) -> str:
    return f"{prefix[:40]}-{next(_ids)}"


def u(text: str, sid: str = SID) -> SessionEvent:
    return SessionEvent(id=_next_id(text), session_id=sid, message=UserMessage(text=text))


def a(text: str, sid: str = SID) -> SessionEvent:
    return SessionEvent(id=_next_id(text), session_id=sid, message=AssistantMessage(text=text))


def s(text: str, sid: str = SID) -> SessionEvent:
    return SessionEvent(id=_next_id(text), session_id=sid, message=SystemMessage(text=text))


def calls(label: str, *call_ids: str, sid: str = SID) -> SessionEvent:
    """An assistant message asking for tool calls with these ids."""
    message = AssistantMessage(
        text=None, tool_calls=tuple(ToolCall(id=c, name="lookup", arguments="{}") for c in call_ids)
    )
    return SessionEvent(id=_next_id(label), session_id=sid, message=message)


def results(label: str, *call_ids: str, sid: str = SID) -> SessionEvent:
    """One tool message answering these call ids."""
    message = ToolResponseMessage(
        responses=tuple(ToolResponse(id=c, name="lookup", data=f"result {c}") for c in call_ids)
    )
    return SessionEvent(id=_next_id(label), session_id=sid, message=message)


def custom(label: str, sid: str = SID) -> SessionEvent:
    return SessionEvent(
        id=_next_id(label), session_id=sid, type=EventType.of("ACME.AUDIT"), payload={"l": label}
    )


def summary_pair(text: str, sid: str = SID) -> list[SessionEvent]:
    metadata = {SYNTHETIC: True, COMPACTION_SOURCE: "recursive-summarization"}
    return [
        SessionEvent(
            id=_next_id("shadow"),
            session_id=sid,
            message=UserMessage(text=SHADOW_PROMPT),
            metadata=dict(metadata),
        ),
        SessionEvent(
            id=_next_id("summary"),
            session_id=sid,
            message=AssistantMessage(text=text),
            metadata=dict(metadata),
        ),
    ]


def legacy_summary(text: str, sid: str = SID) -> SessionEvent:
    return SessionEvent(
        id=_next_id("legacy"),
        session_id=sid,
        message=SystemMessage(text=text),
        metadata={SYNTHETIC: True},
    )


def lbl(event: SessionEvent) -> str:
    """A short label: the text, ``Σ?``/``Σ:<text>`` for synthetic events, the type otherwise."""
    if event.type == EventType.COMPACTION:
        return "COMPACTION"
    if event.is_synthetic:
        return "Σ?" if event.type == EventType.USER else f"Σ:{event.text}"
    if event.message is None:
        return f"custom:{(event.payload or {}).get('l')}"
    if event.type == EventType.TOOL:
        return "tool"
    if event.has_tool_calls:
        return "calls"
    return str(event.text)


def lbls(events: Iterable[SessionEvent]) -> list[str]:
    return [lbl(e) for e in events]


def request(events: Sequence[SessionEvent]) -> CompactionRequest:
    return CompactionRequest.of(SESSION, events)


# --- random logs --------------------------------------------------------------------------------


@st.composite
def logs(draw: st.DrawFn, *, custom_events: bool = True) -> list[SessionEvent]:
    """A random active log: turns with text replies, single and parallel tool rounds (results in
    one message or several), stored system messages, summary pairs, legacy summaries, custom
    events, an optional assistant preamble, and possibly a newest turn still waiting for results.
    """
    events: list[SessionEvent] = []
    counter = itertools.count()

    def word() -> str:
        return draw(st.sampled_from(["alpha", "beta", "gamma delta", "a much longer reply here"]))

    def extras() -> None:
        if draw(st.integers(0, 9)) == 0:
            events.append(s(f"sys-{next(counter)}"))
        if custom_events and draw(st.integers(0, 9)) == 0:
            events.append(custom(f"c{next(counter)}"))

    if draw(st.booleans()) and draw(st.booleans()):
        events.append(a(f"greeting {word()}"))
    turns = draw(st.integers(0, 9))
    for turn in range(turns):
        extras()
        if draw(st.integers(0, 7)) == 0:
            events.extend(summary_pair(f"old summary {next(counter)}"))
        if draw(st.integers(0, 19)) == 0:
            events.append(legacy_summary(f"legacy {next(counter)}"))
        events.append(u(f"u{turn} {word()}"))
        extras()
        last_turn = turn == turns - 1
        for step in range(draw(st.integers(0, 3))):
            if draw(st.booleans()):
                ids = [f"call-{next(_ids)}" for _ in range(draw(st.integers(1, 3)))]
                events.append(calls(f"calls{turn}", *ids))
                if last_turn and draw(st.integers(0, 5)) == 0:
                    return events  # the newest turn waits for its tool results
                if len(ids) > 1 and draw(st.booleans()):
                    events.extend(results(f"tool{turn}", i) for i in ids)
                else:
                    events.append(results(f"tool{turn}", *ids))
            else:
                events.append(a(f"a{turn}.{step} {word()}"))
            extras()
    return events


def strategies_for_properties(summarizer: object) -> st.SearchStrategy[object]:
    """Every strategy with random (valid) limits."""
    return st.one_of(
        st.builds(SlidingWindowCompactionStrategy, st.integers(1, 12)),
        st.builds(TurnWindowCompactionStrategy, st.integers(1, 5)),
        st.builds(
            TokenCountCompactionStrategy,
            st.integers(1, 120),
            estimator=st.just(WordCountEstimator()),
        ),
        st.integers(1, 12).flatmap(
            lambda keep: st.builds(
                RecursiveSummarizationCompactionStrategy,
                st.just(summarizer),
                max_events_to_keep=st.just(keep),
                overlap_size=st.integers(0, keep - 1),
            )
        ),
    )


# --- invariants ---------------------------------------------------------------------------------


def _call_ids(event: SessionEvent) -> set[str]:
    if isinstance(event.message, AssistantMessage):
        return {c.id for c in event.message.tool_calls}
    return set()


def _answered_ids(event: SessionEvent) -> set[str]:
    if isinstance(event.message, ToolResponseMessage):
        return {r.id for r in event.message.responses}
    return set()


def unanswered_calls(events: Sequence[SessionEvent]) -> set[str]:
    """Tool call ids in ``events`` without a result among them."""
    asked = set().union(*map(_call_ids, events)) if events else set()
    answered = set().union(*map(_answered_ids, events)) if events else set()
    return asked - answered


def active_view(log: Sequence[SessionEvent]) -> list[SessionEvent]:
    """What the model would see: message events that are not archived."""
    return [e for e in log if e.is_message and not e.archived]


def is_stored_system(event: SessionEvent) -> bool:
    return event.type == EventType.SYSTEM and not event.is_synthetic


def is_real(event: SessionEvent) -> bool:
    return event.is_message and not event.is_synthetic and event.type != EventType.SYSTEM


def check_invariants(
    strategy: object,
    events: Sequence[SessionEvent],
    result: CompactionResult,
    *,
    estimator: Callable[[str], int] | None = None,
) -> list[SessionEvent]:
    """Assert every compaction rule for ``result`` over ``events``; return the log after it."""
    ids = [e.id for e in events]
    by_id = {e.id: e for e in events}
    kept_existing = [e.id for e in result.compacted_events if e.id in by_id]
    new_events = [e for e in result.compacted_events if e.id not in by_id]
    archived = {e.id for e in result.archived_events} | (set(ids) - set(kept_existing))

    # Never reordered, nothing kept twice, and what is kept and archived covers the log.
    assert kept_existing == [i for i in ids if i in set(kept_existing)]
    assert len(set(kept_existing)) == len(kept_existing)
    assert not set(kept_existing) & {e.id for e in result.archived_events}
    assert [e.id for e in result.archived_events] == [
        i for i in ids if i in {e.id for e in result.archived_events}
    ]

    # Custom events are untouched; the latest stored system message stays, older ones go.
    assert all(e.id in kept_existing for e in events if not e.is_message)
    stored_system = [e for e in events if e.is_message and is_stored_system(e)]
    if stored_system:
        assert stored_system[-1].id in kept_existing
        assert all(e.id in archived for e in stored_system[:-1])

    # Kept real events are a suffix starting at a turn start (TurnWindow keeps its preamble).
    real = [e for e in events if is_real(e)]
    kept_real = [e for e in real if e.id in set(kept_existing)]
    starts = [index for index, e in enumerate(real) if e.is_turn_start]
    preamble = real[: starts[0]] if starts else []
    if isinstance(strategy, TurnWindowCompactionStrategy) and kept_real[: len(preamble)] == (
        preamble
    ):
        rest = kept_real[len(preamble) :]
        body = real[len(preamble) :]
    else:
        rest, body = kept_real, real
    assert rest == body[len(body) - len(rest) :]
    if rest and rest != body:
        assert rest[0].is_turn_start
    if starts:  # the newest turn is never archived
        assert all(e.id in kept_existing for e in real[starts[-1] :])
    elif real:
        assert kept_real == real

    # A tool call and its results share their fate.
    for event in real:
        for call_id in _call_ids(event):
            answers = [r for r in real if call_id in _answered_ids(r)]
            assert all((r.id in archived) == (event.id in archived) for r in answers)

    # Summaries: kept where they are, or folded into exactly one new summary turn.
    synthetic = [e for e in events if e.is_message and e.is_synthetic]
    if new_events:
        assert isinstance(strategy, RecursiveSummarizationCompactionStrategy)
        assert len(new_events) == 2
        shadow, summary = new_events
        assert shadow.is_synthetic
        assert shadow.type == EventType.USER
        assert summary.is_synthetic
        assert summary.type == EventType.ASSISTANT
        assert shadow.timestamp == summary.timestamp
        assert shadow.metadata[COMPACTION_SOURCE] == "recursive-summarization"
        assert all(e.id in archived for e in synthetic)
        compacted = list(result.compacted_events)
        position = compacted.index(shadow)
        assert compacted[position + 1] is summary
        assert compacted[position + 2].id == kept_real[0].id
        assert any(e.id in archived for e in real)
    else:
        assert all(e.id in kept_existing for e in synthetic)

    # Limits (whole turns; the newest turn may be over the limit on its own).
    newest_turn = real[starts[-1] :] if starts else real
    if isinstance(strategy, SlidingWindowCompactionStrategy) and len(rest) < len(body):
        assert len(kept_real) <= strategy.max_events or kept_real == newest_turn
    if isinstance(strategy, RecursiveSummarizationCompactionStrategy) and new_events:
        assert len(kept_real) <= strategy.max_events_to_keep or kept_real == newest_turn
    if isinstance(strategy, TurnWindowCompactionStrategy):
        assert sum(e.is_turn_start for e in kept_real) == min(len(starts), strategy.max_turns)
    if isinstance(strategy, TokenCountCompactionStrategy) and len(rest) < len(body):
        assert estimator is not None
        kept_budget = [
            e
            for e in result.compacted_events
            if e.is_message and not (is_stored_system(e) and e.id != stored_system[-1].id)
        ]
        tokens = sum(estimator(format_event(e)) for e in kept_budget)
        assert tokens <= strategy.max_tokens or kept_real == newest_turn

    # Append it as one commit: nothing deleted or moved, only the new events are written; read
    # back, what left the view reads archived and the view is the result's, in its order.
    commit = compaction_commit(SID, events, result, "trigger", strategy) or []
    after = EventFilter.all().apply([*events, *commit])
    assert [e.id for e in after if e.id in by_id] == ids
    assert {e.id for e in after if e.archived} == {i for i in archived if by_id[i].is_message}
    assert [e.id for e in commit[:-1]] == [e.id for e in new_events]
    view = EventFilter.active().apply([*events, *commit])
    if commit:
        assert [e.id for e in view] == [
            e.id for e in result.compacted_events if e.is_message and not e.archived
        ]

    # The active view opens with a turn (or what was already first), never with a tool result,
    # and holds no tool call without its result unless the input's newest turn was waiting.
    opening = [e for e in view if is_real(e)]
    if opening:
        assert opening[0].type != EventType.TOOL or opening[0] == real[0]
        assert (
            opening[0].is_turn_start
            or opening[0].id in {e.id for e in preamble}
            or (opening[0].id == real[0].id)
        )
    assert unanswered_calls(view) <= unanswered_calls(events)
    return after


# --- concurrency helpers ----------------------------------------------------------------------


class GatedStrategy:
    """A sliding-window strategy that waits for a per-session gate before answering.

    It records which sessions started, finished or were cancelled, and the highest number of
    compactions it saw running at once. ``wait_started(n)`` waits for the n-th start.
    """

    def __init__(self, *, fail_for: Iterable[str] = (), keep: int = 1) -> None:
        self.fail_for = set(fail_for)
        self.inner = SlidingWindowCompactionStrategy(keep)
        self.gates: dict[str, asyncio.Event] = {}
        self.all_open = False
        self.started: list[str] = []
        self.finished: list[str] = []
        self.cancelled: list[str] = []
        self.current = 0
        self.max_seen = 0
        self._changed = asyncio.Condition()

    def gate(self, session_id: str) -> asyncio.Event:
        if session_id not in self.gates:
            self.gates[session_id] = asyncio.Event()
            if self.all_open:
                self.gates[session_id].set()
        return self.gates[session_id]

    def open(self, session_id: str | None = None) -> None:
        """Let one session's compactions (or all of them, now and later) through."""
        if session_id is not None:
            self.gate(session_id).set()
            return
        self.all_open = True
        for event in self.gates.values():
            event.set()

    async def wait_started(self, count: int) -> None:
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.started) >= count)

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        session_id = request.session.id
        self.current += 1
        self.max_seen = max(self.max_seen, self.current)
        self.started.append(session_id)
        async with self._changed:
            self._changed.notify_all()
        try:
            await self.gate(session_id).wait()
            if session_id in self.fail_for:
                raise RuntimeError(f"strategy failed for {session_id}")
            result = await self.inner.compact(request)
            self.finished.append(session_id)
            return result
        except asyncio.CancelledError:
            self.cancelled.append(session_id)
            raise
        finally:
            self.current -= 1


async def let_the_loop_run(rounds: int = 50) -> None:
    """Give every ready task many turns of the event loop (no wall-clock waiting).

    Used only to show that something does *not* happen while a task is blocked on an event the
    test controls: asyncio runs ready callbacks in order, so this is deterministic.
    """
    for _ in range(rounds):
        await asyncio.sleep(0)


async def conversation(
    service: DefaultSessionService, turns: int, *, preamble: bool = False
) -> str:
    """A new session: the stored system prompt, an optional assistant preamble, then turns."""
    session = await service.create(CreateSessionRequest(user_id="alice"))
    await service.append_message(session.id, SystemMessage(text="You are a support agent."))
    if preamble:
        await service.append_message(session.id, AssistantMessage(text="Hello, how can I help?"))
    for n in range(turns):
        await service.append_message(session.id, UserMessage(text=f"question {n}"))
        await service.append_message(session.id, AssistantMessage(text=f"answer {n}"))
    return session.id
