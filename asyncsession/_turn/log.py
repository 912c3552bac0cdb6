"""What a turn does with its session's log besides storing its own messages: the prompt it
builds from the window, the lease it holds, and compaction.

**The prompt.** Pure functions: the history is prepended once (a prompt that already holds it
is sent as it is), system messages go first, tool calls whose results were left out of the
window (or results whose calls were) are dropped from the prompt, never from the log.

**The lease.** A lease says "this attempt is working on the session until ``expires_at``":
another turn that reads the session while it is live waits (`Waiting`), up to a bound, and then
gets `TurnInProgress`. The lease rides on a commit of the turn (its question, each tool round),
so taking it costs no command of its own when the turn has no request id (a turn that commits
nothing before the model call, the question stored with the reply, goes without one). A turn
with a request id takes it with one ``acquire_lease`` before its first commit: its question's
id is fixed by the request id, so a racing attempt of the same request would take the append
of that id for a replay, and the lease is what decides which attempt calls the model. While
the turn works the lease is renewed every third of its length, so a holder that dies stops
blocking within one length, however long its turns take. The turn's last commit carries no
lease, which ends it; a turn that fails releases it. The lease is "please wait", not the
arbiter: the version compare-and-swap of every commit is what keeps the log right when two
turns race anyway.

**Server compaction.** With ``context_management`` on the Responses API the server may compact
a request's context while it answers: the reply's output then starts with a ``compaction`` item
standing for every input item the request sent. The turn stores that as a compaction of the
session, in its last commit: the turn's events, then a ``COMPACTION`` boundary whose view is the
compacted reply and what follows it in the turn, then every active event the request did not
send (a message another caller stored meanwhile stays in the view, and is sent next time). The
boundary covers exactly what the request sent. The commit is appended at the version the turn
knows when it read the whole active view (no command more than a plain reply), else at the
version of a read of it; a lost compare-and-swap is read again and retried, and after the last
attempt the turn's events are appended plainly, nothing covered, so nothing is lost or
half-written.

**After the turn.** Once the final reply asks for no tools, the turn compacts inline with
``(trigger, strategy)`` or hands the session to a background compactor; a failure is logged and
the call still succeeds.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import uuid
from collections.abc import Collection, Iterable, Sequence
from datetime import timedelta
from typing import Final

from .._compaction_pass import CompactionQueue, compaction_commit, should_compact
from .._shield import shielded
from ..compaction_protocols import (
    CompactionRequest,
    CompactionResult,
    CompactionStrategy,
    TriggerLike,
)
from ..events import EventType, Session, SessionEvent, utc_now
from ..filters import EventFilter
from ..messages import (
    AssistantMessage,
    Message,
    MessageType,
    SystemMessage,
    ToolResponseMessage,
    UserMessage,
)
from ..repository import Lease
from ..service import SessionService

__all__ = [
    "ACTIVE_VIEW",
    "LATEST_SYSTEM_FILTER",
    "SERVER_COMPACTION_STRATEGY",
    "SERVER_COMPACTION_TRIGGER",
    "Compaction",
    "ORPHAN_WARNING",
    "LeaseHolder",
    "Waiting",
    "can_tell_newest",
    "commit_compacted",
    "compact_after_turn",
    "compacted_during",
    "contains_run",
    "guard_history",
    "history_system_messages",
    "known_active_view",
    "last_request_message",
    "latest_system",
    "newest_answers",
    "same_content",
    "seconds_left",
    "system_first",
]

logger = logging.getLogger("asyncsession.turn")

# --- the prompt ------------------------------------------------------------------------------

ORPHAN_WARNING: Final = (
    "Session %r: dropped %d tool call/result message(s) without their counterpart from the "
    "prompt (the log is unchanged). Likely causes: an EventFilter with message_types hiding "
    "TOOL events, a MessageFilter that skipped them, or a turn interrupted between a tool "
    "call and its result."
)


LATEST_SYSTEM_FILTER = EventFilter(
    message_types=[MessageType.SYSTEM],
    exclude_synthetic=True,
    exclude_archived=True,
    active_view=True,
    last_n=1,
)
"""The separate lookup of the latest stored system message, for windowed reads."""


def _content_key(message: Message) -> tuple[object, ...]:
    if isinstance(message, UserMessage):
        return ("user", message.text)
    if isinstance(message, SystemMessage):
        return ("system", message.text)
    if isinstance(message, AssistantMessage):
        calls = tuple((c.id, c.name, c.arguments) for c in message.tool_calls)
        return ("assistant", message.text or "", calls)
    return ("tool", tuple((r.id, r.data) for r in message.responses))


def same_content(a: Message, b: Message) -> bool:
    """Equal by content: type, text, tool calls, tool responses (media when both have it).

    Content, not equality: a store that keeps no message metadata still compares equal.
    """
    if _content_key(a) != _content_key(b):
        return False
    a_parts = None if isinstance(a, ToolResponseMessage) else a.parts
    b_parts = None if isinstance(b, ToolResponseMessage) else b.parts
    return a_parts is None or b_parts is None or a_parts == b_parts


def contains_run(haystack: Sequence[Message], needle: Sequence[Message]) -> bool:
    """Whether ``needle`` appears as a contiguous run in ``haystack`` (an empty one always)."""
    if not needle:
        return True
    width = len(needle)
    for start in range(len(haystack) - width + 1):
        if all(same_content(haystack[start + i], needle[i]) for i in range(width)):
            return True
    return False


def guard_history(
    history: Sequence[Message], prompt: Sequence[Message]
) -> tuple[list[Message], int]:
    """The read guard: ``history`` without orphaned tool calls and results, and how many went.

    An assistant tool call stays only if every call id is answered by the tool messages that
    directly follow it (in the history, then at the start of ``prompt``, as in round 2 of a
    tool loop); a partially answered parallel call goes with its answers. A tool message
    stays only if the nearest message before it that is not a tool message is a kept tool call
    whose ids cover its responses. ``prompt`` itself is never changed.
    """
    combined = [*history, *prompt]
    keep = [True] * len(history)
    for index, message in enumerate(history):
        if isinstance(message, AssistantMessage) and message.tool_calls:
            answered: set[str] = set()
            following = index + 1
            while following < len(combined) and isinstance(
                combined[following], ToolResponseMessage
            ):
                answered |= _response_ids(combined[following])
                following += 1
            keep[index] = {call.id for call in message.tool_calls} <= answered
        elif isinstance(message, ToolResponseMessage):
            before = index - 1
            while before >= 0 and isinstance(history[before], ToolResponseMessage):
                before -= 1
            owner = history[before] if before >= 0 else None
            keep[index] = (
                isinstance(owner, AssistantMessage)
                and keep[before]
                and _response_ids(message) <= {call.id for call in owner.tool_calls}
            )
    if all(keep):
        return list(history), 0
    kept = [message for message, ok in zip(history, keep, strict=True) if ok]
    return kept, len(history) - len(kept)


def _response_ids(message: Message) -> set[str]:
    if isinstance(message, ToolResponseMessage):
        return {response.id for response in message.responses}
    return set()


def system_first(messages: Iterable[Message]) -> list[Message]:
    """System messages first in their order, an exact-text repeat dropped; texts untouched."""
    systems: list[Message] = []
    rest: list[Message] = []
    seen: set[str] = set()
    for message in messages:
        if isinstance(message, SystemMessage):
            if message.text not in seen:
                seen.add(message.text)
                systems.append(message)
        else:
            rest.append(message)
    return [*systems, *rest]


def history_system_messages(
    events: Sequence[SessionEvent], latest: SessionEvent | None, looked_up: SessionEvent | None
) -> list[Message]:
    """Stored system messages for the prompt: the latest real one (``latest`` among
    ``events``, else ``looked_up`` outside the window), plus synthetic ones."""
    result: list[Message] = []
    if latest is None and looked_up is not None and looked_up.message is not None:
        result.append(looked_up.message)
    for event in events:
        if isinstance(event.message, SystemMessage) and (event.is_synthetic or event is latest):
            result.append(event.message)
    return result


def latest_system(events: Sequence[SessionEvent]) -> SessionEvent | None:
    """The latest real (not synthetic) system message event among ``events``."""
    for event in reversed(events):
        if isinstance(event.message, SystemMessage) and not event.is_synthetic:
            return event
    return None


def last_request_message(
    prompt: Sequence[Message],
) -> UserMessage | ToolResponseMessage | None:
    """The prompt's last user message or trailing tool results (a run merged into one)."""
    for index in range(len(prompt) - 1, -1, -1):
        message = prompt[index]
        if isinstance(message, UserMessage):
            return message
        if isinstance(message, ToolResponseMessage):
            run = [message]
            before = index - 1
            while before >= 0 and isinstance(prompt[before], ToolResponseMessage):
                run.insert(0, prompt[before])  # type: ignore[arg-type]  # checked just above
                before -= 1
            if len(run) == 1:
                return message
            return ToolResponseMessage(
                responses=tuple(r for m in run for r in m.responses), extra=message.extra
            )
    return None


