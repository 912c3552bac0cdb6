"""Advisors: around the turn and around each model call, in the order given; Advisor hooks
on both paths; chunk streams."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field

import openai
import pytest
from chat_support import MODEL, PATHS, ask, label, sent, turn

from asyncsession import AssistantMessage, DefaultSessionService, SystemMessage, tool
from asyncsession.advisors import Advisor, CallContext, ChunkStream
from asyncsession.chat import ChatChunk, ChatRequest, ChatResponse, StreamNext
from asyncsession.exceptions import UsageError
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@dataclass
class Seen:
    """What a recording advisor saw, per call of its hooks."""

    log: list[str] = field(default_factory=list[str])
    prompts: list[list[str]] = field(default_factory=list[list[str]])
    session_existed: list[bool] = field(default_factory=list[bool])
    sessions: list[str | None] = field(default_factory=list["str | None"])
    responses: list[str] = field(default_factory=list[str])


class Recorder(Advisor):
    def __init__(self, name: str, seen: Seen, service: DefaultSessionService | None = None) -> None:
        self.name = name
        self.seen = seen
        self.service = service

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        self.seen.log.append(f"{self.name}>")
        self.seen.prompts.append([label(m) for m in request.messages])
        self.seen.sessions.append(None if ctx.session is None else ctx.session.id)
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
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    *,
    advisors: tuple[Advisor, ...] = (),
    model_advisors: tuple[Advisor, ...] = (),
) -> ChatClient:
    return ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        tools=[lookup],
        advisors=advisors,
        model_advisors=model_advisors,
    )


def two_rounds(server: ScriptedOpenAIServer) -> None:
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_advisor_around_the_turn_sees_the_whole_turn_once(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor of ``advisors`` runs once per call, before the session is resolved, on the
    bare prompt; its ``after`` sees the final reply, already stored."""
    seen = Seen()
    client = session_client(openai_client, service, advisors=(Recorder("outer", seen, service),))
    two_rounds(server)

    await ask(client, "go", streaming=streaming, **turn("s"))

    assert seen.log == ["outer>", "<outer"]
    assert seen.session_existed == [False]
    assert seen.sessions == [None]
    assert seen.prompts == [["U:go"]]
    assert seen.responses == ["A:done"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_model_advisor_sees_every_round_with_the_history_and_the_session(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """An advisor of ``model_advisors`` runs once per model call, on the exact prompt the model
    gets (history included), with the call's session resolved."""
    server.enqueue(ScriptedReply.text("first"))
    await ask(session_client(openai_client, service), "hi", streaming=streaming, **turn("s"))
    seen = Seen()
    client = session_client(openai_client, service, model_advisors=(Recorder("inner", seen),))
    two_rounds(server)

    await ask(client, "go", streaming=streaming, **turn("s"))

    assert seen.log == ["inner>", "<inner", "inner>", "<inner"]
    assert seen.prompts == [
        ["U:hi", "A:first", "U:go"],
        ["U:hi", "A:first", "U:go", "A[lookup]", "T[lookup->value of k]"],
    ]
    assert seen.sessions == ["s", "s"]
    assert seen.responses == ["A[lookup]", "A:done"]


@pytest.mark.parametrize("streaming", PATHS)
async def test_advisors_run_in_the_order_given(
    streaming: bool, server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Each list runs in the order given, the first outermost; the turn's advisors wrap the
    model's."""
    seen = Seen()
    client = ChatClient(
        openai_client,
        model=MODEL,
        advisors=[Recorder("a", seen), Recorder("b", seen)],
        model_advisors=[Recorder("m", seen), Recorder("n", seen)],
    )
    server.enqueue(ScriptedReply.text("ok"))

    await ask(client, "go", streaming=streaming)

    assert seen.log == ["a>", "b>", "m>", "n>", "<n", "<m", "<b", "<a"]


class Shout(Advisor):
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


class CountRounds(Advisor):
    """Counts the model calls of a call in the call's context."""

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        ctx.context["rounds"] = ctx.context.get("rounds", 0) + 1
        return request


async def test_per_call_state_is_fresh_for_every_call(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI
) -> None:
    """Advisors keep per-call state on the context, never across calls."""
    client = ChatClient(openai_client, model=MODEL, model_advisors=[CountRounds()])
    server.enqueue(ScriptedReply.text("a"), ScriptedReply.text("b"))

    first = await client.call("one")
    second = await client.call("two")

    assert first.context["rounds"] == 1
    assert second.context["rounds"] == 1


class Cache(Advisor):
    """Answers without calling the model, on both paths."""

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


class Replay(Advisor):
    """Yields chunks of its own without calling further in; the chain aggregates them."""

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


class Peek(Advisor):
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
