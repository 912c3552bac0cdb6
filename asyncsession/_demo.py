"""The README's main job: a streamed multi-turn conversation through the whole pipeline.

``scripts/demo`` (or ``python -m asyncsession._demo``) runs four streamed turns with session
memory, long-term memory tools and a real tool, with compaction by recursive summarization in a
background worker, then prints the session log: active and archived events, the summary turn,
the version.

- No ``OPENAI_API_KEY``: the model is the built-in scripted OpenAI-compatible server, in
  process, so the demo runs offline.
- ``OPENAI_API_KEY`` (optionally ``OPENAI_BASE_URL``, ``OPENAI_MODEL``): a real model.
- ``MONGODB_URI``: sessions and memories in MongoDB instead of the embedded in-memory store.
  A server that does not answer (or a malformed URI) ends the demo before its first turn with
  one line on standard error, naming the URI without its password, and exit code 1.
- ``--api responses``: the Responses API (``ResponsesClient``) instead of Chat Completions
  (``--api chat``, the default); the turns, the log and the output are the same.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import uuid
from collections.abc import AsyncGenerator
from contextlib import AsyncExitStack, asynccontextmanager

import openai
from pymongo.errors import PyMongoError

from ._describe import cell, describe
from ._mongo_uri import describe_failure
from ._responses_items import items_to_messages
from .advisors import AutoMemoryToolsAdvisor
from .compaction import (
    CompactionWorker,
    RecursiveSummarizationCompactionStrategy,
    TurnCountTrigger,
)
from .events import SessionEvent
from .exceptions import AsyncSessionError
from .filters import EventFilter
from .memory import DirectoryMemoryStore, MemoryStore, MongoMemoryStore
from .messages import SystemMessage, messages_to_openai
from .openai import ChatClient, OpenAISummarizer, ResponsesClient
from .repository import InMemorySessionRepository, MongoSessionRepository, SessionRepository
from .service import DefaultSessionService
from .testing import RecordedRequest, ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall
from .tools import tool

USER = "alice"
TURNS = (
    "Hi, I'm Alice. Please remember that I take my coffee black.",
    "What's the weather in Paris right now?",
    "And in Lisbon and in Madrid?",
    "Thanks! What do you remember about me?",
)
WEATHER = {"paris": "18°C, sunny", "lisbon": "24°C, clear", "madrid": "29°C, hot and dry"}


@tool
async def get_weather(city: str) -> str:
    """The current weather of a city.

    Args:
        city: The city's name.
    """
    return WEATHER.get(city.strip().lower(), "no data for that city")


def _scripted(request: RecordedRequest) -> ScriptedReply:
    """The offline model: answers the demo's turns, tool results and the summarizer."""
    messages = request.messages
    if request.path.endswith("/responses"):  # the same conversation, as Responses API items
        messages = messages_to_openai(items_to_messages(request.input))
    last = messages[-1]
    if "=== CONVERSATION TO SUMMARIZE ===" in str(last.get("content")):
        return ScriptedReply.text(
            "Alice introduced herself and asked the assistant to remember that she takes her "
            "coffee black (saved to long-term memory). She asked about the weather: Paris was "
            "18°C and sunny.",
            chunk_size=24,
        )
    start = max(i for i, m in enumerate(messages) if m["role"] == "user")
    question = str(messages[start]["content"])
    results = [str(m["content"]) for m in messages[start:] if m["role"] == "tool"]
    if question.startswith("Hi, I'm Alice"):
        if not results:
            fact = (
                "---\nname: coffee\ndescription: how Alice takes her coffee\ntype: user\n"
                "---\nBlack.\n"
            )
            return ScriptedReply.tool_calls(
                [ScriptedToolCall("MemoryCreate", {"path": "coffee.md", "file_text": fact})]
            )
        if len(results) == 1:
            index = "- [Coffee](coffee.md) — Alice takes her coffee black\n"
            return ScriptedReply.tool_calls(
                [ScriptedToolCall("MemoryCreate", {"path": "MEMORY.md", "file_text": index})]
            )
        return ScriptedReply.text(
            "Nice to meet you, Alice! I've noted that you take your coffee black."
        )
    if "Paris" in question:
        if not results:
            return ScriptedReply.tool_calls([ScriptedToolCall("get_weather", {"city": "Paris"})])
        return ScriptedReply.text(f"It's {results[0]} in Paris right now.")
    if "Lisbon" in question:
        if not results:
            return ScriptedReply.tool_calls(
                [
                    ScriptedToolCall("get_weather", {"city": "Lisbon"}),
                    ScriptedToolCall("get_weather", {"city": "Madrid"}),
                ]
            )
        return ScriptedReply.text(f"Lisbon: {results[0]}. Madrid: {results[1]}.")
    if not results:
        return ScriptedReply.tool_calls([ScriptedToolCall("MemoryView", {"path": "MEMORY.md"})])
    if len(results) == 1:
        return ScriptedReply.tool_calls([ScriptedToolCall("MemoryView", {"path": "coffee.md"})])
    return ScriptedReply.text("I remember that you take your coffee black, Alice.")


