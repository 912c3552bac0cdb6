"""An unanswered tool call on ``LangChainHistory``, held against ``InMemoryChatMessageHistory``:
what the guide's table says of it."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_support import ChatHistoryFactory

from asyncsession.integrations.langchain import LangChainHistory

pytestmark = pytest.mark.filterwarnings(  # the reference: langchain-core 1.x deprecates it
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)


async def test_an_unanswered_call_reads_back_as_stored(
    any_chat_history: ChatHistoryFactory,
) -> None:
    """A call whose result was never stored (its process died), then a new question: the history
    returns both as stored, as LangChain's in-memory history does (neither answers the call);
    a window that would start at a result is widened to its call, never cut between them."""
    history = any_chat_history("s")
    call = {"name": "lookup", "args": {"q": "x"}, "id": "c1", "type": "tool_call"}
    answered = {"name": "lookup", "args": {"q": "y"}, "id": "c2", "type": "tool_call"}
    messages = [
        HumanMessage(content="look x up", id="m1"),
        AIMessage(content="", tool_calls=[call], id="m2"),
        HumanMessage(content="and y?", id="m3"),
        AIMessage(content="", tool_calls=[answered], id="m4"),
        ToolMessage(content="y found", tool_call_id="c2", id="m5"),
        AIMessage(content="y is found", id="m6"),
    ]
    await history.aadd_messages(messages)
    stored = await any_chat_history("s").aget_messages()
    assert [(type(m).__name__, m.id) for m in stored] == [
        (type(m).__name__, m.id) for m in messages
    ]
    assert stored[1].tool_calls == [call]  # type: ignore[attr-defined]
    if isinstance(history, LangChainHistory):
        window = LangChainHistory("s", history.service, history_size=2)
        assert [m.id for m in await window.aget_messages()] == ["m3", "m4", "m5", "m6"]
