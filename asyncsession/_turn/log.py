"""The session side of a turn: the client's session settings, the prompt built from the
window, the tool calls and results of the log, and the lease.

**The prompt.** Pure functions: the history is prepended once (a prompt that already holds it
is sent as it is), system messages go first, tool calls whose results were left out of the
window (or results whose calls were) are dropped from the prompt, never from the log.

**Pairing.** Every tool call the model makes is answered in the log by one result, stored after
it. A turn records a round's call before its tools run and their results after (two commits),
so a turn that dies between the two leaves a call without its result. The next turn of the
session answers such a call, before its own model call, with a result saying it was
interrupted (`interrupted`), appended at the version it read with an id fixed by the call ids,
so whichever process gets there first writes it and the others find it stored.

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
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import logging
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final, Literal, cast, get_args

from pydantic import JsonValue

from .._checks import require_object, require_service, require_text
from .._compaction_pass import USAGE_METADATA_KEY, CompactionQueue, check_strategy, check_trigger
from .._offload import OffloadedBody
from .._shield import shielded
from ..advisors import IdempotentSessionEventIdGenerator
from ..chat import ChatResponse, MessageFilter
from ..compaction_protocols import CompactionStrategy, TriggerLike
from ..events import EventType, SessionEvent, utc_now
from ..exceptions import UnknownToolCall, UsageError
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
from ..repository import Lease
from ..service import SessionService

__all__ = [
    "ACTIVE_VIEW",
    "APPROVAL_METADATA_KEY",
    "INTERRUPTED_METADATA_KEY",
    "INTERRUPTED_TEXT",
    "LATEST_SYSTEM_FILTER",
    "NOT_APPROVED_TEXT",
    "ORPHAN_WARNING",
    "READ_TOOL_OUTPUT",
    "RETURNED_METADATA_KEY",
    "Compaction",
    "LeaseHolder",
    "SessionMemory",
    "StoreQuestion",
    "Waiting",
    "answers",
    "can_tell_newest",
    "compacted_during",
    "contains_run",
    "cut_note",
    "guard_history",
    "history_system_messages",
    "interrupted",
    "interrupted_calls",
    "last_request_message",
    "latest_system",
    "newest_answers",
    "noted_preview",
    "refuse_unknown_results",
    "request_event_id",
    "same_content",
    "session_memory",
    "seconds_left",
    "sees_pairs",
    "system_first",
    "unanswered",
    "usage_metadata",
    "waiting_for_approval",
]

logger = logging.getLogger("asyncsession.turn")


# --- the session settings ---------------------------------------------------------------------


StoreQuestion = Literal["first", "with_reply"]
"""When a turn stores the user's message: ``"first"``, before the model call (so it survives a
failed call), or ``"with_reply"``, with the rest of the turn in one commit once it is complete
(nothing is stored for a turn that fails)."""


RETURNED_METADATA_KEY: Final = "return_direct"
"""The metadata key (value ``True``) of the event that holds the results of return-direct
tools: the turn that stored it is complete although its last model message asks for tools."""


Compaction = tuple[TriggerLike, CompactionStrategy] | CompactionQueue
"""How a turn compacts once it is complete: ``(trigger, strategy)`` inline, or a background
compactor (``CompactionWorker``, ``MongoCompactionQueue``, or anything with ``trigger`` and
``submit``)."""


ACTIVE_VIEW: Final = EventFilter.active()
"""The filter of the whole active view."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMemory:
    """How a client keeps its turns in sessions: its session keywords, checked once."""

    service: SessionService
    compaction: Compaction | None
    store_question: StoreQuestion
    event_filter: EventFilter
    message_filter: MessageFilter
    event_ids: IdempotentSessionEventIdGenerator | None
    default_user_id: str
    lease_ttl: float
    wait: float
    max_tool_output: int | None = None
    """Tool outputs longer than this many characters are sent to the model cut, with a note
    on reading the rest; ``None``: whole."""
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


