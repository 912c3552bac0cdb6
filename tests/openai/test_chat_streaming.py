"""ChatClient.stream: chunks as they arrive, one persisted reply, abandonment, faults."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import openai
import pytest
from chat_support import (
    MODEL,
    CountingRepository,
    ask,
    assert_no_leaks,
    sent,
    stored,
    turn,
)

from asyncsession import DefaultSessionService, SessionEvent, tool
from asyncsession.advisors import IdempotentSessionEventIdGenerator
from asyncsession.chat import ChatChunk, Usage
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    SlidingWindowCompactionStrategy,
)
from asyncsession.exceptions import ChatError, UsageError
from asyncsession.openai import ChatClient
from asyncsession.repository import Lease
from asyncsession.testing import (
    ScriptedOpenAIServer,
    ScriptedReply,
    ScriptedToolCall,
)

WAIT = 5  # seconds: a bound on waits for events that must happen, never a synchronisation sleep


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


class CountingStrategy:
    """A sliding window that counts its runs."""

    def __init__(self) -> None:
        self.inner = SlidingWindowCompactionStrategy(2)
        self.runs = 0

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.runs += 1
        return await self.inner.compact(request)


def always(request: CompactionRequest) -> bool:
    return True


def session_client(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    strategy: CountingStrategy | None = None,
    **options: object,
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[lookup],
        compaction=None if strategy is None else (always, strategy),
        **options,  # type: ignore[arg-type]
    )


@pytest.mark.parametrize("paused_after", [1, 2])
async def test_the_first_chunks_arrive_while_the_model_is_still_streaming(
    paused_after: int,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Chunks are forwarded as they arrive: the first ones while the server holds the rest."""
    gate = asyncio.Event()
    server.enqueue(
        ScriptedReply.text("Hello world", chunk_size=5, pause_after=paused_after, gate=gate)
    )

    async with session_client(openai_client, service).stream("hi", **turn("s")) as stream:
        async with asyncio.timeout(WAIT):
            early = [await anext(stream) for _ in range(paused_after)]
        assert [chunk.text for chunk in early] == ["", "Hello"][:paused_after]
        assert await stored(service, "s") == ["U:hi"]
        gate.set()
        rest = [chunk.text async for chunk in stream]

    assert "".join(c.text for c in early) + "".join(rest) == "Hello world"
    assert stream.response.text == "Hello world"


async def test_the_reply_is_stored_once_after_the_last_chunk_and_before_the_block_exits(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The last chunk (usage) arrives before anything is stored; the reply is stored, once,
    by the time the iteration ends, inside the block."""
    strategy = CountingStrategy()
    server.enqueue(ScriptedReply.text("Sure.", prompt_tokens=3, completion_tokens=1))
    stored_at_last_chunk: list[str] = []
    compactions_at_last_chunk = -1

    async with session_client(openai_client, service, strategy).stream("hi", **turn("s")) as stream:
        async for chunk in stream:
            if chunk.usage is not None:
                stored_at_last_chunk = await stored(service, "s")
                compactions_at_last_chunk = strategy.runs
        stored_in_block = await stored(service, "s")

    assert stored_at_last_chunk == ["U:hi"]
    assert compactions_at_last_chunk == 0
    assert stored_in_block == ["U:hi", "A:Sure."]
    assert strategy.runs == 1
    assert await stored(service, "s") == ["U:hi", "A:Sure."]
    assert stream.response.usage == Usage(prompt_tokens=3, completion_tokens=1, total_tokens=4)
    assert stream.is_complete


async def test_a_follow_up_request_sees_the_streamed_reply(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A request made right after the stream ends gets the streamed reply as history."""
    server.enqueue(ScriptedReply.text("It is 42."), ScriptedReply.text("Yes."))
    client = session_client(openai_client, service)

    await ask(client, "Answer?", streaming=True, **turn("s"))
    await client.call("Sure?", **turn("s"))

    assert sent(server.requests[1].messages) == ["U:Answer?", "A:It is 42.", "U:Sure?"]
    assert_no_leaks()


async def test_a_stream_that_asks_for_tools_continues_with_the_next_round(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The tool-call round's chunks, then the final round's, reach the consumer in one stream."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"}, id="c")]),
        ScriptedReply.text("The value is v."),
    )
    chunks: list[ChatChunk] = []

    async with session_client(openai_client, service).stream("go", **turn("s")) as stream:
        chunks = [chunk async for chunk in stream]

    finishes = [c.finish_reason for c in chunks if c.finish_reason is not None]
    assert finishes == ["tool_calls", "stop"]
    arguments = "".join(d.arguments for c in chunks for d in c.tool_calls)
    assert arguments == '{"key":"k"}'
    assert "".join(c.text for c in chunks) == "The value is v."
    assert await stored(service, "s") == [
        "U:go",
        "A[lookup]",
        "T[lookup->value of k]",
        "A:The value is v.",
    ]


