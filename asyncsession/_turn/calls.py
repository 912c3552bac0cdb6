"""Tool calls in the log: which are still unanswered, the results that answer them when their
run was lost or refused, approvals, and outputs too large to send whole.

**Pairing.** Every tool call the model makes is answered in the log by one result, stored after
it. A turn records a round's call before its tools run and their results after (two commits),
so a turn that dies between the two leaves a call without its result. The next turn of the
session answers such a call, before its own model call, with a result saying it was
interrupted (`interrupted`), appended at the version it read with an id fixed by the call ids,
so whichever process gets there first writes it and the others find it stored.

**Exactly once.** A call in the log without its result is a run that was recorded as started.
A turn that continues the same request (a retry of its request id that takes it over, or a
``resume``) runs such a call again only when its tool is ``idempotent``; any other is answered
as interrupted, so it never runs twice. A call whose result is stored is never run again: the
model reads the result.

**Approvals.** A round with a call of a tool that ``needs_approval`` is stored as the turn's
last commit with the ids of the calls waiting (`APPROVAL_METADATA_KEY` in its metadata); the
turn stops there. ``resume`` reads that event, checks the decisions against it, and answers
each waiting call: a rejection with its reason, an approval with the tool's result.

**Large outputs.** A tool output longer than the client's ``max_tool_output`` characters is
sent to the model as its beginning and a note on how to read the rest with the
``read_tool_output`` tool, which pages the stored result (``SessionRepository.read_body_page``);
a result the store offloaded reads back as its preview, sent with the same note.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Annotated, Final, cast

from pydantic import Field, JsonValue

from ..events import EventType, SessionEvent
from ..exceptions import ToolError, UnknownToolCall, UsageError
from ..filters import EventFilter
from ..messages import (
    AssistantMessage,
    MessageType,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
)
from ..repository import DEFAULT_PAGE_CHARS, OffloadedBody, SessionRepository
from ..tools import Tool

__all__ = [
    "APPROVAL_METADATA_KEY",
    "INTERRUPTED_METADATA_KEY",
    "READ_TOOL_OUTPUT",
    "Decisions",
    "answers",
    "checked_decisions",
    "cut_output",
    "interrupted",
    "noted_preview",
    "read_tool_output",
    "rejected",
    "sees_pairs",
    "unanswered",
    "waiting_for_approval",
]

APPROVAL_METADATA_KEY: Final = "approval_pending"
"""The metadata key of a stored round whose turn stopped for approvals: the ids of the calls
waiting for a decision."""
INTERRUPTED_METADATA_KEY: Final = "interrupted"
"""The metadata key (value ``True``) of a result that answers a call whose run was lost."""
READ_TOOL_OUTPUT: Final = "read_tool_output"
"""The name of the tool that pages a stored tool output."""

INTERRUPTED_TEXT: Final = (
    "Error: this tool call was interrupted before it returned a result (the process running "
    "it stopped). It may or may not have taken effect: check before calling it again."
)
NOT_APPROVED_TEXT: Final = (
    "Error: not run: the conversation went on before anyone approved this tool call."
)

Decisions = Mapping[str, bool | str]
"""Decisions on calls waiting for approval, by call id: ``True`` approves, ``False`` rejects,
a string rejects with that reason (sent to the model)."""


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
        (kinds is None or {MessageType.ASSISTANT, MessageType.TOOL} <= set(kinds))
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
    return [item for item in cast(list[JsonValue], value) if isinstance(item, str)]


def interrupted(session_id: str, call_event: SessionEvent, calls: Sequence[ToolCall]) -> SessionEvent:
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


def rejected(reason: str) -> str:
    """The result a rejected call sends the model."""
    return "Error: not run: the user rejected this tool call" + (f": {reason}" if reason else ".")


def checked_decisions(
    session_id: str, waiting: Sequence[str], decisions: object
) -> dict[str, bool | str]:
    """``decisions`` checked against the calls ``waiting`` for them.

    Raises:
        UsageError: ``decisions`` is not a mapping of call ids to ``bool`` or ``str``, or
            leaves a waiting call undecided.
        UnknownToolCall: it decides a call that is not waiting.
    """
    if not isinstance(decisions, Mapping):
        raise UsageError(
            f"decisions must be a mapping of call ids to True, False or a reason, not "
            f"{type(decisions).__name__}"
        )
    given = cast(Mapping[object, object], decisions)
    checked: dict[str, bool | str] = {}
    for key, value in given.items():
        if not isinstance(key, str) or not isinstance(value, bool | str):
            raise UsageError(
                f"decisions must map call ids to True, False or a reason, not {key!r}: {value!r}"
            )
        checked[key] = value
    unknown = [key for key in checked if key not in waiting]
    if unknown:
        raise UnknownToolCall(session_id, unknown, "tool call waiting for approval")
    missing = [call_id for call_id in waiting if call_id not in checked]
    if missing:
        raise UsageError(f"decisions leave tool call(s) {missing!r} of session undecided")
    return checked


# --- large outputs ---------------------------------------------------------------------------


def _note(event_id: str, call_id: str, shown: int, total: int) -> str:
    return (
        f"\n[output cut: {shown} of {total} characters shown; read the rest with "
        f'{READ_TOOL_OUTPUT}(event_id="{event_id}", call_id="{call_id}", offset={shown})]'
    )


def cut_output(event_id: str, response: ToolResponse, limit: int) -> ToolResponse:
    """``response`` as the model is sent it: whole, or its first ``limit`` characters and a
    note on reading the rest (a page ``read_tool_output`` read is sent whole)."""
    total = len(response.data)
    if total <= limit or response.name == READ_TOOL_OUTPUT:
        return response
    data = response.data[:limit] + _note(event_id, response.id, limit, total)
    return response.model_copy(update={"data": data})


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
            note = _note(event.id, response.id, shown, total)
            responses[index] = response.model_copy(update={"data": response.data + note})
    noted = message.model_copy(update={"responses": tuple(responses)})
    return event.model_copy(update={"message": noted})


def read_tool_output(
    repository: SessionRepository, session_id: str, page_chars: int = DEFAULT_PAGE_CHARS
) -> Tool:
    """The tool that pages a stored tool output of session ``session_id``, ``page_chars``
    characters a page."""

    async def read(
        event_id: Annotated[str, Field(description="The event_id the note names.")],
        call_id: Annotated[str, Field(description="The call_id the note names.")],
        offset: Annotated[int, Field(ge=0, description="Where to start, in characters.")] = 0,
    ) -> str:
        try:
            page = await repository.read_body_page(
                session_id, event_id, offset=offset, limit=page_chars, call_id=call_id
            )
        except UsageError as exc:
            raise ToolError(str(exc)) from None
        if page is None:
            raise ToolError(f"There is no stored output {event_id!r} in this session")
        end = page.offset + len(page.text)
        more = (
            f"\n[characters {page.offset}-{end} of {page.total}; next: offset={end}]"
            if page.next_offset is not None
            else f"\n[characters {page.offset}-{end} of {page.total}; the end]"
        )
        return page.text + more

    return Tool.from_function(
        read,
        name=READ_TOOL_OUTPUT,
        description=(
            "Read more of a tool output that was cut: give the event_id, call_id and offset "
            "the note after the cut output names."
        ),
        idempotent=True,
    )
