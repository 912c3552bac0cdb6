"""`Tool`: a function the model can call, and the one place its arguments are checked.

A tool is API-neutral: a name, a description, the JSON schema of its arguments, `strict`,
`return_direct`, `idempotent`, `needs_approval`, and `invoke(arguments_json) -> str`. The
OpenAI edge turns it into a Chat Completions or Responses function tool; nothing here knows an
SDK type.

Schemas are never written by hand. `Tool.from_function` builds a pydantic model from a typed
signature (parameter descriptions from the docstring, Google, NumPy or Sphinx style);
`Tool.from_model` takes a pydantic model. Either way the model's JSON arguments are validated
against that model in `_validate`, and what does not validate (bad JSON, a wrong type, a
missing or an unknown field) comes back to the model as one ``"Error: Invalid arguments ..."``
text. This module imports nothing of the package but its exceptions, so any layer can use it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import re
import typing
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from functools import cache, partial
from typing import Any, Final, cast, overload

from griffe import Docstring, DocstringSection, DocstringSectionKind, Parser
from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from pydantic_core import to_json

from ..exceptions import ToolError, UsageError

__all__ = ["ApprovalPolicy", "Tool", "tool"]

logger = logging.getLogger("asyncsession.tools")

_TOOL_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
_STYLES: Final = (Parser.google, Parser.numpy, Parser.sphinx)

ApprovalPolicy = Callable[[dict[str, Any]], bool | Awaitable[bool]]
"""Decides per call, from its arguments, whether a tool call waits for approval."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Tool:
    """A tool the model can call.

    Build one with [`tool`][asyncsession.tools.tool], `Tool.from_function` or
    `Tool.from_model`; the constructor itself takes a `function` that parses the raw JSON
    arguments on its own, for the rare tool whose schema comes from elsewhere.

    Raises:
        UsageError: the name is not a valid tool name.
    """

    name: str
    """The model-facing name: letters, digits, ``_`` and ``-``, at most 64 characters."""
    description: str
    """What the tool does and when to use it, written for the model."""
    parameters: Mapping[str, Any]
    """The JSON schema of the arguments object. Tools built from one function or model share
    it: read it, copy it, never change it in place."""
    function: Callable[[str], Awaitable[str]]
    """Runs the tool: takes the arguments as the model wrote them (a JSON string) and returns
    the result text. It may raise `ToolError` to send the model an error text."""
    strict: bool = False
    """Ask the model for arguments that follow the schema exactly (OpenAI structured outputs)."""
    return_direct: bool = False
    """Return the result to the caller instead of sending it to the model: when every tool
    the model calls in a round is return-direct, the tool loop ends there, without another
    model call: the reply's ``finish_reason`` is ``RETURN_DIRECT`` and its ``tool_results``
    hold the results."""
    idempotent: bool = False
    """Whether running the tool twice with the same arguments does no harm. A turn taken over
    after a crash (a retry of its request id, or a ``resume``) runs again an idempotent tool
    whose run was recorded as started but whose result was not; any other tool is never run
    twice for one call: the model is told the run was interrupted instead."""
    needs_approval: bool | ApprovalPolicy = False
    """Whether a call of the tool waits for a person's approval: ``True``, or a function
    deciding per call: it gets the call's arguments (the JSON object the model wrote, ``{}``
    when it is not an object), sync or async, and answers ``True`` to pause the turn. A round
    with such a call stops the turn with a response listing the pending calls
    (``ChatResponse.pending_approvals``); ``resume`` continues it with the decisions."""

    def __post_init__(self) -> None:
        if not isinstance(self.needs_approval, bool) and not callable(self.needs_approval):
            raise UsageError(
                f"Tool {self.name!r}: needs_approval must be a bool or a function of the "
                f"call's arguments, not {self.needs_approval!r}"
            )
        if not _TOOL_NAME.fullmatch(self.name):
            raise UsageError(
                f"Invalid tool name {self.name!r}: use letters, digits, '_' and '-', "
                "at most 64 characters"
            )

    async def requires_approval(self, arguments: str) -> bool:
        """Whether this call (the model's raw JSON ``arguments``) waits for approval."""
        policy = self.needs_approval
        if isinstance(policy, bool):
            return policy
        try:
            parsed: object = json.loads(arguments or "{}")
        except ValueError:
            parsed = {}
        values = cast(dict[str, Any], parsed) if isinstance(parsed, dict) else {}
        decided = policy(values)
        if inspect.isawaitable(decided):
            decided = await decided
        return bool(decided)

    async def invoke(self, arguments: str) -> str:
        """Run the tool with the model's raw JSON arguments; the result text for the model.

        Arguments that do not validate, and a `ToolError` the tool raises, come back as a text
        starting with ``"Error: "``. Any other exception propagates: the tool loop reports it
        to the model and logs it with its traceback.
        """
        try:
            return await self.function(arguments)
        except ToolError as exc:
            logger.info("Tool %r refused a call: %s", self.name, exc)
            return f"Error: {exc}"

    @classmethod
    def from_function(
        cls,
        function: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        strict: bool = False,
        return_direct: bool = False,
        idempotent: bool = False,
        needs_approval: bool | ApprovalPolicy = False,
    ) -> Tool:
        """A tool from a typed Python function or bound method, sync or async.

        The parameters' type hints (``Annotated[..., Field(...)]`` included) and defaults make
        the schema; the docstring's prose before its first section becomes the description
        and its parameter section the parameter descriptions (Google, NumPy or Sphinx style).
        A sync function runs in a worker thread, so it cannot block the event loop. A string
        result is sent as is, anything else as JSON.

        Raises:
            UsageError: the function takes ``*args``/``**kwargs``, or the name is invalid.
        """
        tool_name = name or function.__name__
        documented, parameter_docs = _describe(inspect.getdoc(function))
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
                Field(default, description=parameter_docs.get(parameter.name)),
            )
        arguments_model: type[BaseModel] = create_model(
            f"{tool_name}_arguments", __config__=ConfigDict(extra="forbid"), **fields
        )
        is_async = inspect.iscoroutinefunction(function)

        async def call(**values: Any) -> Any:
            args = [values.pop(key) for key in positional]
            if is_async:
                return await function(*args, **values)
            return await asyncio.to_thread(function, *args, **values)

        return cls.from_model(
            tool_name,
            description if description is not None else documented,
            arguments_model,
            call,
            strict=strict,
            return_direct=return_direct,
            idempotent=idempotent,
            needs_approval=needs_approval,
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
        return_direct: bool = False,
        idempotent: bool = False,
        needs_approval: bool | ApprovalPolicy = False,
    ) -> Tool:
        """A tool whose arguments are a pydantic model; `function` gets its fields as keywords.

        The field descriptions (``Field(description=...)``) reach the schema; the model's own
        title and docstring do not, they are for developers.

        Raises:
            UsageError: the name is invalid.
        """

        async def run(raw: str) -> str:
            return _as_text(await function(**_validate(name, arguments, raw)))

        return cls(
            name=name,
            description=description,
            parameters=_schema(arguments),
            function=run,
            strict=strict,
            return_direct=return_direct,
            idempotent=idempotent,
            needs_approval=needs_approval,
        )