@asynccontextmanager
async def _model() -> AsyncGenerator[tuple[openai.AsyncOpenAI, str, str], None]:
    if os.environ.get("OPENAI_API_KEY"):
        client = openai.AsyncOpenAI(base_url=os.environ.get("OPENAI_BASE_URL") or None)
        try:
            yield client, os.environ.get("OPENAI_MODEL", "gpt-4o-mini"), "OpenAI API"
        finally:
            await client.close()
        return
    async with ScriptedOpenAIServer(responder=_scripted) as server:
        yield server.client(), "scripted-demo-model", "the built-in scripted server"


class _StartupFailure(Exception):
    """The demo cannot start: one line saying what failed, where, and what to set."""


@asynccontextmanager
async def _stores(
    memory_root: str,
) -> AsyncGenerator[tuple[SessionRepository, MemoryStore, str], None]:
    uri = os.environ.get("MONGODB_URI")
    if not uri:
        yield (
            InMemorySessionRepository(),
            DirectoryMemoryStore(memory_root, scope=USER),
            "in-memory",
        )
        return
    name = f"asyncsession_demo_{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        try:  # MongoDB is checked here, before the first turn, and only here
            repository = await stack.enter_async_context(MongoSessionRepository.from_uri(uri, name))
            await repository.ensure_indexes()
            database = repository._database  # pyright: ignore[reportPrivateUsage] - its own db
            memories = MongoMemoryStore(database, scope=USER)
            await memories.ensure_indexes()
        except (AsyncSessionError, PyMongoError, ValueError) as exc:
            raise _StartupFailure(
                f"the demo cannot start: {describe_failure(uri, exc)}. Set MONGODB_URI to the "
                "URI of a MongoDB server that answers, or unset it to run on the in-memory store."
            ) from exc
        yield repository, memories, f"MongoDB ({name})"


def _describe(event: SessionEvent) -> str:
    """The event on one line, as `asyncsession show` has it, with its flags."""
    flags = (" [archived]" if event.archived else "") + (
        " [synthetic]" if event.is_synthetic else ""
    )
    return f"{event.type!s:<10} {cell(describe(event))}{flags}"


async def main(api: str = "chat") -> None:
    """Run the demo on the Chat Completions API (``"chat"``) or the Responses API."""
    client_type = ResponsesClient if api == "responses" else ChatClient
    session_id = f"demo-{uuid.uuid4().hex[:8]}"
    async with AsyncExitStack() as stack:
        memory_root = stack.enter_context(
            tempfile.TemporaryDirectory(prefix="asyncsession-memories-")
        )
        model_client, model, where = await stack.enter_async_context(_model())
        repository, memories, store_name = await stack.enter_async_context(_stores(memory_root))
        service = DefaultSessionService(repository)
        summarizer = OpenAISummarizer(model_client, model)
        strategy = RecursiveSummarizationCompactionStrategy(
            summarizer, max_events_to_keep=4, overlap_size=1
        )
        trigger = TurnCountTrigger(max_turns=2)
        print(f"model: {model} via {where}, {client_type.__name__}")
        print(f"store: {store_name}; session {session_id} of user {USER!r}\n")

        async with CompactionWorker(service, trigger, strategy, max_concurrency=2) as worker:
            client = client_type(
                model_client,
                model=model,
                sessions=service,
                compaction=worker,
                tools=[get_weather],
                advisors=[AutoMemoryToolsAdvisor(memories, per_user=False)],
                default_messages=[SystemMessage(text="You are a concise, friendly assistant.")],
            )
            for number, question in enumerate(TURNS, 1):
                print(f"[turn {number}] you: {question}")
                print("           assistant: ", end="", flush=True)
                chunks = 0
                async with client.stream(question, session_id=session_id, user_id=USER) as stream:
                    async for chunk in stream:
                        chunks += 1
                        for delta in chunk.tool_calls:
                            if delta.name:
                                print(f"[calling {delta.name}] ", end="", flush=True)
                        if chunk.text:
                            print(chunk.text, end="", flush=True)
                print(f"\n           ({chunks} chunks streamed)\n")
            print("waiting for the compaction worker to finish...")

        log = await service.get_events(session_id)
        active = await service.get_events(session_id, EventFilter.active())
        archived = [event for event in log if event.archived]
        print(
            f"\nthe session log: {len(log)} events, {len(active)} active, {len(archived)} archived"
        )
        for number, event in enumerate(log, 1):
            print(f"  {number:>2}. {_describe(event)}")
        print("\nthe active view (what the model is sent next):")
        for event in active:
            print(f"      {_describe(event)}")
        summaries = [event for event in log if event.is_synthetic]
        print(f"\nsummary turn: {len(summaries)} synthetic events")
        print(f"version: {await service.get_event_version(session_id)}")
        saved = await memories.read("MEMORY.md")
        print(f"long-term memory MEMORY.md: {saved.text.strip() if saved else '(none)'}")
        if os.environ.get("MONGODB_URI"):
            database_name = store_name.split("(")[-1].rstrip(")")
            print(f"\ninspect it: asyncsession --db {database_name} show {session_id}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="scripts/demo", description="The asyncsession demo.")
    parser.add_argument(
        "--api",
        choices=("chat", "responses"),
        default="chat",
        help="the OpenAI API to talk to: Chat Completions (default) or the Responses API",
    )
    try:
        asyncio.run(main(parser.parse_args().api))
    except KeyboardInterrupt:
        sys.exit(130)
    except _StartupFailure as failure:
        print(f"error: {failure}", file=sys.stderr)
        sys.exit(1)