def _checked_compaction(compaction: object) -> Compaction:
    if isinstance(compaction, tuple):
        pair = cast(tuple[object, ...], compaction)
        if len(pair) != 2:
            raise UsageError("compaction must be a (trigger, strategy) pair or a compactor")
        check_trigger(cast(Any, pair[0]), "compaction's trigger")
        check_strategy(cast(Any, pair[1]), "compaction's strategy")
    else:
        require_object(
            compaction,
            "compaction",
            "a (trigger, strategy) pair or a compactor",
            methods=("submit",),
        )
    return cast(Compaction, compaction)


def session_memory(
    sessions: SessionService | None,
    *,
    compaction: Compaction | None,
    store_question: StoreQuestion,
    event_filter: EventFilter | None,
    message_filter: MessageFilter | None,
    event_ids: IdempotentSessionEventIdGenerator | None,
    default_user_id: str,
    lease_ttl: float,
    wait: float,
    max_tool_output: int | None,
) -> SessionMemory | None:
    """The client's session keywords, checked; ``None`` without ``sessions``.

    Raises:
        UsageError: a keyword is not of its kind, or a session keyword is given without
            ``sessions``.
    """
    if sessions is None:
        given = [
            name
            for name, value in (
                ("compaction", compaction),
                ("event_filter", event_filter),
                ("message_filter", message_filter),
                ("event_ids", event_ids),
            )
            if value is not None
        ]
        if given:
            raise UsageError(f"{', '.join(given)} needs a client with sessions=...")
        return None
    require_service(sessions, "sessions")
    if store_question not in get_args(StoreQuestion):
        raise UsageError(
            f"store_question must be one of {get_args(StoreQuestion)!r}, not {store_question!r}"
        )
    if event_filter is not None and not isinstance(event_filter, EventFilter):
        raise UsageError(f"event_filter must be an EventFilter, not {event_filter!r}")
    if message_filter is not None and not isinstance(message_filter, MessageFilter):
        raise UsageError(f"message_filter must be a MessageFilter, not {message_filter!r}")
    if event_ids is not None and not callable(getattr(event_ids, "generate", None)):
        raise UsageError(
            "event_ids must be an IdempotentSessionEventIdGenerator (with generate()), "
            f"not {event_ids!r}"
        )
    if not require_text(default_user_id, "default_user_id").strip():
        raise UsageError("default_user_id must be a non-empty string")
    for name, seconds in (("lease_ttl", lease_ttl), ("wait", wait)):
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise UsageError(f"{name} must be a number of seconds >= 0, not {seconds!r}")
    if lease_ttl <= 0:
        raise UsageError("lease_ttl must be positive")
    if max_tool_output is not None and (
        isinstance(max_tool_output, bool)
        or not isinstance(max_tool_output, int)
        or max_tool_output < 1
    ):
        raise UsageError(f"max_tool_output must be a positive int or None, not {max_tool_output!r}")
    return SessionMemory(
        service=sessions,
        compaction=None if compaction is None else _checked_compaction(compaction),
        store_question=store_question,
        event_filter=event_filter or EventFilter.all(),
        message_filter=message_filter or MessageFilter.skip_empty_messages(),
        event_ids=event_ids,
        default_user_id=default_user_id,
        lease_ttl=float(lease_ttl),
        wait=float(wait),
        max_tool_output=max_tool_output,
    )


_ROUNDS = IdempotentSessionEventIdGenerator("session", "request")
"""The ids of a request's tool rounds: their tool-call ids, under the session and request."""


def request_event_id(session_id: str, request_id: str, message: Message, *, reply: bool) -> str:
    """The id of an event a call with a request id stores. The question (a user message) and
    the event that ends the turn (``reply=True``: the reply, or the results of return-direct
    tools) get one id each, whatever they hold; a tool call or its results get the id of their
    tool-call ids, so a round is stored once per request."""
    if reply or isinstance(message, UserMessage):
        kind = "reply" if reply else message.message_type
        text = f"{len(session_id)}:{session_id}:{request_id}:{kind}"
        return f"{kind}-{hashlib.sha256(text.encode()).hexdigest()}"
    return _ROUNDS.generate({"session": session_id, "request": request_id}, message)


