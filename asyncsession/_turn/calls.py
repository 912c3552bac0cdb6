"""Running a round's tools, approvals, and outputs too large to send whole.

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

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Annotated, Final, cast

from pydantic import Field

from .._telemetry import tool_span
from ..chat import APPROVAL_REQUIRED, RETURN_DIRECT, ChatResponse
from ..events import SessionEvent
from ..exceptions import ToolError, UnknownToolCall, UsageError
from ..messages import (
    AssistantMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
)
from ..repository import SessionRepository
from ..tools import Tool
from .log import INTERRUPTED_TEXT, READ_TOOL_OUTPUT, answers, cut_note, waiting_for_approval

__all__ = [
    "Decisions",
    "checked_decisions",
    "cut_output",
    "cut_results",
    "needing_approval",
    "newest_pause",
    "not_run",
    "read_tool_output",
    "reader_for",
    "rejected",
    "run_tools",
    "still_waiting",
    "stored_reply",
    "went_on",
]

PAGE_CHARS: Final = 16_000
"""The most characters one `read_tool_output` call returns, when the client sets no page size."""

logger = logging.getLogger("asyncsession.turn")


Decisions = Mapping[str, bool | str]
"""Decisions on calls waiting for approval, by call id: ``True`` approves, ``False`` rejects,
a string rejects with that reason (sent to the model)."""


def rejected(reason: str) -> str:
    """The result a rejected call sends the model."""
    return "Error: not run: the user rejected this tool call" + (f": {reason}" if reason else ".")


def newest_pause(session_id: str, events: Sequence[SessionEvent], decided: Sequence[str]) -> int:
    """The position among ``events`` of the newest round that stopped its turn for approvals.

    Raises:
        UnknownToolCall: there is none.
    """
    for index in range(len(events) - 1, -1, -1):
        if waiting_for_approval(events[index]):
            return index
    raise UnknownToolCall(session_id, decided, "tool call waiting for approval")


def went_on(session_id: str, after: Sequence[SessionEvent], decided: Sequence[str]) -> None:
    """Refuse to resume a paused round when the conversation went on after it.

    Raises:
        UnknownToolCall: a user message follows the paused round.
    """
    if any(isinstance(event.message, UserMessage) for event in after):
        raise UnknownToolCall(session_id, decided, "tool call waiting for approval")


def still_waiting(
    session_id: str, pause: SessionEvent, after: Sequence[SessionEvent], decisions: object
) -> tuple[list[ToolCall], dict[str, bool | str]]:
    """The paused round's calls no result ``after`` it answers, and ``decisions`` checked
    against those of them waiting for approval (none to check once every call is answered)."""
    message = pause.message
    assert isinstance(message, AssistantMessage)
    done = answers(after)
    left = [call for call in message.tool_calls if call.id not in done]
    if not left:
        return [], {}
    ids = {call.id for call in left}
    waiting = [call_id for call_id in waiting_for_approval(pause) if call_id in ids]
    return left, checked_decisions(session_id, waiting, decisions)


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


def not_run(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    decisions: Mapping[str, bool | str],
    *,
    started: bool = True,
) -> dict[str, str]:
    """The results of the ``calls`` of a stored round that are not to run, by call id: a
    rejected call gets its reason; when a run may have started (``started``), a call of a
    tool that is not idempotent is reported interrupted. The others run."""
    fixed: dict[str, str] = {}
    for call in calls:
        decision = decisions.get(call.id, True)
        tool = tools.get(call.name)
        if decision is not True:
            fixed[call.id] = rejected(decision if isinstance(decision, str) else "")
        elif started and (tool is None or not tool.idempotent):
            fixed[call.id] = INTERRUPTED_TEXT
    return fixed


def stored_reply(
    events: Sequence[SessionEvent], start: int | None, reply_id: str
) -> tuple[ChatResponse, list[str], list[str]] | None:
    """The response of a turn stored from ``events[start]`` (or its end alone) to the event
    ``reply_id``, with the ids of its request and response events; ``None`` when that event
    is not stored."""
    end = next((i for i, e in enumerate(events) if e.id == reply_id), None)
    if end is None:
        return None
    turn = [e for e in events[(end if start is None else start) : end + 1] if e.message]
    requests = [e.id for e in turn if not isinstance(e.message, AssistantMessage)]
    responses = [e.id for e in turn if isinstance(e.message, AssistantMessage)]
    last = events[end].message
    response: ChatResponse | None = None
    if isinstance(last, ToolResponseMessage):
        call = next(
            (e.message for e in reversed(turn[:-1]) if isinstance(e.message, AssistantMessage)),
            None,
        )
        if call is not None:
            response = ChatResponse(message=call, finish_reason=RETURN_DIRECT, tool_results=last)
    elif isinstance(last, AssistantMessage):
        waiting = set(waiting_for_approval(events[end]))
        response = ChatResponse(
            message=last,
            finish_reason=APPROVAL_REQUIRED if waiting else "stop",
            pending_approvals=tuple(c for c in last.tool_calls if c.id in waiting),
        )
    return None if response is None else (response, requests, responses)


# --- large outputs ---------------------------------------------------------------------------


def cut_output(event_id: str, response: ToolResponse, limit: int) -> ToolResponse:
    """``response`` as the model is sent it: whole, or its first ``limit`` characters and a
    note on reading the rest (a page ``read_tool_output`` read is sent whole)."""
    total = len(response.data)
    if total <= limit or response.name == READ_TOOL_OUTPUT:
        return response
    data = response.data[:limit] + cut_note(event_id, response.id, limit, total)
    return response.model_copy(update={"data": data})


def cut_results(event: SessionEvent, limit: int | None) -> ToolResponseMessage | None:
    """The stored results ``event`` as the model is sent them when an output is longer than
    ``limit`` characters (cut, with a note); ``None`` when none is."""
    message = event.message
    assert isinstance(message, ToolResponseMessage)
    if limit is None:
        return None
    responses = tuple(cut_output(event.id, response, limit) for response in message.responses)
    if all(cut is whole for cut, whole in zip(responses, message.responses, strict=True)):
        return None
    return message.model_copy(update={"responses": responses})


def reader_for(service: object, session_id: str, page_chars: int | None) -> Tool | None:
    """``read_tool_output`` over the repository of ``service`` (a service that has one)."""
    repository = getattr(service, "repository", None)
    if not isinstance(repository, SessionRepository):
        return None
    return read_tool_output(repository, session_id, page_chars or PAGE_CHARS)


def read_tool_output(
    repository: SessionRepository, session_id: str, page_chars: int = PAGE_CHARS
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


# --- running tools ---------------------------------------------------------------------------


async def needing_approval(
    calls: Sequence[ToolCall], tools: Mapping[str, Tool]
) -> tuple[ToolCall, ...]:
    """The calls of a round that wait for a person's approval."""
    waiting: list[ToolCall] = []
    for call in calls:
        tool = tools.get(call.name)
        if (
            tool is not None
            and tool.needs_approval
            and await tool.requires_approval(call.arguments)
        ):
            waiting.append(call)
    return tuple(waiting)


async def run_tools(
    calls: Sequence[ToolCall],
    tools: Mapping[str, Tool],
    fixed: Mapping[str, str] | None = None,
) -> ToolResponseMessage:
    """Run the calls, concurrently when there are several; results in call order. A call
    in ``fixed`` is not run: its result is the text given there."""

    async def one(call: ToolCall) -> str:
        if fixed is not None and call.id in fixed:
            return fixed[call.id]
        return await _run_one(call, tools)

    if len(calls) == 1:
        results = [await one(calls[0])]
    else:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(call)) for call in calls]
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
