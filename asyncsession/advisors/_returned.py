"""How a tool loop that ended on return-direct tools answers: its finish reason and the chunks
that carry the results, shared by the loop and by a replay of the stored turn."""

from __future__ import annotations

from typing import Final

from ..chat import ChatChunk, ChatResponse
from ..messages import ToolResponseMessage

__all__ = ["RETURN_DIRECT", "result_chunks"]

RETURN_DIRECT: Final = "return_direct"
"""The finish reason of a response (and of the last chunk) answered by return-direct tools."""


def result_chunks(response: ChatResponse, results: ToolResponseMessage) -> list[ChatChunk]:
    """One chunk per return-direct result; their texts add up to the returned ``text``, and the
    last has the finish reason ``"return_direct"``."""
    last = len(results.responses) - 1
    return [
        ChatChunk(
            text=result.data if index == 0 else "\n" + result.data,
            tool_result=result,
            finish_reason=RETURN_DIRECT if index == last else None,
            id=response.id,
            model=response.model,
        )
        for index, result in enumerate(results.responses)
    ]