async def test_breaking_out_abandons_the_stream_and_keeps_the_session_consistent(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A consumer that stops early closes the HTTP stream; the user message stays, no partial
    reply is stored, no compaction runs, nothing is left running."""
    strategy = CountingStrategy()
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("A long answer", chunk_size=2, pause_after=3, gate=gate))

    async with session_client(openai_client, service, strategy).stream("hi", **turn("s")) as stream:
        async for chunk in stream:
            if chunk.text:
                break

    async with asyncio.timeout(WAIT):
        await server.wait_disconnected(0)
    gate.set()
    assert await stored(service, "s") == ["U:hi"]
    assert strategy.runs == 0
    assert not stream.is_complete
    with pytest.raises(UsageError, match="read to its end"):
        _ = stream.response
    assert_no_leaks()


async def test_a_cancelled_consumer_abandons_the_stream(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Cancelling the task that reads a stream closes it upstream and stores no partial reply."""
    gate = asyncio.Event()
    first_text = asyncio.Event()
    server.enqueue(ScriptedReply.text("Partial answer", chunk_size=4, pause_after=2, gate=gate))
    client = session_client(openai_client, service)

    async def consume() -> None:
        async with client.stream("hi", **turn("s")) as stream:
            async for chunk in stream:
                if chunk.text:
                    first_text.set()

    task = asyncio.create_task(consume())
    async with asyncio.timeout(WAIT):
        await first_text.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    async with asyncio.timeout(WAIT):
        await server.wait_disconnected(0)
    gate.set()
    assert await stored(service, "s") == ["U:hi"]
    assert_no_leaks()


async def test_an_error_in_the_consumer_abandons_the_stream(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """An exception raised inside the block propagates and abandons the stream."""
    gate = asyncio.Event()
    server.enqueue(ScriptedReply.text("Never finished", pause_after=2, gate=gate))

    with pytest.raises(KeyError):
        async with session_client(openai_client, service).stream("hi", **turn("s")) as stream:
            async for _ in stream:
                raise KeyError("consumer bug")

    async with asyncio.timeout(WAIT):
        await server.wait_disconnected(0)
    gate.set()
    assert await stored(service, "s") == ["U:hi"]
    assert_no_leaks()


async def test_abandoning_in_the_second_round_keeps_the_first_round(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A stream left during the final round keeps the stored call and result, not the reply."""
    gate = asyncio.Event()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("The final answer", pause_after=2, gate=gate),
    )

    async with session_client(openai_client, service).stream("go", **turn("s")) as stream:
        async for chunk in stream:
            if chunk.text:
                break

    async with asyncio.timeout(WAIT):
        await server.wait_disconnected(1)
    gate.set()
    assert await stored(service, "s") == ["U:go", "A[lookup]", "T[lookup->value of k]"]
    assert_no_leaks()


@pytest.mark.parametrize("drop_after", [2, 5])
async def test_a_dropped_stream_is_interrupted_and_a_retry_stores_nothing_twice(
    drop_after: int,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A connection that breaks mid-stream raises ChatError; the user message stays,
    and an idempotent retry stores it once with the reply."""
    client = session_client(openai_client, service, event_ids=IdempotentSessionEventIdGenerator())
    server.enqueue(
        ScriptedReply.text("Broken reply", chunk_size=2, drop_after=drop_after),
        ScriptedReply.text("Whole reply"),
    )

    with pytest.raises(ChatError) as raised:
        await ask(client, "hi", streaming=True, **turn("s"))
    assert isinstance(raised.value.__cause__, openai.APIConnectionError)
    assert await stored(service, "s") == ["U:hi"]

    await ask(client, "hi", streaming=True, **turn("s"))

    assert await stored(service, "s") == ["U:hi", "A:Whole reply"]
    assert_no_leaks()


async def test_a_stream_is_read_inside_its_block_only(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Iterating before entering or after leaving, or entering twice, is a usage error."""
    server.enqueue(ScriptedReply.text("ok"))
    stream = ChatClient(openai_client, model=MODEL).stream("hi")

    with pytest.raises(UsageError, match="inside its block"):
        await anext(stream)
    async with stream:
        assert "".join([c.text async for c in stream]) == "ok"
    with pytest.raises(UsageError, match="closed"):
        await anext(stream)
    with pytest.raises(UsageError, match="entered only once"):
        async with stream:
            pass
    assert stream.response.text == "ok"


class SlowAppends(CountingRepository):
    """Appends wait for a gate, so a test can cancel a caller while a write is in flight."""

    def __init__(self) -> None:
        super().__init__()
        self.started = asyncio.Event()
        self.gate = asyncio.Event()

    async def append_events(
        self,
        session_id: str,
        events: Sequence[SessionEvent],
        expected_version: int | None = None,
        *,
        lease: Lease | None = None,
    ) -> bool:
        self.started.set()
        await self.gate.wait()
        return await super().append_events(session_id, events, expected_version, lease=lease)


async def test_a_write_that_started_completes_even_if_the_caller_is_cancelled(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Cancelling a call while the user message is being stored lets the write finish first."""
    repository = SlowAppends()
    service = DefaultSessionService(repository)
    client = ChatClient(openai_client, model=MODEL, sessions=service)
    task = asyncio.create_task(client.call("hi", **turn("s")))
    async with asyncio.timeout(WAIT):
        await repository.started.wait()

    task.cancel()
    repository.gate.set()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert await stored(service, "s") == ["U:hi"]
    assert server.requests == []
