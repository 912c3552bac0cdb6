"""Values of the wrong kind at the public API are answered in our words.

The walk takes every public class and function of every public module's ``__all__`` (the
entry points ``tests/core/test_wrong_types.py`` walks) and the public methods of the objects
users call most (a service, the chat clients), and passes, one parameter at a time, the
mistakes users make with each kind of parameter:

- a class where an instance belongs (``DefaultSessionService(MongoSessionRepository)``,
  ``advisors=SessionRecallAdvisor``);
- a number where a filter belongs (``get_events(session_id, 5)``);
- ``None`` or a string where a model belongs (a message, an event, a request);
- a closed OpenAI client.

Every other parameter gets a valid value. The answer must be one of ours (``UsageError``), never
a raw ``AttributeError`` or ``TypeError`` from deep inside.
"""

from __future__ import annotations

import asyncio
import collections.abc
import dataclasses
import enum
import inspect
import types
import typing
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pydantic
import pytest
from openai import AsyncOpenAI
from test_wrong_types import EXEMPT, EXEMPT_MODULES, _entry_points

import asyncsession
from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    SessionEvent,
    UsageError,
    UserMessage,
)
from asyncsession.exceptions import AsyncSessionError
from asyncsession.filters import EventQuery
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

Kind = str
"""The kind of mistake: ``class``, ``number-for-filter``, ``none-for-model``,
``text-for-model``, ``closed-client``."""


def _open_client() -> AsyncOpenAI:
    return AsyncOpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")


def _closed_client() -> AsyncOpenAI:
    client = _open_client()
    asyncio.run(client.close())
    return client


def _service() -> DefaultSessionService:
    return DefaultSessionService(InMemorySessionRepository())


# Valid values by the class a parameter's annotation names (after ``| None`` is dropped).
VALID: dict[object, Callable[[], object]] = {
    str: lambda: "s",
    int: lambda: 1,
    float: lambda: 1.0,
    bool: lambda: False,
    timedelta: lambda: timedelta(seconds=1),
    datetime: lambda: asyncsession.events.utc_now(),
    EventFilter: EventFilter.all,
    EventQuery: lambda: EventQuery(text="x"),
    asyncsession.SessionService: _service,
    asyncsession.SessionRepository: InMemorySessionRepository,
    AsyncOpenAI: _open_client,
    asyncsession.Message: lambda: UserMessage(text="hi"),
    UserMessage: lambda: UserMessage(text="hi"),
    SessionEvent: lambda: SessionEvent(session_id="s", message=UserMessage(text="hi")),
    CreateSessionRequest: lambda: CreateSessionRequest(id="s", user_id="u"),
}

_PLAIN = (str, int, float, bool, bytes, type(None), object, typing.Any)


