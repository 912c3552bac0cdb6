"""Tools and the tool loop: schemas, validation, rounds, concurrency, errors back to the model."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Annotated

import openai
import pytest
from chat_support import MODEL, PATHS, ask, sent, stored, turn
from pydantic import BaseModel, Field

from asyncsession import DefaultSessionService
from asyncsession.chat import Usage
from asyncsession.exceptions import ToolError, ToolLoopLimitExceeded, UsageError
from asyncsession.memory import DirectoryMemoryStore
from asyncsession.openai import ChatClient
from asyncsession.testing import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)
from asyncsession.tools import AutoMemoryTools, Tool, tool


@tool
async def weather(city: str, unit: str = "C") -> str:
    """Tell the weather of a city.

    Args:
        city: The city's name.
        unit: "C" or "F".
    """
    return f"22{unit} in {city}"


def test_a_tool_schema_comes_from_type_hints_and_docstring() -> None:
    """The schema lists typed parameters, their descriptions, and only defaultless ones required."""
    assert weather.name == "weather"
    assert weather.description == "Tell the weather of a city."
    schema = weather.parameters
    assert schema["properties"]["city"]["type"] == "string"
    assert schema["properties"]["city"]["description"] == "The city's name."
    assert schema["properties"]["unit"]["default"] == "C"
    assert schema["required"] == ["city"]
    assert schema["additionalProperties"] is False


async def test_a_tool_validates_its_arguments() -> None:
    """Arguments that do not validate come back as an error text naming the problem."""

    @tool
    def add(a: int, b: Annotated[int, Field(ge=0)]) -> int:
        return a + b

    assert await add.invoke('{"a": 2, "b": 3}') == "5"
    assert await add.invoke('{"a": 2, "b": -1}') == (
        "Error: Invalid arguments for tool 'add': b: Input should be greater than or equal to 0"
    )
    assert (await add.invoke("not json")).startswith(
        "Error: Invalid arguments for tool 'add': arguments: Invalid JSON"
    )


async def test_a_tool_error_the_tool_raises_becomes_its_answer() -> None:
    """A ToolError raised by the tool is the model's error text; invoke does not raise it."""

    @tool
    async def refuse(reason: str) -> str:
        raise ToolError(f"no: {reason}")

    assert await refuse.invoke('{"reason": "closed"}') == "Error: no: closed"


async def test_a_sync_tool_runs_in_a_worker_thread() -> None:
    """A plain function runs off the event loop's thread, so it cannot block the loop."""

    @tool
    def where() -> str:
        return threading.current_thread().name

    assert await where.invoke("{}") != threading.current_thread().name


async def test_a_tool_result_that_is_not_text_is_sent_as_json() -> None:
    """Non-string results are serialised to JSON."""

    @tool(name="facts", description="Some facts.")
    async def facts(topic: str, /) -> dict[str, object]:
        return {"topic": topic, "count": 2}

    assert facts.name == "facts"
    assert json.loads(await facts.invoke('{"topic": "cats"}')) == {"topic": "cats", "count": 2}


def test_tools_reject_what_cannot_be_described() -> None:
    """Variadic parameters and invalid names are usage errors."""

    def variadic(*args: int) -> int:
        return sum(args)

    with pytest.raises(UsageError, match=r"\*args"):
        Tool.from_function(variadic)
    with pytest.raises(UsageError, match="Invalid tool name"):
        Tool.from_function(weather.function, name="has space")


async def test_a_tool_from_a_pydantic_model_gets_its_fields_as_keywords() -> None:
    """``Tool.from_model`` validates with the model and passes the fields as keywords."""

    class Search(BaseModel):
        query: str
        limit: int = 3

    async def search(query: str, limit: int) -> str:
        return f"{limit} hits for {query}"

    search_tool = Tool.from_model("search", "Search things.", Search, search)

    assert search_tool.parameters["required"] == ["query"]
    assert await search_tool.invoke('{"query": "cats"}') == "3 hits for cats"


def test_the_client_rejects_duplicate_names_and_zero_rounds(
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Two tools with one name, or fewer than one round, are usage errors."""
    with pytest.raises(UsageError, match="unique"):
        ChatClient(openai_client, model=MODEL, tools=[weather, weather])
    with pytest.raises(UsageError, match="max_tool_rounds"):
        ChatClient(openai_client, model=MODEL, tools=[weather], max_tool_rounds=0)


def loop_client(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    tools: list[Tool],
    *,
    max_rounds: int = 10,
) -> ChatClient:
    return ChatClient(
        openai_client, model=MODEL, sessions=service, tools=tools, max_tool_rounds=max_rounds
    )


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_two_round_loop_stores_each_message_exactly_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """User message, tool call, tool result and final reply are each stored once, in order."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("weather", {"city": "Oslo"}, id="call_1")]),
        ScriptedReply.text("Mild."),
    )

    response = await ask(
        loop_client(openai_client, service, [weather]),
        "Weather?",
        streaming=streaming,
        **turn("s"),
    )

    assert response.text == "Mild."
    assert await stored(service, "s") == [
        "U:Weather?",
        "A[weather]",
        "T[weather->22C in Oslo]",
        "A:Mild.",
    ]
    assert sent(server.requests[1].messages) == [
        "U:Weather?",
        "A[weather]",
        "T:call_1->22C in Oslo",
    ]
    assert [t["function"]["name"] for t in server.requests[0].tools] == ["weather"]
    server.assert_done()