def can_tell_newest(read_filter: EventFilter) -> bool:
    """Whether the events of this read show the newest stored tool call, if there is one."""
    assistant_visible = (
        read_filter.message_types is None or MessageType.ASSISTANT in read_filter.message_types
    ) and (read_filter.event_types is None or EventType.ASSISTANT in read_filter.event_types)
    return (
        assistant_visible
        and read_filter.page_size is None
        and read_filter.from_ is None
        and read_filter.to is None
        and not read_filter.has_text_criteria
    )


def newest_answers(events: Iterable[SessionEvent], result: ToolResponseMessage) -> bool | None:
    """Whether the newest stored conversation event is the tool call ``result`` answers.

    ``events`` run newest first. System events and tool results (earlier answers of the same
    parallel call) are skipped; ``None`` when no other event is found.
    """
    ids = {response.id for response in result.responses}
    for event in events:
        message = event.message
        if message is None or isinstance(message, SystemMessage | ToolResponseMessage):
            continue
        return isinstance(message, AssistantMessage) and ids <= {c.id for c in message.tool_calls}
    return None


# --- the lease -------------------------------------------------------------------------------


class LeaseHolder:
    """The lease of one turn attempt: its holder id, the commit it rides on, its renewal.

    The renewal starts a third of the lease's length after the lease is first held, so a turn
    that ends sooner starts no task for it.
    """

    __slots__ = ("_renewal", "_timer", "holder", "service", "session_id", "ttl", "version")

    def __init__(self, service: SessionService, session_id: str, ttl: float) -> None:
        self.service = service
        self.session_id = session_id
        self.ttl = ttl
        self.holder: str = str(uuid.uuid4())
        """This attempt's id."""
        self.version: int | None = None
        """The commit the lease rides on; ``None`` while none is held."""
        self._timer: asyncio.TimerHandle | None = None
        self._renewal: asyncio.Task[None] | None = None

    def lease(self) -> Lease:
        """The lease as of now: this holder, for one length from now."""
        return Lease(holder=self.holder, expires_at=utc_now() + timedelta(seconds=self.ttl))

    def mine(self, lease: Lease | None) -> bool:
        """Whether ``lease`` is this attempt's."""
        return lease is not None and lease.holder == self.holder

    def held_at(self, version: int) -> None:
        """The turn's commit ``version`` carries this lease; renew it there from now on."""
        self.version = version
        if self._timer is None and self._renewal is None:
            self._timer = asyncio.get_running_loop().call_later(self.ttl / 3, self._start_renewal)

    async def acquire(self, version: int) -> bool:
        """Take the lease on commit ``version`` (0: the session itself), or renew it."""
        taken = await self.service.acquire_lease(self.session_id, version, self.lease())
        if taken:
            self.held_at(version)
        return taken

    async def ended(self) -> None:
        """The turn's last commit ended the lease (or it is being released): stop renewing."""
        self.version = None
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()
        task, self._renewal = self._renewal, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def release(self) -> None:
        """End the lease now (the turn failed or was abandoned), so nobody waits for it."""
        version = self.version
        await self.ended()
        if version is not None:
            await shielded(self.service.release_lease(self.session_id, version, self.holder))

    def _start_renewal(self) -> None:
        self._timer = None
        if self.version is not None:
            self._renewal = asyncio.get_running_loop().create_task(self._renew())

    async def _renew(self) -> None:
        while (version := self.version) is not None:
            try:
                renewed = await self.service.acquire_lease(self.session_id, version, self.lease())
            except Exception:  # the next renewal tries again; the compare-and-swap stays right
                logger.warning(
                    "Renewing the lease on session %r failed", self.session_id, exc_info=True
                )
            else:
                if not renewed:
                    logger.warning(
                        "Session %r: another attempt took the turn's lease over", self.session_id
                    )
                    return
            await asyncio.sleep(self.ttl / 3)


