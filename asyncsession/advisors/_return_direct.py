"""Storing the results of return-direct tools: the turn advisor's part of a loop they ended."""

from __future__ import annotations

from .._shield import shielded
from ..chat import ChatResponse
from ..messages import AssistantMessage
from ._session import TurnState
from .base import CallContext
from .contexts import REQUEST_EVENT_IDS_CONTEXT_KEY

__all__ = ["store_returned_results"]


async def store_returned_results(ctx: CallContext, turn: TurnState, response: ChatResponse) -> None:
    """Store the results of the return-direct tools that ended the loop, after their tool call.

    A memory advisor stores the model's message that asked for the tools (inside the loop, in
    its round; outside it, as the final reply); the loop ended before any advisor further in
    could store the results. They are stored exactly when that message is the newest event the
    call stored (the memory advisor's write guard), so the log holds the call and its results
    and the next prompt replays both. Their event id joins ``REQUEST_EVENT_IDS_CONTEXT_KEY``,
    beside the tool results the memory advisor stores.
    """
    results = response.tool_results
    if results is None or not turn.appended:
        return
    newest = turn.appended[-1].message
    if not isinstance(newest, AssistantMessage) or [call.id for call in newest.tool_calls] != [
        result.id for result in results.responses
    ]:
        return
    event = await shielded(turn.service.append_message(turn.session_id, results))
    turn.appended.append(event)
    stored: list[str] = list(ctx.context.get(REQUEST_EVENT_IDS_CONTEXT_KEY) or ())
    ctx.context[REQUEST_EVENT_IDS_CONTEXT_KEY] = [*stored, event.id]
