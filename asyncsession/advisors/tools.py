"""Tools the model can call, and ``ToolCallingAdvisor``: the tool loop.

A :class:`Tool` is a name, a description, the JSON schema of its arguments and an async
function that takes the arguments as the model wrote them (a JSON string) and returns the
result text. Make one from a typed Python function with :func:`tool` /
:meth:`Tool.from_function` (the schema comes from the type hints, the arguments are validated
by pydantic), or build one directly from parts you already have::

    Tool(name=spec.name, description=spec.description,
         parameters=spec.json_schema, function=spec.invoke)

:class:`ToolCallingAdvisor` runs the loop: while the model's reply asks for tool calls, it runs
them (several at once when the model calls several) and calls the rest of the chain again with
the calls and their results appended. A tool that raises, or arguments that do not validate,
become an ``"Error: ..."`` result the model can react to; nothing is raised to the caller.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import logging
import re
import typing
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, Final, overload

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json

from .._telemetry import tool_span
from ..chat import ChatChunk, ChatRequest, ChatResponse, Usage
from ..exceptions import ToolError, ToolLoopLimitExceeded, UsageError
from ..messages import ToolCall, ToolResponse, ToolResponseMessage
from .base import HIGHEST_PRECEDENCE, CallContext, CallNext, StreamNext

__all__ = ["Tool", "ToolCallingAdvisor", "tool"]

logger = logging.getLogger("asyncsession.advisors")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call."""

    name: str
    """The model-facing name: letters, digits, ``_`` and ``-``, at most 64 characters."""
    description: str
    """What the tool does and when to use it, written for the model."""
    parameters: Mapping[str, Any]
    """The JSON schema of the arguments object."""
    function: Callable[[str], Awaitable[str]]
    """Runs the tool: takes the arguments as the model wrote them (a JSON string) and returns
    the result text. Raise :class:`~asyncsession.exceptions.ToolError` to send the model an
    error message of your own."""
    strict: bool = False
    """Ask the model for arguments that follow the schema exactly (OpenAI structured outputs)."""

    def __post_init__(self) -> None:
        if not _TOOL_NAME.fullmatch(self.name):
            raise UsageError(
                f"Invalid tool name {self.name!r}: use letters, digits, '_' and '-', "
                "at most 64 characters"
            )

    async def invoke(self, arguments: str) -> str:
        """Run the tool with the model's raw arguments."""
        return await self.function(arguments)

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool = False,
    ) -> Tool:
        """A tool from a typed Python function, sync or async.

        The parameters' type hints and defaults make the schema, the docstring's first
        paragraph the description and its ``Args:`` section the parameter descriptions. A sync
        function runs in a worker thread, so it cannot block the event loop. The return value
        is sent as is when it is a string, else as JSON.

        Raises:
            UsageError: the function takes ``*args``/``**kwargs``, or the name is invalid.
        """
        tool_name = name or function.__name__
        summary, arg_docs = _parse_docstring(inspect.getdoc(function) or "")
        signature = inspect.signature(function)
        hints = typing.get_type_hints(function, include_extras=True)
        fields: dict[str, Any] = {}
        positional: list[str] = []
        for parameter in signature.parameters.values():
            if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD):
                raise UsageError(f"Tool {tool_name!r}: *args and **kwargs cannot be described")
            if parameter.kind is parameter.POSITIONAL_ONLY:
                positional.append(parameter.name)
            default = ... if parameter.default is parameter.empty else parameter.default
            fields[parameter.name] = (
                hints.get(parameter.name, Any),
                Field(default, description=arg_docs.get(parameter.name)),
            )
        arguments_model: type[BaseModel] = create_model(
            f"{tool_name}_arguments",
            __config__=ConfigDict(extra="forbid"),
            **fields,
        )
        is_async = inspect.iscoroutinefunction(function)

        async def run(arguments: str) -> str:
            values = _validate(tool_name, arguments_model, arguments)
            args = [values.pop(key) for key in positional]
            if is_async:
                result = await function(*args, **values)
            else:
                result = await asyncio.to_thread(function, *args, **values)
            return _as_text(result)

        return cls(
            name=tool_name,
            description=description if description is not None else summary,
            parameters=arguments_model.model_json_schema(),
            function=run,
            strict=strict,
        )

    @classmethod
    def from_model(
        cls,
        name: str,
        description: str,
        arguments: type[BaseModel],
        function: Callable[..., Awaitable[Any]],
        *,
        strict: bool = False,
    ) -> Tool:
        """A tool whose arguments are a pydantic model; ``function`` gets them as keywords."""

        async def run(raw: str) -> str:
            values = _validate(name, arguments, raw)
            return _as_text(await function(**values))

        return cls(
            name=name,
            description=description,
            parameters=arguments.model_json_schema(),
            function=run,
            strict=strict,
        )