class Waiting:
    """The pauses of a turn waiting for another's lease: from ``poll`` seconds, doubling up to
    one second, until ``bound`` seconds have passed."""

    __slots__ = ("_deadline", "_pause")

    def __init__(self, bound: float, poll: float = 0.05) -> None:
        self._deadline = asyncio.get_running_loop().time() + bound
        self._pause = poll

    async def pause(self) -> bool:
        """Wait a little; ``False`` (at once) when the bound has passed."""
        remaining = self._deadline - asyncio.get_running_loop().time()
        if remaining <= 0:
            return False
        await asyncio.sleep(min(self._pause, remaining))
        self._pause = min(self._pause * 2, 1.0)
        return True


# --- compaction ------------------------------------------------------------------------------

SERVER_COMPACTION_TRIGGER: Final = "context_management"
"""The ``trigger`` of the ``COMPACTION`` record of a reply the server compacted during."""
SERVER_COMPACTION_STRATEGY: Final = "responses-server-compaction"
"""The ``strategy`` of that record."""
COMMIT_ATTEMPTS: Final = 3
"""How many compare-and-swaps a compacted turn tries before its events are appended plainly."""


Compaction = tuple[TriggerLike, CompactionStrategy] | CompactionQueue
"""How a turn compacts once it is complete: ``(trigger, strategy)`` inline, or a background
compactor (``CompactionWorker``, ``MongoCompactionQueue``, or anything with ``trigger`` and
``submit``)."""