def usage_metadata(response: ChatResponse) -> dict[str, JsonValue] | None:
    """The usage metadata of an event holding ``response``'s message."""
    usage = response.usage
    if usage is None:
        return None
    return {
        USAGE_METADATA_KEY: {
            "input_tokens": usage.prompt_tokens,
            "output_tokens": usage.completion_tokens,
        }
    }


def compacted_during(message: Message) -> bool:
    """Whether ``message`` is a reply the server compacted during: a ``compaction`` item with
    the reply's output after it (a ``responses.compact`` item stands alone)."""
    if not isinstance(message, AssistantMessage) or not message.items:
        return False
    kinds = [item.get("type") for item in message.items]
    return "compaction" in kinds and kinds.index("compaction") < len(kinds) - 1


# --- the prompt -------------------------------------------------------------------------------


ORPHAN_WARNING: Final = (
    "Session %r: dropped %d tool call/result message(s) without their counterpart from the "
    "prompt (the log is unchanged). Likely causes: an EventFilter with message_types hiding "
    "TOOL events, a MessageFilter that skipped them, or a turn interrupted between a tool "
    "call and its result."
)


LATEST_SYSTEM_FILTER = EventFilter(
    message_types=["system"],
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
        read_filter.message_types is None or "assistant" in read_filter.message_types
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


READ_TOOL_OUTPUT: Final = "read_tool_output"
"""The name of the tool that pages a stored tool output."""


def cut_note(event_id: str, call_id: str, shown: int, total: int) -> str:
    return (
        f"\n[output cut: {shown} of {total} characters shown; read the rest with "
        f'{READ_TOOL_OUTPUT}(event_id="{event_id}", call_id="{call_id}", offset={shown})]'
    )


def noted_preview(event: SessionEvent) -> SessionEvent:
    """A stored result the store offloaded (read back as its preview), its cut outputs noted
    with how to read the rest; any other event as it is."""
    body = OffloadedBody.of(event)
    message = event.message
    if body is None or not isinstance(message, ToolResponseMessage):
        return event
    responses = list(message.responses)
    for index, (response, total) in enumerate(zip(responses, body.chars, strict=False)):
        shown = len(response.data)
        if shown < total:
            note = cut_note(event.id, response.id, shown, total)
            responses[index] = response.model_copy(update={"data": response.data + note})
    noted = message.model_copy(update={"responses": tuple(responses)})
    return event.model_copy(update={"message": noted})


# --- tool calls and their results in the log --------------------------------------------------


APPROVAL_METADATA_KEY: Final = "approval_pending"
"""The metadata key of a stored round whose turn stopped for approvals: the ids of the calls
waiting for a decision."""


INTERRUPTED_METADATA_KEY: Final = "interrupted"
"""The metadata key (value ``True``) of a result that answers a call whose run was lost."""


INTERRUPTED_TEXT: Final = (
    "Error: this tool call was interrupted before it returned a result (the process running "
    "it stopped). It may or may not have taken effect: check before calling it again."
)


NOT_APPROVED_TEXT: Final = (
    "Error: not run: the conversation went on before anyone approved this tool call."
)


def answers(events: Sequence[SessionEvent]) -> set[str]:
    """The ids of the tool calls the results among ``events`` answer."""
    return {
        response.id
        for event in events
        if isinstance(event.message, ToolResponseMessage)
        for response in event.message.responses
    }


def sees_pairs(read_filter: EventFilter) -> bool:
    """Whether a read with ``read_filter`` shows every tool call and result after the oldest
    event it returns (so a call it shows without a result has none)."""
    kinds = read_filter.message_types
    types = read_filter.event_types
    return (
        (kinds is None or {"assistant", "tool"} <= set(kinds))
        and (types is None or {EventType.ASSISTANT, EventType.TOOL} <= set(types))
        and read_filter.page_size is None
        and read_filter.from_ is None
        and read_filter.to is None
        and not read_filter.has_text_criteria
    )


def unanswered(events: Sequence[SessionEvent]) -> list[tuple[SessionEvent, list[ToolCall]]]:
    """The newest tool-call event among ``events`` with its calls no later result answers,
    when nothing but results (and system events) follows it: the calls a result appended
    now would answer in place. An older call without its result (written by someone else)
    is left to the prompt's guard."""
    answered: set[str] = set()
    for event in reversed(events):
        message = event.message
        if message is None or isinstance(message, SystemMessage):
            continue
        if isinstance(message, ToolResponseMessage):
            answered.update(response.id for response in message.responses)
            continue
        if isinstance(message, AssistantMessage):
            missing = [call for call in message.tool_calls if call.id not in answered]
            if missing:
                return [(event, missing)]
        return []
    return []


def waiting_for_approval(event: SessionEvent) -> list[str]:
    """The ids of the calls of a stored round that stopped its turn for approvals."""
    value = event.metadata.get(APPROVAL_METADATA_KEY)
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, str)]


