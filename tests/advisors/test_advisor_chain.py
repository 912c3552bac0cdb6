"""The chain: ordering, BaseAdvisor hooks on both paths, chunk streams, per-call advisors."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

import openai
import pytest
from chat_support import MODEL, PATHS, ask, context, label, sent

from asyncsession import AssistantMessage, DefaultSessionService, SystemMessage
from asyncsession.advisors import (
    HIGHEST_PRECEDENCE,
    BaseAdvisor,
    CallContext,
    ChunkStream,
    SessionContexts,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
    StateKey,
    StreamNext,
    ToolCallingAdvisor,
    tool,
)
from asyncsession.chat import ChatChunk, ChatRequest, ChatResponse
from asyncsession.exceptions import UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@dataclass
class Seen:
    """What a recording advisor saw, per call of its hooks."""

    log: list[str] = field(default_factory=list[str])
    prompts: list[list[str]] = field(default_factory=list[list[str]])
    session_existed: list[bool] = field(default_factory=list[bool])
    responses: list[str] = field(default_factory=list[str])


class Recorder(BaseAdvisor):
    def __init__(
        self,
        name: str,
        order: int,
        seen: Seen,
        service: DefaultSessionService | None = None,
        *,
        asks_for_the_session: bool = False,
    ) -> None:
        self.name = name
        self.order = order
        self.seen = seen
        self.service = service
        self.asks_for_the_session = asks_for_the_session

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        self.seen.log.append(f"{self.name}>")
        self.seen.prompts.append([label(m) for m in request.messages])
        if self.asks_for_the_session:
            assert (await SessionContexts.session(ctx)).id == "s"
        if self.service is not None:
            exists = await self.service.find_by_id("s") is not None
            self.seen.session_existed.append(exists)
        return request

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        self.seen.log.append(f"<{self.name}")
        self.seen.responses.append(label(response.message))
        return response


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def session_client(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService, *extra: BaseAdvisor
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            SessionMemoryAdvisor(service),
            ToolCallingAdvisor([lookup]),
            SessionTurnAdvisor(service),
            *extra,
        ],
    )


def two_rounds(server: ScriptedOpenAIServer) -> None:
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_outside_the_turn_advisor_sees_the_whole_turn_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor ordered below the turn advisor runs once, before the session is resolved."""
    seen = Seen()
    outer = Recorder("outer", HIGHEST_PRECEDENCE + 100, seen, service)
    client = session_client(openai_client, service, outer)
    two_rounds(server)

    await ask(client, "go", streaming=streaming, context=context("s"))

    assert seen.log == ["outer>", "<outer"]
    assert seen.session_existed == [False]
    assert seen.prompts == [["U:go"]]
    assert seen.responses == ["A:done"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_between_turn_and_loop_runs_once_after_the_resolve(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor between the turn advisor and the loop runs once; its session exists."""
    seen = Seen()
    between = Recorder(
        "between", HIGHEST_PRECEDENCE + 250, seen, service, asks_for_the_session=True
    )
    client = session_client(openai_client, service, between)
    two_rounds(server)

    await ask(client, "go", streaming=streaming, context=context("s"))

    assert seen.log == ["between>", "<between"]
    assert seen.session_existed == [True]


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_between_loop_and_memory_runs_every_round_without_history(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor between the loop and the memory advisor runs per round on the bare prompt."""
    server.enqueue(ScriptedReply.text("first"))
    await ask(
        session_client(openai_client, service), "hi", streaming=streaming, context=context("s")
    )
    seen = Seen()
    client = session_client(openai_client, service, Recorder("mid", HIGHEST_PRECEDENCE + 500, seen))
    two_rounds(server)

    await ask(client, "go", streaming=streaming, context=context("s"))

    assert seen.log == ["mid>", "<mid", "mid>", "<mid"]
    assert seen.prompts[0] == ["U:go"]
    assert seen.prompts[1] == ["U:go", "A[lookup]", "T[lookup->value of k]"]
    assert seen.responses == ["A[lookup]", "A:done"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_inside_the_memory_advisor_sees_the_prompt_with_history(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor ordered above the memory advisor sees each round's prompt with the history."""
    server.enqueue(ScriptedReply.text("first"))
    await ask(
        session_client(openai_client, service), "hi", streaming=streaming, context=context("s")
    )
    seen = Seen()
    client = session_client(openai_client, service, Recorder("inner", 0, seen))
    two_rounds(server)

    await ask(client, "go", streaming=streaming, context=context("s"))

    assert seen.prompts == [
        ["U:hi", "A:first", "U:go"],
        ["U:hi", "A:first", "U:go", "A[lookup]", "T[lookup->value of k]"],
    ]


@pytest.mark.parametrize("streaming", PATHS)
async def test_advisors_with_the_same_order_keep_registration_order(
    streaming: bool, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Ties keep registration order: the first registered is further out."""
    seen = Seen()
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[Recorder("a", 5, seen), Recorder("b", 5, seen), Recorder("out", 1, seen)],
    )
    server.enqueue(ScriptedReply.text("ok"))

    await ask(client, "go", streaming=streaming, advisors=[Recorder("c", 5, seen)])

    assert seen.log == ["out>", "a>", "b>", "c>", "<c", "<b", "<a", "<out"]


class Shout(BaseAdvisor):
    """Adds a system message on the way in and upper-cases the reply on the way out."""

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        return request.with_messages([SystemMessage(text="Be loud."), *request.messages])

    async def after(self, ctx: CallContext, response: ChatResponse) -> ChatResponse:
        message = AssistantMessage(text=response.text.upper())
        return ChatResponse(message=message, finish_reason=response.finish_reason)


@pytest.mark.parametrize("streaming", PATHS)
async def test_before_and_after_hooks_serve_both_paths(
    streaming: bool, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """``before`` changes what the model gets and ``after`` what the caller gets, on both paths."""
    client = ChatClient(openai_client, model=MODEL, advisors=[Shout()])
    server.enqueue(ScriptedReply.text("hello there"))

    response = await ask(client, "hi", streaming=streaming)

    assert sent(server.requests[0].messages) == ["S:Be loud.", "U:hi"]
    assert response.text == "HELLO THERE"


async def test_after_sees_the_aggregated_stream_while_chunks_pass_untouched(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """On the stream path the chunks arrive unchanged and ``after`` sees their aggregate."""
    client = ChatClient(openai_client, model=MODEL, advisors=[Shout()])
    server.enqueue(ScriptedReply.text("hello there", chunk_size=3))

    async with client.stream("hi") as stream:
        texts = [chunk.text async for chunk in stream]

    assert "".join(texts) == "hello there"
    assert stream.response.text == "HELLO THERE"


ROUNDS: StateKey[int] = StateKey("rounds")


class CountRounds(BaseAdvisor):
    """Counts the model calls of a call in the per-call state."""

    order = 0

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        ctx.state[ROUNDS] = (ctx.state.get(ROUNDS) or 0) + 1
        ctx.context["rounds"] = ctx.state[ROUNDS]
        return request


async def test_per_call_state_is_fresh_for_every_call(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Advisors share per-call state through the context, never across calls."""
    client = ChatClient(openai_client, model=MODEL, advisors=[CountRounds()])
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))

    first = await client.call("one")
    second = await client.call("two")

    assert first.context["rounds"] == 1
    assert second.context["rounds"] == 1


class Cache:
    """Answers without calling the model, on both paths."""

    order = 0

    async def call(self, ctx: CallContext, request: ChatRequest, call_next: object) -> ChatResponse:
        return ChatResponse(message=AssistantMessage(text="cached"), finish_reason="stop")

    def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        return ChunkStream.of_response(
            ChatResponse(message=AssistantMessage(text="cached"), finish_reason="stop")
        )


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_can_answer_without_calling_the_model(
    streaming: bool, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """A short-circuiting advisor's answer reaches the caller and no request is sent."""
    client = ChatClient(openai_client, model=MODEL, advisors=[Cache()])

    response = await ask(client, "hi", streaming=streaming)

    assert response.text == "cached"
    assert server.requests == []


class Replay:
    """Yields chunks of its own without calling further in; the chain aggregates them."""

    order = 0

    async def call(self, ctx: CallContext, request: ChatRequest, call_next: object) -> ChatResponse:
        raise NotImplementedError

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        yield ChatChunk(text="par")
        yield ChatChunk(text="rot", finish_reason="stop")


async def test_chunks_of_an_advisor_that_calls_nothing_further_in_are_aggregated(
    openai_client: openai.AsyncOpenAI,
) -> None:
    """An advisor generating its own chunks gets a response aggregated from them."""
    client = ChatClient(openai_client, model=MODEL, advisors=[Replay()])

    async with client.stream("hi") as stream:
        texts = [chunk.text async for chunk in stream]

    assert texts == ["par", "rot"]
    assert stream.response.text == "parrot"


class Peek(BaseAdvisor):
    """Reads the response of the rest of the chain before it was read to the end."""

    async def stream(
        self, ctx: CallContext, request: ChatRequest, call_next: StreamNext
    ) -> AsyncIterator[ChatChunk]:
        chunks = call_next(ctx, request)
        async with aclosing(chunks):
            _ = chunks.response
            yield ChatChunk()


async def test_reading_a_chunk_stream_response_before_its_end_is_a_usage_error(
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A ChunkStream's response exists only once it was read to the end."""
    client = ChatClient(openai_client, model=MODEL, advisors=[Peek()])

    with pytest.raises(UsageError, match="read to the end"):
        async with client.stream("hi") as stream:
            async for _ in stream:
                pass
