"""How a turn keeps its session: the client's session settings (`SessionMemory`), and the ids
and metadata of the events a turn stores."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from typing import Final, Literal

from pydantic import JsonValue

from .._compaction_pass import USAGE_METADATA_KEY
from ..advisors import EventIdGenerator, IdempotentSessionEventIdGenerator, MessageFilter
from ..chat import ChatResponse
from ..filters import EventFilter
from ..messages import Message, UserMessage
from ..service import SessionService
from .log import ACTIVE_VIEW, Compaction

__all__ = [
    "RETURNED_METADATA_KEY",
    "SessionMemory",
    "StoreQuestion",
    "request_event_id",
    "usage_metadata",
]

StoreQuestion = Literal["first", "with_reply"]
"""When a turn stores the user's message: ``"first"``, before the model call (so it survives a
failed call), or ``"with_reply"``, with the rest of the turn in one commit once it is complete
(nothing is stored for a turn that fails)."""
RETURNED_METADATA_KEY: Final = "return_direct"
"""The metadata key (value ``True``) of the event that holds the results of return-direct
tools: the turn that stored it is complete although its last model message asks for tools."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionMemory:
    """How a client keeps its turns in sessions: its session keywords, checked once."""

    service: SessionService
    compaction: Compaction | None
    store_question: StoreQuestion
    event_filter: EventFilter
    message_filter: MessageFilter
    event_ids: EventIdGenerator | None
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


_ROUNDS = IdempotentSessionEventIdGenerator("session", "request")
"""The ids of a request's tool rounds: their tool-call ids, under the session and request."""


def request_event_id(session_id: str, request_id: str, message: Message, *, reply: bool) -> str:
    """The id of an event a call with a request id stores. The question (a user message) and
    the event that ends the turn (``reply=True``: the reply, or the results of return-direct
    tools) get one id each, whatever they hold; a tool call or its results get the id of their
    tool-call ids, so a round is stored once per request."""
    if reply or isinstance(message, UserMessage):
        kind = "reply" if reply else message.message_type.value
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