def _validate(name: str, model: type[BaseModel], arguments: str) -> dict[str, Any]:
    try:
        validated = model.model_validate_json(arguments.strip() or "{}")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in error['loc']) or 'arguments'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ToolError(f"Invalid arguments for tool {name!r}: {problems}") from exc
    return {key: getattr(validated, key) for key in type(validated).model_fields}


def _as_text(result: object) -> str:
    if isinstance(result, str):
        return result
    return to_json(result).decode()


def _parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """The first paragraph, and the descriptions of a Google-style ``Args:`` section."""
    paragraphs = doc.split("\n\n")
    summary = " ".join(paragraphs[0].split()) if paragraphs and paragraphs[0] else ""
    if summary.rstrip(":") in ("Args", "Arguments"):
        summary = ""
    args: dict[str, str] = {}
    lines = doc.splitlines()
    in_args = False
    current: str | None = None
    for line in lines:
        stripped = line.strip()
        if stripped in ("Args:", "Arguments:"):
            in_args = True
            continue
        if not in_args:
            continue
        if stripped.endswith(":") and not line.startswith((" ", "\t")):
            break  # the next section
        match = _ARG_LINE.match(line)
        if match and len(line) - len(line.lstrip()) <= 4:
            current = str(match.group(1)).lstrip("*")
            args[current] = match.group(2).strip()
        elif current is not None and stripped:
            args[current] = f"{args[current]} {stripped}".strip()
    return summary, args


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *, name: str | None = None, description: str | None = None, strict: bool = False
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a :class:`Tool` of a typed function: ``@tool`` or ``@tool(name=...)``."""
    if function is not None:
        return Tool.from_function(function)

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(function, name=name, description=description, strict=strict)

    return decorate


def _as_tool(item: Tool | Callable[..., Any]) -> Tool:
    return item if isinstance(item, Tool) else Tool.from_function(item)


def _add_usage(total: Usage | None, usage: Usage | None) -> Usage | None:
    if usage is None:
        return total
    return usage if total is None else total + usage


class ToolCallingAdvisor:
    """The tool loop: run the tools the model asks for, call the model again, until it answers.

    Advisors further in (the session memory advisor by default) run once per round; advisors
    further out see one call. The request's own ``tools`` are offered alongside this advisor's
    (on a name clash the request's tool wins). The final response carries the usage of every
    round added up.

    Args:
        tools: the tools, or typed functions to make tools of.
        max_rounds: the most model calls per turn; if the reply of the last one still asks
            for tools, the loop raises :class:`~asyncsession.exceptions.ToolLoopLimitExceeded`.
        order: the position in the chain.

    Raises:
        UsageError: two tools share a name, or ``max_rounds`` is below 1.
    """

    DEFAULT_ORDER: Final = HIGHEST_PRECEDENCE + 300
    """The default order: inside the turn advisor, around the memory advisor."""

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
            if round_number == self.max_rounds:
                break
            results = await self._run_tools(response.tool_calls, registry)
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
            if round_number == self.max_rounds:
                break
            results = await self._run_tools(response.tool_calls, registry)
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
    except ToolError as exc:
        logger.info("Tool %r refused call %r: %s", call.name, call.id, exc)
        return f"Error: {exc}"
    except Exception as exc:
        logger.warning("Tool %r failed on call %r", call.name, call.id, exc_info=True)
        return f"Error: tool {call.name!r} failed: {type(exc).__name__}: {exc}"
