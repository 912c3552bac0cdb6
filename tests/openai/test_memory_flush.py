"""Memory flush before compaction: the model saves durable facts, bounded, never blocking."""

from __future__ import annotations

import logging
from pathlib import Path

import openai
import pytest
from chat_support import MODEL

from asyncsession import DefaultSessionService
from asyncsession.compaction import (
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.events import CreateSessionRequest, SessionEvent
from asyncsession.exceptions import UsageError
from asyncsession.memory import DirectoryMemoryStore
from asyncsession.messages import AssistantMessage, UserMessage
from asyncsession.openai import (
    ChatClient,
    ModelMemoryFlush,
    ResponsesClient,
    ResponsesCompactionStrategy,
)
from asyncsession.repository import InMemorySessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


class FixedSummarizer:
    """Always the same summary; records that it ran."""

    def __init__(self) -> None:
        self.prompts: list[str] = []

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        self.prompts.append(prompt)
        return "They talked about cats."


async def session_with_turns(turns: int = 4) -> tuple[DefaultSessionService, str]:
    service = DefaultSessionService(InMemorySessionRepository())
    await service.create(CreateSessionRequest(id="s", user_id="alice"))
    for index in range(turns):
        await service.append_message("s", UserMessage(text=f"fact {index}: I own {index} cats"))
        await service.append_message("s", AssistantMessage(text=f"noted {index}"))
    return service, "s"


def save(path: str, text: str) -> ScriptedReply:
    return ScriptedReply.tool_calls(
        [ScriptedToolCall("MemoryCreate", {"path": path, "file_text": text})]
    )


API_CLIENTS = [
    pytest.param(ChatClient, id="chat-completions"),
    pytest.param(ResponsesClient, id="responses"),
]


@pytest.mark.parametrize("client_type", API_CLIENTS)
async def test_the_flush_saves_facts_of_the_archived_turns_before_summarizing(
    client_type: type[ChatClient] | type[ResponsesClient],
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    tmp_path: Path,
) -> None:
    """The model sees the turns to archive and writes to the owner's memory; then it compacts."""
    service, sid = await session_with_turns()
    store = DirectoryMemoryStore(tmp_path, scope="nobody")
    flush = ModelMemoryFlush(client_type(openai_client, model=MODEL), store)
    summarizer = FixedSummarizer()
    strategy = RecursiveSummarizationCompactionStrategy(
        summarizer, max_events_to_keep=2, overlap_size=0, memory_flush=flush
    )
    server.enqueue(save("cats.md", "alice owns cats"), ScriptedReply.text("done"))

    result = await service.compact(sid, TurnCountTrigger(1), strategy)

    assert result.applied
    assert summarizer.prompts  # the summary was written after the flush
    first = server.requests[0]
    shown = str(first.body)
    assert "fact 0: I own 0 cats" in shown
    assert "fact 3" not in shown  # the kept turn is not flushed
    saved = await store.with_scope("alice").read("cats.md")
    assert saved is not None
    assert saved.text == "alice owns cats"
    assert await store.with_scope("nobody").read("cats.md") is None
    server.assert_done()


async def test_the_responses_strategy_flushes_the_turns_it_compacts_away_first(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """``ResponsesCompactionStrategy(memory_flush=)``: the flush sees the turns about to leave
    the window before ``responses.compact`` is called, and not the turns kept."""
    service, sid = await session_with_turns()
    seen: list[tuple[int, list[str | None]]] = []

    class Recording:
        async def flush(self, request: object, events: list[SessionEvent]) -> None:
            seen.append((len(server.requests), [e.text for e in events]))

    strategy = ResponsesCompactionStrategy(
        openai_client, model=MODEL, max_events_to_keep=2, memory_flush=Recording()
    )
    server.enqueue(ScriptedReply.text(""))

    result = await service.compact(sid, TurnCountTrigger(1), strategy)

    assert result.applied
    assert len(seen) == 1
    requests_before_flush, texts = seen[0]
    assert requests_before_flush == 0
    assert "fact 0: I own 0 cats" in texts
    assert "fact 3: I own 3 cats" not in texts
    assert len(server.requests) == 1
    server.assert_done()


async def test_a_failed_flush_does_not_block_the_compaction(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A model error during the flush is logged; the compaction is applied anyway."""
    service, sid = await session_with_turns()
    flush = ModelMemoryFlush(
        ResponsesClient(openai_client, model=MODEL), DirectoryMemoryStore(tmp_path, scope="x")
    )
    strategy = RecursiveSummarizationCompactionStrategy(
        FixedSummarizer(), max_events_to_keep=2, overlap_size=0, memory_flush=flush
    )
    server.enqueue(ScriptedReply.error(500, "boom"))

    with caplog.at_level(logging.WARNING, logger="asyncsession.compaction"):
        result = await service.compact(sid, TurnCountTrigger(1), strategy)

    assert result.applied
    assert "Memory flush of session 's' failed" in caplog.text


async def test_the_flush_is_bounded_in_rounds(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    """A model that keeps calling tools is stopped after max_rounds; compaction goes on."""
    service, sid = await session_with_turns()
    store = DirectoryMemoryStore(tmp_path, scope="x")
    flush = ModelMemoryFlush(ChatClient(openai_client, model=MODEL), store, max_rounds=2)
    strategy = SlidingWindowCompactionStrategy(2, memory_flush=flush)
    server.enqueue(save("a.md", "a"), save("b.md", "b"))

    result = await service.compact(sid, TurnCountTrigger(1), strategy)

    assert result.applied
    assert len(server.requests) == 2
    assert server.requests[0].body["max_completion_tokens"] == 1000
    assert await store.with_scope("alice").read("a.md") is not None
    server.assert_done()


async def test_the_transcript_is_bounded_in_tokens(openai_client: openai.AsyncOpenAI) -> None:
    """Turns beyond max_input_tokens are left out, and the model is told how many."""
    events = [
        SessionEvent(session_id="s", message=UserMessage(text="word " * 50)) for _ in range(5)
    ]
    flush = ModelMemoryFlush(
        ChatClient(openai_client, model=MODEL),
        DirectoryMemoryStore("unused", scope="x"),
        max_input_tokens=120,
    )
    lines = flush.transcript(events).splitlines()
    assert len(lines) == 3
    assert lines[-1] == "(3 later events left out)"


async def test_nothing_archived_means_no_flush(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, tmp_path: Path
) -> None:
    """A compaction that archives no real message calls no model."""
    service, sid = await session_with_turns(1)
    flush = ModelMemoryFlush(
        ChatClient(openai_client, model=MODEL), DirectoryMemoryStore(tmp_path, scope="x")
    )
    strategy = SlidingWindowCompactionStrategy(10, memory_flush=flush)

    await service.compact(sid, lambda request: True, strategy)

    assert server.requests == []


def test_a_flush_client_with_session_memory_is_refused(openai_client: openai.AsyncOpenAI) -> None:
    """The flush conversation must not be stored: a client with session memory is a usage
    error."""
    service = DefaultSessionService(InMemorySessionRepository())
    client = ChatClient(openai_client, model=MODEL, sessions=service)
    with pytest.raises(UsageError, match="without session memory"):
        ModelMemoryFlush(client, DirectoryMemoryStore("unused", scope="x"))
