"""``AutoMemoryToolsAdvisor``: long-term memory the model keeps itself, with six file tools.

Session memory holds this conversation; long-term memory holds the durable facts worth having
next week: who the user is, how they like to work, decisions about their projects. The model
curates it with the six memory tools (``MemoryView``, ``MemoryCreate``, ``MemoryStrReplace``,
``MemoryInsert``, ``MemoryDelete``, ``MemoryRename``, from
[`AutoMemoryTools`][asyncsession.tools.AutoMemoryTools]) over a
[`MemoryStore`][asyncsession.memory.MemoryStore], keeping an index in ``MEMORY.md``.

Give it to the client's ``advisors`` (around the turn, so the turn's tool loop runs its tools).
On every call the advisor:

- picks the store of the call's user (``store.with_scope(user_id)``): memories are per user and
  never global by accident — a call without a user id fails unless ``default_user_id`` is set
  (or ``per_user=False`` says the store is already scoped);
- appends the memory system prompt, with the root rendered in, to the first system message
  (or adds one), and the consolidation reminder when the trigger fires;
- offers the six tools on the request, leaving tools of the same name alone.

A call whose options disable tools (``tool_choice="none"``) passes through unchanged: the model
could not use the tools.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Final, TypeAlias

from .._checks import require_memory_store
from ..chat import Advisor, CallContext, ChatRequest
from ..events import utc_now
from ..exceptions import UsageError
from ..memory import MemoryStore
from ..messages import Message, SystemMessage
from ..tools import AutoMemoryTools

__all__ = ["AutoMemoryToolsAdvisor", "ConsolidationTrigger"]

ConsolidationTrigger: TypeAlias = Callable[[ChatRequest, datetime], bool | Awaitable[bool]]
"""Decides per call whether to remind the model to consolidate its memories: a function of the
request and the current time, sync or async."""

_PLACEHOLDER: Final = "{memories_root}"
CONSOLIDATION_REMINDER: Final = (
    "<system-reminder>Consolidate the long-term memory by summarizing and removing redundant "
    "information.</system-reminder>"
)
"""Appended to the system message when it is time to tidy the memory store."""


def _never(request: ChatRequest, now: datetime) -> bool:
    return False


class AutoMemoryToolsAdvisor(Advisor):
    """Give the model long-term memory: the memory prompt and the six memory tools.

    Args:
        store: where memories live. With ``per_user`` (the default) it is the base store whose
            ``with_scope(user_id)`` is taken per call.
        per_user: scope the store by the call's user id.
        default_user_id: the scope for calls without a user id; ``None`` makes such calls fail.
        memory_system_prompt: the prompt template; must contain ``{memories_root}``.
        consolidation_trigger: when it returns true, the consolidation reminder is added.
        clock: the time the trigger sees.

    Raises:
        UsageError: ``store`` is not a memory store, the prompt lacks the placeholder, or an
            argument is ``None``.
    """

    def __init__(
        self,
        store: MemoryStore,
        *,
        per_user: bool = True,
        default_user_id: str | None = None,
        memory_system_prompt: str = AutoMemoryTools.SYSTEM_PROMPT,
        consolidation_trigger: ConsolidationTrigger = _never,
        clock: Callable[[], datetime] = utc_now,
    ) -> None:
        if store is None:  # pyright: ignore[reportUnnecessaryComparison] - checked at run time
            raise UsageError("AutoMemoryToolsAdvisor needs a memory store")
        require_memory_store(store, "store")
        if memory_system_prompt is None or _PLACEHOLDER not in memory_system_prompt:  # pyright: ignore[reportUnnecessaryComparison]
            raise UsageError(
                f"memory_system_prompt must contain the {_PLACEHOLDER} placeholder, which is "
                "replaced by the memories root"
            )
        if consolidation_trigger is None:  # pyright: ignore[reportUnnecessaryComparison]
            raise UsageError("consolidation_trigger must be a function; omit it for 'never'")
        if default_user_id is not None and not default_user_id.strip():
            raise UsageError("default_user_id must be a non-empty string or None")
        self.store = store
        self.per_user = per_user
        self.default_user_id = default_user_id
        self.memory_system_prompt = memory_system_prompt
        self.consolidation_trigger = consolidation_trigger
        self._clock = clock

    def _store_for(self, ctx: CallContext) -> MemoryStore:
        if not self.per_user:
            return self.store
        user_id = ctx.user_id or self.default_user_id
        if user_id is None:
            raise UsageError(
                "AutoMemoryToolsAdvisor keeps memories per user, but the call has no user id: "
                "pass user_id=..., or set default_user_id on the advisor"
            )
        return self.store.with_scope(user_id)

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        """Add the memory prompt and the memory tools of the call's user."""
        if request.options.tool_choice == "none":
            return request
        store = self._store_for(ctx)
        addition = self.memory_system_prompt.replace(_PLACEHOLDER, store.root)
        due = self.consolidation_trigger(request, self._clock())
        if await due if inspect.isawaitable(due) else due:
            addition += "\n\n" + CONSOLIDATION_REMINDER
        messages = _with_system_addition(request.messages, addition)
        present = {t.name for t in request.tools}
        added = tuple(t for t in AutoMemoryTools(store).as_tools() if t.name not in present)
        return dataclasses.replace(request, messages=messages, tools=(*request.tools, *added))


def _with_system_addition(messages: tuple[Message, ...], addition: str) -> tuple[Message, ...]:
    for index, message in enumerate(messages):
        if isinstance(message, SystemMessage):
            extended = message.model_copy(
                update={"text": f"{message.text}\n\n{addition}", "parts": None}
            )
            return (*messages[:index], extended, *messages[index + 1 :])
    return (SystemMessage(text=addition), *messages)