def _score(sections: list[DocstringSection]) -> tuple[bool, int]:
    has_parameters = any(s.kind is DocstringSectionKind.parameters for s in sections)
    return has_parameters, len(sections)


def _describe(doc: str | None) -> tuple[str, dict[str, str]]:
    """A docstring's prose before its first section (the tool's description) and its parameter
    descriptions, by name. Google, NumPy and Sphinx style are recognised: the docstring is read
    in each style and the reading that finds the most sections wins (ties go to Google)."""
    if not doc or not doc.strip():
        return "", {}
    # The leading line break lets a docstring open with its parameters section.
    docstring = Docstring(f"\n{doc}", lineno=1)
    # Each style in turn rather than griffe's style heuristics, which miss a docstring that
    # ends on its only Sphinx field. warnings=False: griffe would log every parameter that has
    # no type in the docstring, and here the types come from the signature.
    readings = [docstring.parse(style, warnings=False) for style in _STYLES]
    sections = max(readings, key=_score)  # max keeps the first of equals: Google
    description = ""
    parameters: dict[str, str] = {}
    for index, section in enumerate(sections):
        if section.kind is DocstringSectionKind.text and index == 0:
            description = str(section.value).strip()
        elif section.kind is DocstringSectionKind.parameters:
            for parameter in section.value:
                parameters[parameter.name.lstrip("*")] = str(parameter.description).strip()
    return description, parameters


@cache
def _schema(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of a tool's arguments, without pydantic's generated titles.

    Cached per model: the memory and recall tools are built on every call.
    """
    schema = model.model_json_schema()
    schema.pop("title", None)
    schema.pop("description", None)
    properties: dict[str, dict[str, Any]] = schema.get("properties", {})
    for prop in properties.values():
        prop.pop("title", None)
    return schema


def _validate(name: str, model: type[BaseModel], arguments: str) -> dict[str, Any]:
    """The model's JSON arguments, validated: the one place argument errors are worded."""
    try:
        validated = model.model_validate_json(arguments.strip() or "{}")
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(part) for part in error['loc']) or 'arguments'}: {error['msg']}"
            for error in exc.errors(include_url=False)
        )
        raise ToolError(f"Invalid arguments for tool {name!r}: {problems}") from exc
    return {key: getattr(validated, key) for key in type(validated).model_fields}


def _as_text(result: object) -> str:
    if isinstance(result, str):
        return result
    return to_json(result).decode()


@overload
def tool(function: Callable[..., Any], /) -> Tool: ...
@overload
def tool(
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    return_direct: bool = False,
    idempotent: bool = False,
    needs_approval: bool | ApprovalPolicy = False,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    function: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    strict: bool = False,
    return_direct: bool = False,
    idempotent: bool = False,
    needs_approval: bool | ApprovalPolicy = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Make a [`Tool`][asyncsession.tools.Tool] of a typed function: ``@tool``, ``@tool(...)``.

    See `Tool.from_function` for how the schema and the description are found;
    ``return_direct=True`` makes a [return-direct][asyncsession.tools.Tool.return_direct] tool,
    ``idempotent=True`` one a takeover may run again, ``needs_approval`` one that waits for a
    person (see [`Tool`][asyncsession.tools.Tool]).
    """
    decorate = partial(
        Tool.from_function,
        name=name,
        description=description,
        strict=strict,
        return_direct=return_direct,
        idempotent=idempotent,
        needs_approval=needs_approval,
    )
    return decorate if function is None else decorate(function)