@pytest.mark.parametrize("streaming", PATHS)
async def test_parallel_tool_calls_run_concurrently(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Both calls of a parallel tool call are in flight at once (each waits for the other)."""
    both_started = asyncio.Barrier(2)

    @tool
    async def ping(name: str) -> str:
        async with asyncio.timeout(5):
            await both_started.wait()  # deadlocks (and times out) if the calls ran one by one
        return f"pong {name}"

    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("ping", {"name": "a"}), ScriptedToolCall("ping", {"name": "b"})]
        ),
        ScriptedReply.text("both answered"),
    )

    await ask(loop_client(openai_client, service, [ping]), "go", streaming=streaming, **turn("s"))

    assert await stored(service, "s") == [
        "U:go",
        "A[ping,ping]",
        "T[ping->pong a,ping->pong b]",
        "A:both answered",
    ]


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_failing_tool_sends_the_error_to_the_model(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A tool's exception becomes its result for the model; the caller gets the final reply."""

    @tool
    def explode() -> str:
        raise ValueError("boom")

    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("explode", {}, id="call_x")]),
        ScriptedReply.text("Sorry, that failed."),
    )

    response = await ask(
        loop_client(openai_client, service, [explode]),
        "go",
        streaming=streaming,
        **turn("s"),
    )

    assert response.text == "Sorry, that failed."
    assert server.requests[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_x",
        "content": "Error: tool 'explode' failed: ValueError: boom",
    }


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        pytest.param({"unit": "K"}, "city: Field required", id="missing"),
        pytest.param('{"city": ', "Invalid arguments for tool 'weather'", id="malformed-json"),
    ],
)
async def test_invalid_arguments_go_back_to_the_model(
    arguments: dict[str, str] | str,
    expected: str,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Arguments that do not validate come back to the model as an error result."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("weather", arguments)]),
        ScriptedReply.text("Let me fix that."),
    )

    await loop_client(openai_client, service, [weather]).call("go", **turn("s"))

    result = server.requests[1].messages[-1]["content"]
    assert result.startswith("Error: ")
    assert expected in result


async def test_an_unknown_tool_goes_back_to_the_model(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A call of a tool nobody offers is answered with the available names."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("nope", {})]), ScriptedReply.text("ok")
    )

    await loop_client(openai_client, service, [weather]).call("go", **turn("s"))

    assert server.requests[1].messages[-1]["content"] == (
        "Error: there is no tool named 'nope' (available: weather)"
    )


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_runaway_loop_stops_after_max_rounds(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The model asking for tools on every round ends in ToolLoopLimitExceeded after max_rounds."""
    for _ in range(3):
        server.enqueue(ScriptedReply.tool_calls([ScriptedToolCall("weather", {"city": "X"})]))
    client = loop_client(openai_client, service, [weather], max_rounds=3)

    with pytest.raises(ToolLoopLimitExceeded) as raised:
        await ask(client, "go", streaming=streaming, **turn("s"))

    assert raised.value.max_rounds == 3
    assert len(server.requests) == 3
    server.assert_done()


async def test_call_tools_join_the_clients_and_win_a_name_clash(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Tools passed with the call are offered and run; on a name clash the call's tool wins."""

    @tool(name="weather")
    async def local_weather(city: str) -> str:
        return f"local forecast for {city}"

    @tool
    async def time() -> str:
        return "noon"

    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("weather", {"city": "Rome"}), ScriptedToolCall("time", {})]
        ),
        ScriptedReply.text("ok"),
    )

    await loop_client(openai_client, service, [weather]).call(
        "go", **turn("s"), tools=[local_weather, time]
    )

    assert sorted(t["function"]["name"] for t in server.requests[0].tools) == ["time", "weather"]
    results = [m["content"] for m in server.requests[1].messages if m["role"] == "tool"]
    assert results == ["local forecast for Rome", "noon"]


async def test_the_final_response_adds_up_the_usage_of_every_round(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Usage is summed over the rounds of the loop."""
    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("weather", {"city": "X"})],
            prompt_tokens=10,
            completion_tokens=2,
        ),
        ScriptedReply.text("ok", prompt_tokens=20, completion_tokens=3),
    )

    response = await loop_client(openai_client, service, [weather]).call("go", **turn("s"))

    assert response.usage == Usage(prompt_tokens=30, completion_tokens=5, total_tokens=35)


async def test_memory_tools_plug_in_as_tools(
    tmp_path: Path,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """AutoMemoryTools' Tools run in the loop like any other tool."""
    memory = AutoMemoryTools(DirectoryMemoryStore(tmp_path, scope="alice"))
    tools = memory.as_tools()
    server.enqueue(
        ScriptedReply.tool_calls(
            [ScriptedToolCall("MemoryCreate", {"path": "MEMORY.md", "file_text": "# Index\n"})]
        ),
        ScriptedReply.text("Saved."),
    )

    await loop_client(openai_client, service, tools).call("Remember this", **turn("s"))

    assert server.requests[1].messages[-1]["content"].startswith("Successfully")
    assert "# Index" in await memory.memory_view("MEMORY.md")
