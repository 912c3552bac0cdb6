"""`ToolCallingAdvisor`: the tool loop.

While the model's reply asks for tool calls, the loop runs them (several at once when the model
calls several) and calls the rest of the chain again with the calls and their results appended.
The tools are [`Tool`][asyncsession.tools.Tool]s; arguments that do not validate, a tool that
raises, and a call of a tool nobody offers all become an ``"Error: ..."`` result the model can
react to. Nothing is raised to the caller but
[`ToolLoopLimitExceeded`][asyncsession.exceptions.ToolLoopLimitExceeded].

When every tool the model calls in a round is return-direct
([`Tool.return_direct`][asyncsession.tools.Tool.return_direct]), the loop runs them and ends
without another model call: the response carries their results in ``tool_results`` (and as its
``text``), and a stream ends with one chunk per result. A round that also calls any other tool
(or a tool nobody offers) sends every result to the model as usual.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from typing import Any, Final

from .._telemetry import tool_span
from ..chat import ChatChunk, ChatRequest, ChatResponse, Usage
from ..exceptions import ToolLoopLimitExceeded, UsageError
from ..messages import ToolCall, ToolResponse, ToolResponseMessage
from ..tools import Tool
from ._returned import RETURN_DIRECT, result_chunks
from .base import TOOL_LOOP_ORDER, CallContext, CallNext, StreamNext

__all__ = ["ToolCallingAdvisor"]

logger: logging.Logger = logging.getLogger("asyncsession.advisors")


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else Tool.from_function(item)


def _add_usage(total: Usage | None, usage: Usage | None) -> Usage | None:
    if usage is None:
        return total
    return usage if total is None else total + usage


def _returns_direct(calls: Sequence[ToolCall], registry: Mapping[str, Tool]) -> bool:
    """Whether every call of the round is of a return-direct tool (Spring AI's rule)."""
    return all(
        (found := registry.get(call.name)) is not None and found.return_direct for call in calls
    )


def _returned(
    response: ChatResponse, results: ToolResponseMessage, usage: Usage | None
) -> ChatResponse:
    """The loop's response when return-direct tools answered ``response``."""
    return dataclasses.replace(
        response, usage=usage, finish_reason=RETURN_DIRECT, tool_results=results
    )


class ToolCallingAdvisor:
    """The tool loop: run the tools the model asks for, call the model again, until it answers.

    Advisors further in (the session memory advisor by default) run once per round; advisors
    further out see one call. The request's own ``tools`` are offered alongside this advisor's
    (on a name clash the request's tool wins). The final response carries the usage of every
    round added up.

    When every tool called in a round is return-direct, the loop ends after running them: the
    response is the model's message that asked for them, with the results in ``tool_results``,
    ``finish_reason`` ``"return_direct"`` and the results' data as ``text``; a stream passes on
    the round's chunks, then one chunk per result (``ChatChunk.tool_result``). A result is
    returned as the tool gave it, an ``"Error: ..."`` text included. A
    ``SessionTurnAdvisor`` stores the results after the stored tool call, so the next prompt
    holds both.

    Args:
        tools: the tools, or typed functions to make tools of (`Tool.from_function`).
        max_rounds: the most model calls per turn; if the reply of the last one still asks
            for tools that are not all return-direct, the loop raises
            [`ToolLoopLimitExceeded`][asyncsession.exceptions.ToolLoopLimitExceeded].
        order: the position in the chain.

    Raises:
        UsageError: two tools share a name, or ``max_rounds`` is below 1.
    """

    DEFAULT_ORDER: Final = TOOL_LOOP_ORDER
    """The default order: inside the turn advisor, around the memory advisor."""

    runs_tool_calls: Final = True
    """Declares the `ToolLoop` capability: advisors that add tools add them to this chain."""

    def __init__(
        self,
        tools: Iterable[Tool | Callable[..., Any]] = (),
        *,
        max_rounds: int = 10,
        order: int = DEFAULT_ORDER,
    ) -> None:
        if max_rounds < 1:
            raise UsageError(f"max_rounds must be at least 1, not {max_rounds!r}")
        self.tools: tuple[Tool, ...] = tuple(_as_tool(item) for item in tools)
        """The tools this advisor offers on every request."""
        names = [t.name for t in self.tools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise UsageError(f"Tool names must be unique; repeated: {duplicates!r}")
        self.max_rounds = max_rounds
        """The most model calls per turn."""
        self.order = order
        """The position in the chain."""

    def _prepare(self, request: ChatRequest) -> tuple[ChatRequest, dict[str, Tool]]:
        registry = {t.name: t for t in request.tools}
        for own in self.tools:
            registry.setdefault(own.name, own)
        return dataclasses.replace(request, tools=tuple(registry.values())), registry

    async def call(
        self, ctx: CallContext, request: ChatRequest, call_next: CallNext
    ) -> ChatResponse:
        """Call, run the requested tools, and call again until the reply asks for none."""
        request, registry = self._prepare(request)
        usage: Usage | None = None
        for round_number in range(1, self.max_rounds + 1):
            response = await call_next(ctx, request)
            usage = _add_usage(usage, response.usage)
            if not response.has_tool_calls:
                return dataclasses.replace(response, usage=usage)
            direct = _returns_direct(response.tool_calls, registry)
            if round_number == self.max_rounds and not direct:
                break
            results = await self._run_tools(response.tool_calls, registry)
            if direct:
                return _returned(response, results, usage)
            request = request.with_messages([*request.messages, response.message, results])
        raise ToolLoopLimitExceeded(self.max_rounds)

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        """The call loop, with every round's chunks passed on as they arrive."""
        request, registry = self._prepare(request)
        usage: Usage | None = None
        for round_number in range(1, self.max_rounds + 1):
            chunks = call_next(ctx, request)
            async with aclosing(chunks):
                async for chunk in chunks:
                    yield chunk
            response = chunks.response
            usage = _add_usage(usage, response.usage)
            if not response.has_tool_calls:
                chunks.response = dataclasses.replace(response, usage=usage)
                return
            direct = _returns_direct(response.tool_calls, registry)
            if round_number == self.max_rounds and not direct:
                break
            results = await self._run_tools(response.tool_calls, registry)
            if direct:
                chunks.response = _returned(response, results, usage)
                for chunk in result_chunks(response, results):
                    yield chunk
                return
            request = request.with_messages([*request.messages, response.message, results])
        raise ToolLoopLimitExceeded(self.max_rounds)

    async def _run_tools(
        self, calls: Sequence[ToolCall], registry: Mapping[str, Tool]
    ) -> ToolResponseMessage:
        """Run the calls, concurrently when there are several; results in call order."""
        if len(calls) == 1:
            results = [await _run_one(calls[0], registry)]
        else:
            async with asyncio.TaskGroup() as group:
                tasks = [group.create_task(_run_one(call, registry)) for call in calls]
            results = [task.result() for task in tasks]
        return ToolResponseMessage(
            responses=tuple(
                ToolResponse(id=call.id, name=call.name, data=result)
                for call, result in zip(calls, results, strict=True)
            )
        )


async def _run_one(call: ToolCall, registry: Mapping[str, Tool]) -> str:
    """One call's result; a failure becomes an error text for the model, never an exception."""
    found = registry.get(call.name)
    if found is None:
        known = ", ".join(sorted(registry)) or "none"
        return f"Error: there is no tool named {call.name!r} (available: {known})"
    try:
        with tool_span(call.name, call.id):  # the error, if any, is on the span too
            return await found.invoke(call.arguments)
    except Exception as exc:
        logger.warning("Tool %r failed on call %r", call.name, call.id, exc_info=True)
        return f"Error: tool {call.name!r} failed: {type(exc).__name__}: {exc}"
