"""``ModelMemoryFlush``: before turns are archived, a model saves their durable facts to memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from openai import AsyncOpenAI, OpenAI

from .._checks import require_estimator, require_int, require_memory_store, require_type
from ..chat import ChatOptions
from ..compaction import CompactionRequest, EventFormatter, format_event
from ..compaction.tokens import HeuristicTokenCountEstimator, TokenCountEstimator
from ..events import SessionEvent
from ..exceptions import UsageError
from ..memory import MemoryStore
from ..messages import Message, SystemMessage, UserMessage
from ..tools import AutoMemoryTools, Tool
from ._client import ChatClient

__all__ = ["DEFAULT_MEMORY_FLUSH_PROMPT", "ModelMemoryFlush"]

DEFAULT_MEMORY_FLUSH_PROMPT: Final = (
    "The conversation turns below are about to leave your context window for good. Before "
    "they do, save to long-term memory, with the memory tools, every durable fact worth "
    "having in a later conversation: who the user is, their preferences, decisions and "
    "commitments, open tasks. Look at what memory already holds first and update it rather "
    "than duplicating it. Save nothing that only mattered in the moment. When you are done, "
    "answer with one word: done."
)
"""The flush model's instructions."""


class ModelMemoryFlush:
    """A [`MemoryFlush`][asyncsession.compaction.MemoryFlush] run by a model with memory tools.

    The model gets the events about to be archived (formatted one per line, oldest first, up
    to ``max_input_tokens``) and the six memory tools over ``store.with_scope(user_id)`` of
    the session's owner: the same tools, in the same sandbox (the tool loop turns every
    failure into a text for the model), as the memory-tools advisor offers in a chat. It runs
    at most ``max_rounds`` tool rounds of at most ``max_output_tokens`` each; running out is a
    failed flush, which the compaction logs and ignores.

    Args:
        client: a ``ChatClient`` or ``ResponsesClient`` without session memory (the flush
            must not be stored in a session).
        store: the long-term memory store; scoped per session owner.
        max_rounds: the bound on model calls (tool rounds).
        max_input_tokens: the bound on the turns shown, estimated.
        max_output_tokens: the bound on each model call's output.
        system_prompt: the flush instructions.
        estimator: estimates the turns' tokens.
        event_formatter: renders an event as a line.

    Raises:
        UsageError: the client has session memory, or a bound is not positive.
    """

    __slots__ = (
        "client",
        "estimator",
        "event_formatter",
        "max_input_tokens",
        "max_output_tokens",
        "max_rounds",
        "store",
        "system_prompt",
    )

    def __init__(
        self,
        client: ChatClient,
        store: MemoryStore,
        *,
        max_rounds: int = 4,
        max_input_tokens: int = 8_000,
        max_output_tokens: int = 1_000,
        system_prompt: str = DEFAULT_MEMORY_FLUSH_PROMPT,
        estimator: TokenCountEstimator | None = None,
        event_formatter: EventFormatter = format_event,
    ) -> None:
        wraps = (
            " (wrap it: ChatClient(openai_client, model=...))"
            if isinstance(client, AsyncOpenAI | OpenAI)
            else ""
        )
        require_type(client, ChatClient, "client", "a ChatClient", hint=wraps)
        require_memory_store(store, "store")
        if client.memory is not None:
            raise UsageError("ModelMemoryFlush needs a client without session memory")
        for name, value in (
            ("max_rounds", max_rounds),
            ("max_input_tokens", max_input_tokens),
            ("max_output_tokens", max_output_tokens),
        ):
            if require_int(value, name) < 1:
                raise UsageError(f"{name} must be a positive int, not {value!r}")
        self.client: ChatClient = client
        self.store: MemoryStore = store
        self.max_rounds: int = max_rounds
        self.max_input_tokens: int = max_input_tokens
        self.max_output_tokens: int = max_output_tokens
        self.system_prompt: str = system_prompt
        self.estimator: TokenCountEstimator = (
            HeuristicTokenCountEstimator() if estimator is None else require_estimator(estimator)
        )
        self.event_formatter: EventFormatter = event_formatter

    def transcript(self, events: Sequence[SessionEvent]) -> str:
        """The turns as the model sees them: one line per event, cut at ``max_input_tokens``."""
        lines: list[str] = []
        used = 0
        for index, event in enumerate(events):
            line = self.event_formatter(event)
            used += self.estimator.estimate(line)
            if used > self.max_input_tokens and lines:
                lines.append(f"({len(events) - index} later events left out)")
                break
            lines.append(line)
        return "\n".join(lines)

    def tools_for(self, user_id: str) -> list[Tool]:
        """The memory tools of ``user_id``'s scope."""
        return AutoMemoryTools(self.store.with_scope(user_id)).as_tools()

    async def flush(self, request: CompactionRequest, events: Sequence[SessionEvent]) -> None:
        """Let the model save the durable facts of ``events`` to the owner's memory.

        Raises:
            ChatError: the model call failed (``ToolLoopLimitExceeded`` when it kept calling
                tools past ``max_rounds``); the compaction logs it and goes on.
        """
        tools = self.tools_for(request.session.user_id)
        prompt: list[Message] = [
            SystemMessage(text=self.system_prompt),
            UserMessage(text=self.transcript(events)),
        ]
        await self.client.call(
            messages=prompt,
            tools=tools,
            max_tool_rounds=self.max_rounds,
            options=ChatOptions(max_completion_tokens=self.max_output_tokens),
        )

    def __repr__(self) -> str:
        return f"ModelMemoryFlush(model={self.client.model!r}, max_rounds={self.max_rounds!r})"