def interrupted(
    session_id: str, call_event: SessionEvent, calls: Sequence[ToolCall]
) -> SessionEvent:
    """The result that answers ``calls`` of ``call_event``, whose run was lost: its id is fixed
    by the calls, so every process that writes it writes the same event."""
    pending = set(waiting_for_approval(call_event))
    responses = tuple(
        ToolResponse(
            id=call.id,
            name=call.name,
            data=NOT_APPROVED_TEXT if call.id in pending else INTERRUPTED_TEXT,
        )
        for call in calls
    )
    key = ",".join(call.id for call in calls)
    digest = hashlib.sha256(f"{len(session_id)}:{session_id}:{key}".encode()).hexdigest()
    return SessionEvent(
        id=f"interrupted-{digest}",
        session_id=session_id,
        message=ToolResponseMessage(responses=responses),
        metadata={INTERRUPTED_METADATA_KEY: True},
    )


def refuse_unknown_results(
    session_id: str,
    read_filter: EventFilter,
    events: Sequence[SessionEvent],
    prompt: Sequence[Message],
    question: Message,
) -> None:
    """Refuse tool results (``question``) that answer a call neither in the log (``events``,
    read with ``read_filter``) nor in the ``prompt``, when the read shows the whole log.

    Raises:
        UnknownToolCall: such results.
    """
    if (
        not isinstance(question, ToolResponseMessage)
        or not sees_pairs(read_filter)
        or read_filter.has_window
    ):
        return
    known = {
        call.id
        for message in (*(event.message for event in events), *prompt)
        if isinstance(message, AssistantMessage)
        for call in message.tool_calls
    }
    missing = [response.id for response in question.responses if response.id not in known]
    if missing:
        raise UnknownToolCall(session_id, missing, "tool call")


def interrupted_calls(
    session_id: str,
    read_filter: EventFilter,
    events: Sequence[SessionEvent],
    question: Message | None,
) -> list[SessionEvent]:
    """The results that answer, as interrupted, the calls ``events`` leave unanswered (those
    the question answers aside); none when the read cannot show pairs."""
    if not sees_pairs(read_filter):
        return []
    answered = (
        {r.id for r in question.responses}
        if isinstance(question, ToolResponseMessage)
        else set[str]()
    )
    repairs: list[SessionEvent] = []
    for call_event, calls in unanswered(events):
        left = [call for call in calls if call.id not in answered]
        if left:
            repairs.append(interrupted(session_id, call_event, left))
            logger.warning(
                "Session %r: answering tool call(s) %s, left without a result by an "
                "interrupted turn, as interrupted",
                session_id,
                [call.id for call in left],
            )
    return repairs


# --- the lease --------------------------------------------------------------------------------


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


def seconds_left(lease: Lease) -> float:
    """Seconds until ``lease`` expires, at least one (a ``Retry-After``)."""
    return max(1.0, (lease.expires_at - utc_now()).total_seconds())