class _Named:
    """Names a role in a compaction record (the record stores the ``__name__``)."""

    __slots__ = ("__name__",)

    def __init__(self, name: str) -> None:
        self.__name__ = name


def compacted_during(message: Message) -> bool:
    """Whether ``message`` is a reply the server compacted during: a ``compaction`` item with
    the reply's output after it (a ``responses.compact`` item stands alone)."""
    if not isinstance(message, AssistantMessage) or not message.items:
        return False
    kinds = [item.get("type") for item in message.items]
    return "compaction" in kinds and kinds.index("compaction") < len(kinds) - 1


async def commit_compacted(
    service: SessionService,
    session_id: str,
    turn: Sequence[SessionEvent],
    stored: Collection[str],
    summary: str,
    covered: Collection[str],
    known: tuple[Sequence[SessionEvent], int] | None = None,
) -> bool:
    """Write the turn's last commit as a compaction; ``False`` when it could not apply (the
    caller then appends plainly what ``turn`` still lacks).

    Args:
        turn: the turn's events in order, those already stored (``stored``) included.
        stored: the ids among ``turn`` already committed.
        summary: the id of the compacted reply: the view starts there.
        covered: the ids the compacted request was built from.
        known: the active view as the turn knows it (its read and its own commits) and the
            version it stands at, when the turn read the whole active view: the first attempt
            commits at that version without reading again.
    """
    start = next(i for i, e in enumerate(turn) if e.id == summary)
    mine = {e.id for e in turn}
    early = [e.as_archived() for e in turn[:start] if e.id not in stored and e.id in covered]
    trigger, strategy = _Named(SERVER_COMPACTION_TRIGGER), _Named(SERVER_COMPACTION_STRATEGY)
    for _ in range(COMMIT_ATTEMPTS):
        if known is not None:
            (active, version), known = known, None
        else:
            snapshot = await service.get_snapshot(session_id, EventFilter.active())
            if snapshot is None:
                return False
            active, version = snapshot.events, snapshot.version
        others = [e for e in active if e.id not in covered and e.id not in mine]
        view = [*early, *turn[start:], *others]
        result = CompactionResult(
            compacted_events=tuple(view),
            archived_events=tuple(e for e in active if e.id in covered),
        )
        commit = compaction_commit(session_id, active, result, trigger, strategy)
        if commit is None:
            return False
        if await shielded(service.append_events(session_id, commit, version)):
            return True
    return False


ACTIVE_VIEW: Final = EventFilter.active()
"""The filter of the whole active view."""


def known_active_view(
    read_filter: EventFilter, events: Sequence[SessionEvent], appended: Sequence[SessionEvent]
) -> list[SessionEvent] | None:
    """The active view as far as the turn knows it, or ``None`` when its read was partial.

    Only a read of the whole active view (``EventFilter.active()``), plus what the turn
    appended, is the active view; any other filter or window leaves events out.
    """
    if read_filter != ACTIVE_VIEW:
        return None
    seen = {event.id for event in events}
    return [*events, *(event for event in appended if event.id not in seen)]


async def compact_after_turn(
    service: SessionService,
    session: Session,
    compaction: Compaction,
    known_events: Sequence[SessionEvent] | None,
) -> None:
    """Compact (or hand to the compactor) once a turn is complete; failures are logged.

    When the turn knows the whole active view, the trigger is asked about it first, so a quiet
    trigger reads and writes nothing. The service asks it again on what it reads, so a trigger
    that fires here but not on the fresh read is harmless.
    """
    trigger: TriggerLike | None
    strategy: CompactionStrategy | None
    if isinstance(compaction, tuple):
        trigger, strategy = compaction
        submitter = None
    else:
        trigger, strategy, submitter = compaction.trigger, None, compaction
    try:
        request = None if known_events is None else CompactionRequest.of(session, known_events)
        if (
            trigger is not None
            and request is not None
            and not await should_compact(trigger, request)
        ):
            return
        if submitter is not None:
            submitted = submitter.submit(session.id)
            if inspect.isawaitable(submitted):
                await submitted
            return
        if trigger is not None and strategy is not None:
            await service.compact(session.id, trigger, strategy)
    except Exception:
        # The chat call succeeded and its turn is stored; the next turn tries again.
        logger.warning("Compaction of session %r failed", session.id, exc_info=True)


def seconds_left(lease: Lease) -> float:
    """Seconds until ``lease`` expires, at least one (a ``Retry-After``)."""
    return max(1.0, (lease.expires_at - utc_now()).total_seconds())
