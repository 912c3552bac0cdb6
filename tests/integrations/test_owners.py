"""One ownership rule for every adapter: given a user id, another user's session is refused.

Alice's session is created through the service, as our chat client creates it. An adapter built
with ``user_id="mallory"`` raises `AccessDenied` for every read, append, clear, pop and compact
of it, sync and async, on both stores, and leaves it exactly as it was; built with
``user_id="alice"`` it works. ADK scopes sessions by user itself: another user's session is not
found, as ADK answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions.session import Session as AdkSession
from google.genai import types
from langchain_core.messages import HumanMessage
from pydantic_ai import ModelRequest

from asyncsession import CreateSessionRequest, SessionEvent
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.exceptions import AccessDenied
from asyncsession.integrations.google_adk import AdkSessionService
from asyncsession.integrations.langchain import LangChainHistory
from asyncsession.integrations.openai_agents import AgentsSession
from asyncsession.integrations.pydantic_ai import PydanticAIHistory
from asyncsession.messages import UserMessage
from asyncsession.service import SessionService

USER: Any = {"role": "user", "content": "mine now"}
COMPACT: Any = {"trigger": TurnCountTrigger(1), "strategy": SlidingWindowCompactionStrategy(1)}


async def alices_session(service: SessionService, session_id: str) -> list[SessionEvent]:
    """Alice's session with two of her messages; its whole log, to compare with later."""
    await service.create(CreateSessionRequest(id=session_id, user_id="alice"))
    await service.append_message(session_id, UserMessage(text="my secret"))
    await service.append_message(session_id, UserMessage(text="my plan"))
    return await service.get_events(session_id)


Call = Callable[[str, SessionService, str], Awaitable[object]]
"""One adapter call on a session (id, service, user id)."""


def langchain(method: str) -> Call:
    async def call(session_id: str, service: SessionService, user: str) -> object:
        history = LangChainHistory(session_id, service, user_id=user, **COMPACT)
        if method == "aget_messages":
            return await history.aget_messages()
        if method == "aadd_messages":
            return await history.aadd_messages([HumanMessage(content="mine now")])
        if method == "aclear":
            return await history.aclear()
        if method == "compact":
            return await history.compact()
        sync = {
            "messages": lambda: history.messages,
            "add_messages": lambda: history.add_messages([HumanMessage(content="mine now")]),
            "add_user_message": lambda: history.add_user_message("mine now"),
            "clear": history.clear,
        }[method]
        return await asyncio.to_thread(sync)

    return call


def pydantic_ai(method: str) -> Call:
    async def call(session_id: str, service: SessionService, user: str) -> object:
        history = PydanticAIHistory(session_id, service, user_id=user, **COMPACT)
        batch = [ModelRequest.user_text_prompt("mine now")]
        if method == "load":
            return await history.load()
        if method == "store":
            return await history.store(batch)
        if method == "compact":
            return await history.compact()
        if method == "load_sync":
            return await asyncio.to_thread(history.load_sync)
        return await asyncio.to_thread(history.store_sync, batch)

    return call


def agents(method: str) -> Call:
    async def call(session_id: str, service: SessionService, user: str) -> object:
        session = AgentsSession(session_id, service, user_id=user, **COMPACT)
        calls: dict[str, Callable[[], Awaitable[object]]] = {
            "get_items": session.get_items,
            "add_items": lambda: session.add_items([USER]),
            "pop_item": session.pop_item,
            "clear_session": session.clear_session,
            "compact": session.compact,
        }
        return await calls[method]()

    return call


CALLS = [
    *(
        pytest.param(langchain(m), id=f"langchain-{m}")
        for m in (
            "aget_messages",
            "aadd_messages",
            "aclear",
            "compact",
            "messages",
            "add_messages",
            "add_user_message",
            "clear",
        )
    ),
    *(
        pytest.param(pydantic_ai(m), id=f"pydantic_ai-{m}")
        for m in ("load", "store", "compact", "load_sync", "store_sync")
    ),
    *(
        pytest.param(agents(m), id=f"agents-{m}")
        for m in ("get_items", "add_items", "pop_item", "clear_session", "compact")
    ),
]


@pytest.mark.parametrize("call", CALLS)
async def test_another_users_session_is_refused_and_left_alone(
    service: SessionService, call: Call
) -> None:
    """Every read, append, clear, pop and compact of alice's session as mallory raises
    AccessDenied and changes nothing; as alice, the same call goes through."""
    before = await alices_session(service, "alices")
    with pytest.raises(AccessDenied) as refused:
        await call("alices", service, "mallory")
    assert refused.value.user_id == "mallory"
    assert await service.get_events("alices") == before
    await call("alices", service, "alice")
    found = await service.find_by_id("alices")
    assert found is None or found.user_id == "alice"  # a clear may delete it; never hand it over


