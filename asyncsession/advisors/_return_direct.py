"""Storing the results of return-direct tools: the turn advisor's part of a loop they ended."""

from __future__ import annotations

from typing import Final

from pydantic import JsonValue

from .._shield import shielded
from ..chat import ChatResponse
from ..events import SessionEvent
from ..messages import AssistantMessage, ToolResponseMessage
from ._session import TurnState
from .base import CallContext
from .contexts import REQUEST_EVENT_IDS_CONTEXT_KEY

__all__ = ["RETURNED_METADATA_KEY", "returned_results", "store_returned_results"]

RETURNED_METADATA_KEY: Final = "return_direct"
"""The metadata key (value ``True``) of the event that holds the results of return-direct
tools: the turn that stored it is complete although its last model message asks for tools."""


def returned_results(event: SessionEvent, call: AssistantMessage) -> ToolResponseMessage | None:
    """The results of return-direct tools that ``event`` holds, if it is marked as such and
    answers ``call`` (the model's message stored before it): the end of a turn on them."""
    message = event.message
    if (
        isinstance(message, ToolResponseMessage)
        and event.metadata.get(RETURNED_METADATA_KEY) is True
        and [c.id for c in call.tool_calls] == [r.id for r in message.responses]
    ):
        return message
    return None


async def store_returned_results(ctx: CallContext, turn: TurnState, response: ChatResponse) -> None:
    """Store the results of the return-direct tools that ended the loop, after their tool call.

    A memory advisor stores the model's message that asked for the tools (inside the loop, in
    its round; outside it, as the final reply); the loop ended before any advisor further in
    could store the results. They are stored exactly when that message is the newest event the
    call stored (the memory advisor's write guard), so the log holds the call and its results
    and the next prompt replays both. The event is marked (``RETURNED_METADATA_KEY``), so a
    retry of the request knows the turn is complete. With ``store_question="with_reply"`` it
    joins the turn's deferred events, stored in the turn's one append. Its event id joins
    ``REQUEST_EVENT_IDS_CONTEXT_KEY``, beside the tool results the memory advisor stores.

    Raises:
        InvalidText: a result holds a string that does not encode as UTF-8 (nothing of a
            turn stored with the reply is then stored).
    """
    results = response.tool_results
    if results is None or not turn.appended:
        return
    newest = turn.appended[-1].message
    if not isinstance(newest, AssistantMessage) or [call.id for call in newest.tool_calls] != [
        result.id for result in results.responses
    ]:
        return
    metadata: dict[str, JsonValue] = {RETURNED_METADATA_KEY: True}
    if turn.stores_with_reply:
        event = await turn.defer(results, None, metadata)
    else:
        event = await shielded(
            turn.service.append_message(turn.session_id, results, metadata=metadata)
        )
    turn.appended.append(event)
    stored: list[str] = list(ctx.context.get(REQUEST_EVENT_IDS_CONTEXT_KEY) or ())
    ctx.context[REQUEST_EVENT_IDS_CONTEXT_KEY] = [*stored, event.id]
