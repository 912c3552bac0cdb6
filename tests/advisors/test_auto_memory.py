"""AutoMemoryToolsAdvisor: the memory prompt and tools per user, and memories across sessions."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import openai
import pytest
from chat_support import MODEL, turn

from asyncsession import DefaultSessionService, SystemMessage, Tool, UsageError
from asyncsession.advisors import AutoMemoryToolsAdvisor
from asyncsession.advisors._auto_memory import CONSOLIDATION_REMINDER
from asyncsession.chat import ChatOptions
from asyncsession.memory import DirectoryMemoryStore
from asyncsession.openai import ChatClient
from asyncsession.testing import FakeClock, ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from asyncsession.tools._memory import MEMORY_TOOL_NAMES


def _client(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    memory: AutoMemoryToolsAdvisor,
    *,
    system: str | None = "You are helpful.",
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        advisors=[memory],
        default_messages=[SystemMessage(text=system)] if system else [],
    )


def test_the_prompt_must_carry_the_placeholder(tmp_path: Path) -> None:
    """A custom prompt without ``{memories_root}`` is refused when the advisor is built."""
    store = DirectoryMemoryStore(tmp_path, scope="base")
    with pytest.raises(UsageError, match="memories_root"):
        AutoMemoryToolsAdvisor(store, memory_system_prompt="remember things")
    with pytest.raises(UsageError):
        AutoMemoryToolsAdvisor(store, consolidation_trigger=None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        AutoMemoryToolsAdvisor(None)  # type: ignore[arg-type]
    with pytest.raises(UsageError):
        AutoMemoryToolsAdvisor(store, default_user_id=" ")


async def test_the_prompt_and_the_six_tools_reach_the_model(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The memory prompt with the user's root joins the system message; six tools go out."""
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    server.enqueue(ScriptedReply.text("hi"))
    await _client(openai_client, service, memory).call("hello", **turn("s1", "alice"))
    sent = server.requests[0]
    system = sent.messages[0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are helpful.\n\n")
    assert str(tmp_path / "alice") in system["content"]
    assert CONSOLIDATION_REMINDER not in system["content"]
    assert [t["function"]["name"] for t in sent.tools] == list(MEMORY_TOOL_NAMES)


async def test_a_system_message_is_added_when_there_is_none(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Without a system message the memory prompt becomes the first one."""
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    server.enqueue(ScriptedReply.text("hi"))
    await _client(openai_client, service, memory, system=None).call("hello", **turn("s1", "alice"))
    assert server.requests[0].messages[0]["role"] == "system"
    assert "MEMORY.md" in server.requests[0].messages[0]["content"]


async def test_the_consolidation_reminder_follows_its_trigger(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The trigger sees the request and the clock's time; when it fires the reminder is added."""
    seen: list[datetime] = []

    def every_other(request: object, now: datetime) -> bool:
        seen.append(now)
        return len(seen) % 2 == 0

    clock = FakeClock(datetime(2026, 5, 1, tzinfo=UTC))
    memory = AutoMemoryToolsAdvisor(
        DirectoryMemoryStore(tmp_path, scope="base"), consolidation_trigger=every_other, clock=clock
    )
    client = _client(openai_client, service, memory)
    for _ in range(2):
        server.enqueue(ScriptedReply.text("ok"))
        await client.call("hello", **turn("s1", "alice"))
    first, second = (r.messages[0]["content"] for r in server.requests)
    assert CONSOLIDATION_REMINDER not in first
    assert second.endswith(CONSOLIDATION_REMINDER)
    assert seen == [clock.now, clock.now]


async def test_tools_already_present_are_not_duplicated(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A tool of the same name on the request is kept and not offered twice."""

    async def mine(arguments: str) -> str:
        return "mine"

    own = Tool(
        name="MemoryView", description="my own", parameters={"type": "object"}, function=mine
    )
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    server.enqueue(ScriptedReply.text("ok"))
    await _client(openai_client, service, memory).call("hello", **turn("s1", "alice"), tools=[own])
    names = [t["function"]["name"] for t in server.requests[0].tools]
    assert names.count("MemoryView") == 1
    assert len(names) == 6
    view = next(t for t in server.requests[0].tools if t["function"]["name"] == "MemoryView")
    assert view["function"]["description"] == "my own"


async def test_it_passes_through_without_tool_support(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """With tools switched off (``tool_choice="none"``) the request goes out unchanged."""
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    server.enqueue(ScriptedReply.text("b"))
    await _client(openai_client, service, memory).call(
        "hi", **turn("s2", "u"), options=ChatOptions(tool_choice="none")
    )
    for request in server.requests:
        assert request.messages[0]["content"] == "You are helpful."
        assert not request.tools


async def test_memories_are_per_user_and_never_global_by_accident(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A call without a user id fails unless a default user is set; users get their own root."""
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    with pytest.raises(UsageError, match="per user"):
        await _client(openai_client, service, memory).call("hi", **turn("s1"))
    fallback = AutoMemoryToolsAdvisor(
        DirectoryMemoryStore(tmp_path, scope="base"), default_user_id="guest"
    )
    server.enqueue(ScriptedReply.text("ok"))
    await _client(openai_client, service, fallback).call("hi", **turn("s2"))
    assert str(tmp_path / "guest") in server.requests[0].messages[0]["content"]


async def test_a_memory_saved_in_one_session_is_read_back_in_a_new_session(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The scripted model saves a memory in session one and reads it in session two."""
    memory = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    client = _client(openai_client, service, memory)
    fact = (
        "---\nname: coffee\ndescription: how alice takes her coffee\ntype: user\n---\n"
        "Black, no sugar.\n"
    )
    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("MemoryCreate", {"path": "coffee.md", "file_text": fact})]
        ),
        ScriptedReply.tool_calls(
            [
                ScriptedToolCall(
                    "MemoryCreate",
                    {"path": "MEMORY.md", "file_text": "- [Coffee](coffee.md) — black, no sugar\n"},
                )
            ]
        ),
        ScriptedReply.text("Noted: black, no sugar."),
    )
    first = await client.call("I take my coffee black, no sugar.", **turn("s-1", "alice"))
    assert first.text == "Noted: black, no sugar."

    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("MemoryView", {"path": "MEMORY.md"})]),
        ScriptedReply.tool_calls([ScriptedToolCall("MemoryView", {"path": "coffee.md"})]),
        ScriptedReply.text("Black, no sugar, as always."),
    )
    second = await client.call("How do I take my coffee?", **turn("s-2", "alice"))
    assert second.text == "Black, no sugar, as always."
    tool_results = [
        m["content"] for r in server.requests[3:] for m in r.messages if m["role"] == "tool"
    ]
    assert any("coffee.md" in text for text in tool_results)
    assert any("Black, no sugar." in text for text in tool_results)
    assert all(
        m["content"] != "I take my coffee black, no sugar." for m in server.requests[5].messages
    )
    server.assert_done()

    bob = AutoMemoryToolsAdvisor(DirectoryMemoryStore(tmp_path, scope="base"))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("MemoryView", {"path": "coffee.md"})]),
        ScriptedReply.text("I don't know."),
    )
    await _client(openai_client, service, bob).call("My coffee?", **turn("s-3", "bob"))
    bob_result = [m for m in server.requests[-1].messages if m["role"] == "tool"][-1]["content"]
    assert bob_result.startswith("Error:")
    assert json.dumps(bob_result)