async def test_a_session_created_meanwhile_by_another_user_is_refused(
    service: SessionService,
) -> None:
    """Each adapter object of mallory's found no session (its read was empty); alice created
    it since: the object's next write is refused (its creation finds the session taken and
    checks whose it is), and nothing is written."""
    langchain_history = LangChainHistory("meanwhile", service, user_id="mallory")
    pydantic_history = PydanticAIHistory("meanwhile", service, user_id="mallory")
    agents_session = AgentsSession("meanwhile", service, user_id="mallory")
    assert await langchain_history.aget_messages() == []
    assert await pydantic_history.load() == []
    assert await agents_session.get_items() == []
    before = await alices_session(service, "meanwhile")
    with pytest.raises(AccessDenied):
        await langchain_history.aadd_messages([HumanMessage(content="mine now")])
    with pytest.raises(AccessDenied):
        await pydantic_history.store([ModelRequest.user_text_prompt("mine now")])
    with pytest.raises(AccessDenied):
        await agents_session.add_items([USER])
    with pytest.raises(AccessDenied):
        await agents_session.pop_item()
    assert await service.get_events("meanwhile") == before


async def test_an_adapter_creates_its_users_session_which_others_cannot_use(
    service: SessionService,
) -> None:
    """A session an adapter creates belongs to its user, for every adapter."""
    await LangChainHistory("lc", service, user_id="alice").aadd_messages([HumanMessage("hi")])
    await PydanticAIHistory("pa", service, user_id="alice").store(
        [ModelRequest.user_text_prompt("hi")]
    )
    await AgentsSession("ag", service, user_id="alice").add_items([USER])
    for session_id in ("lc", "pa", "ag"):
        found = await service.find_by_id(session_id)
        assert found is not None
        assert found.user_id == "alice"
    with pytest.raises(AccessDenied):
        await LangChainHistory("pa", service, user_id="bob").aget_messages()
    with pytest.raises(AccessDenied):
        await AgentsSession("lc", service, user_id="bob").get_items()
    with pytest.raises(AccessDenied):
        await PydanticAIHistory("ag", service, user_id="bob").load()


async def test_without_a_user_id_any_session_is_used(service: SessionService) -> None:
    """An adapter given no user id is not guarded: it reads the session whoever owns it."""
    await alices_session(service, "open")
    assert len(await LangChainHistory("open", service).aget_messages()) == 2
    assert len(await AgentsSession("open", service).get_items()) == 2


async def test_adk_finds_only_its_users_sessions(service: SessionService) -> None:
    """ADK keeps sessions per user: mallory's view of alice's ADK session id is another
    session, and a session stored under an ADK id for another user (or without the ADK scope,
    written by another client) is not found: not read, not appended to, not deleted."""
    adk = AdkSessionService(service)
    await adk.create_session(app_name="app", user_id="alice", session_id="s", state={"k": 1})
    assert await adk.get_session(app_name="app", user_id="mallory", session_id="s") is None
    stale = AdkSession(id="s", app_name="app", user_id="mallory")
    content = types.Content(role="user", parts=[types.Part(text="mine now")])
    with pytest.raises(SessionNotFoundError):
        await adk.append_event(stale, Event(author="user", content=content))
    await adk.delete_session(app_name="app", user_id="mallory", session_id="s")
    alices = await adk.get_session(app_name="app", user_id="alice", session_id="s")
    assert alices is not None
    assert alices.state == {"k": 1}
    assert alices.events == []

    planted = adk.session_key("app", "alice", "planted")
    await service.create(CreateSessionRequest(id=planted, user_id="mallory"))
    await service.append_message(planted, UserMessage(text="read me"))
    before = await service.get_events(planted)
    assert await adk.get_session(app_name="app", user_id="alice", session_id="planted") is None
    assert (await adk.list_sessions(app_name="app", user_id="alice")).sessions[0].id == "s"
    planted_session = AdkSession(id="planted", app_name="app", user_id="alice")
    with pytest.raises(SessionNotFoundError):
        await adk.append_event(planted_session, Event(author="user", content=content))
    await adk.delete_session(app_name="app", user_id="alice", session_id="planted")
    assert await service.get_events(planted) == before