def _classes(annotation: object) -> list[object]:
    """The classes an annotation names, ``Optional`` and unions flattened."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [c for arg in typing.get_args(annotation) for c in _classes(arg)]
    if origin is typing.Annotated:
        return _classes(typing.get_args(annotation)[0])
    return [annotation]


def _is_model(value: object) -> bool:
    return inspect.isclass(value) and (
        issubclass(value, (pydantic.BaseModel, enum.Enum)) or dataclasses.is_dataclass(value)
    )


def _is_instance_kind(value: object) -> bool:
    """A class of ours or of the SDK that an instance of is expected (not plain data)."""
    if not inspect.isclass(value) or value in _PLAIN:
        return False
    module = value.__module__
    return module.startswith(("asyncsession", "openai")) and not _is_model(value)


def _mistakes(annotation: object, required: bool) -> list[tuple[Kind, object]]:
    """The wrong values to try for a parameter of this annotation."""
    classes = _classes(annotation)
    found: list[tuple[Kind, object]] = []
    if any(c in (EventFilter, EventQuery) for c in classes):
        found.append(("number-for-filter", 5))
    if AsyncOpenAI in classes:
        found.append(("closed-client", _closed_client()))
    instance_kinds = [c for c in classes if _is_instance_kind(c)]
    if instance_kinds:
        found.append(("class", instance_kinds[0]))
    # an iterable of instances (advisors=..., tools=...) given the class itself
    for c in classes:
        origin = typing.get_origin(c)
        if origin in (collections.abc.Iterable, collections.abc.Sequence):
            items = [i for arg in typing.get_args(c) for i in _classes(arg)]
            kinds = [i for i in items if _is_instance_kind(i)]
            if kinds:
                found.append(("class", kinds[0]))
    models = [c for c in classes if _is_model(c) and not issubclass(c, enum.Enum)]  # type: ignore[arg-type]
    if models and required and type(None) not in classes:
        found.append(("none-for-model", None))
        if str not in classes:
            found.append(("text-for-model", "text"))
    return found


def _valid(annotation: object) -> object:
    """A valid value for the annotation, or raise ``LookupError`` when the walk has none."""
    for c in _classes(annotation):
        if c in VALID:
            return VALID[c]()
    raise LookupError(annotation)


def _hints(target: Callable[..., Any]) -> dict[str, Any]:
    try:
        return typing.get_type_hints(target)
    except NameError:  # a name only imported for type checking
        return {}


def _cases(name: str, target: Callable[..., Any]) -> list[tuple[str, Callable[[], object]]]:
    """One call per (parameter, mistake): that parameter wrong, the required others valid."""
    hints = _hints(target.__init__ if inspect.isclass(target) else target)
    params = [
        p
        for p in inspect.signature(target).parameters.values()
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and p.name != "self"
    ]
    cases: list[tuple[str, Callable[[], object]]] = []
    for wrong in params:
        annotation = hints.get(wrong.name, wrong.annotation)
        for kind, value in _mistakes(annotation, wrong.default is wrong.empty):
            try:
                args, kwargs = _arguments(params, hints, wrong.name, value)
            except LookupError:
                continue  # another required parameter the walk cannot fill
            label = f"{name}({wrong.name}=<{kind}>)"
            cases.append((label, _bind(target, args, kwargs)))
    return cases


def _arguments(
    params: list[inspect.Parameter], hints: dict[str, Any], wrong: str, value: object
) -> tuple[list[object], dict[str, object]]:
    args: list[object] = []
    kwargs: dict[str, object] = {}
    for p in params:
        if p.name == wrong:
            given = value
        elif p.default is p.empty:
            given = _valid(hints.get(p.name, p.annotation))
        else:
            continue
        if p.kind is p.KEYWORD_ONLY or (p.name == wrong and p.default is not p.empty):
            kwargs[p.name] = given
        else:
            args.append(given)
    return args, kwargs


def _bind(
    target: Callable[..., Any], args: list[object], kwargs: dict[str, object]
) -> Callable[[], object]:
    return lambda: target(*args, **kwargs)


def _answer(call: Callable[[], object]) -> str:
    try:
        result = call()
        if inspect.isawaitable(result):
            asyncio.run(_awaited(result))
    except AsyncSessionError as exc:
        return "ours" if isinstance(exc, UsageError) else f"ours, not a UsageError: {exc!r}"
    except Exception as exc:  # the walk records what escaped
        return f"{type(exc).__name__}: {exc}"
    return "accepted"


async def _awaited(result: typing.Awaitable[object]) -> object:
    return await result


def _exempt(name: str, value: Callable[..., Any]) -> bool:
    if any(name.startswith(prefix + ".") for prefix in EXEMPT_MODULES):
        return True
    return (inspect.isclass(value) and _is_model(value)) or name in EXEMPT


def _methods() -> dict[str, Callable[..., Any]]:
    """The public methods of a service and of each chat client, bound."""
    found: dict[str, Callable[..., Any]] = {}
    service = _service()
    for attr, value in inspect.getmembers(service, inspect.ismethod):
        if not attr.startswith("_"):
            found[f"DefaultSessionService.{attr}"] = value
    for client_class in (ChatClient, ResponsesClient):
        client = client_class(_open_client(), model="m", sessions=_service())
        for attr in ("call", "stream"):
            found[f"{client_class.__name__}.{attr}"] = getattr(client, attr)
    return found


def _walk() -> dict[str, str]:
    answers: dict[str, str] = {}
    targets = {n: v for n, v in _entry_points().items() if not _exempt(n, v)}
    targets.update(_methods())
    for name, target in sorted(targets.items()):
        for label, call in _cases(name, target):
            answers[label] = _answer(call)
    return answers


def test_wrong_kinds_at_the_public_api_are_our_errors() -> None:
    """A class for an instance, a number for a filter, ``None`` or text for a model, a closed
    client: each is refused with our UsageError at the call."""
    answers = _walk()
    assert {label: a for label, a in answers.items() if a != "ours"} == {}
    kinds = {label.rsplit("<", 1)[1].rstrip(">)") for label in answers}
    assert kinds == {
        "class",
        "number-for-filter",
        "none-for-model",
        "text-for-model",
        "closed-client",
    }
    # The cases of the issue, by name, among those the walk reached.
    for case in (
        "DefaultSessionService.get_events(filter=<number-for-filter>)",
        "asyncsession.service.DefaultSessionService(repository=<class>)",
        "asyncsession.openai.ChatClient(advisors=<class>)",
        "asyncsession.openai.ChatClient(openai_client=<closed-client>)",
    ):
        assert case in answers, sorted(answers)
    assert len(answers) >= 60


@pytest.mark.parametrize("stream", [False, True], ids=["call", "stream"])
async def test_a_call_after_the_model_client_closed_stores_nothing(stream: bool) -> None:
    """A call on a client whose ``AsyncOpenAI`` was closed is refused before the question is
    stored; the session is not even created."""
    service = _service()
    async with ScriptedOpenAIServer() as server:
        openai_client = server.client()
        chat = ChatClient(openai_client, model="m", sessions=service)
        server.enqueue(ScriptedReply.text("first"))
        assert (await chat.call("one", session_id="s")).text == "first"
        await openai_client.close()
        with pytest.raises(UsageError, match="openai_client is closed"):
            if stream:
                async with chat.stream("two", session_id="s") as chunks:
                    async for _ in chunks:
                        pass
            else:
                await chat.call("two", session_id="s")
        with pytest.raises(UsageError, match="openai_client is closed"):
            await chat.call("three", session_id="new")
    assert [m.text for m in await service.get_messages("s")] == ["one", "first"]
    assert await service.find_by_id("new") is None


def test_the_issues_cases_name_what_to_pass() -> None:
    """The messages of the issue's four cases say what was wrong and what to pass."""
    from asyncsession.advisors import SessionRecallAdvisor
    from asyncsession.exceptions import UsageError
    from asyncsession.repository.mongo import MongoSessionRepository

    wrong: Any = 5
    with pytest.raises(UsageError, match=r"filter must be an EventFilter .*not 5"):
        asyncio.run(_service().get_events("s", wrong))
    klass: Any = MongoSessionRepository
    with pytest.raises(UsageError, match=r"not the class MongoSessionRepository itself"):
        DefaultSessionService(klass)
    advisor: Any = SessionRecallAdvisor
    with pytest.raises(UsageError, match=r"advisors must be a list of advisor instances"):
        ChatClient(_open_client(), model="m", advisors=advisor)
    with pytest.raises(UsageError, match=r"advisors\[\] .*class SessionRecallAdvisor"):
        ChatClient(_open_client(), model="m", advisors=[advisor])
    with pytest.raises(UsageError, match="openai_client is closed"):
        ChatClient(_closed_client(), model="m")
