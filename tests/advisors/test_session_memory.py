"""Session memory, the reference's behaviours as steps of the turn: sessions, history, guards,
system messages, writes, ids, compaction."""

from __future__ import annotations

import logging
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, ask, sent, stored, turn

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    Message,
    SystemMessage,
    ToolCall,
    ToolResponse,
    ToolResponseMessage,
    UserMessage,
    tool,
)
from asyncsession.advisors import (
    EVENT_FILTER_CONTEXT_KEY,
    IdempotentSessionEventIdGenerator,
    MessageFilter,
)
from asyncsession.compaction import (
    CompactionRequest,
    CompactionResult,
    SlidingWindowCompactionStrategy,
)
from asyncsession.exceptions import AccessDenied, UsageError
from asyncsession.messages import MessageType
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def memory_client(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    *,
    loop: bool = False,
    **options: Any,
) -> ChatClient:
    return ChatClient(
        openai_client, model=MODEL, sessions=service, tools=[lookup] if loop else (), **options
    )


async def seed(service: DefaultSessionService, *messages: Message, user: str = "alice") -> None:
    """Create session "s" owned by ``user`` with these messages in its log."""
    await service.create(CreateSessionRequest(id="s", user_id=user))
    for message in messages:
        await service.append_message("s", message)


def call(call_id: str, name: str = "lookup") -> AssistantMessage:
    return AssistantMessage(tool_calls=(ToolCall(id=call_id, name=name, arguments="{}"),))


def result(call_id: str, data: str = "r", name: str = "lookup") -> ToolResponseMessage:
    return ToolResponseMessage(responses=(ToolResponse(id=call_id, name=name, data=data),))


# Sessions: id, creation, ownership.


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_call_without_a_session_id_fails_before_the_model_is_called(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """No session id in the context is a UsageError; nothing is sent or stored."""
    client = memory_client(openai_client, service)

    with pytest.raises(UsageError, match="session_id"):
        await ask(client, "hi", streaming=streaming)

    assert server.requests == []


async def test_a_missing_session_is_created_with_the_contexts_user_and_metadata(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The session is auto-created with the call's user id and session metadata."""
    server.enqueue(ScriptedReply.text("hello"), ScriptedReply.text("hello"))
    client = memory_client(openai_client, service)

    await client.call("hi", **turn("s", "bob"), metadata={"topic": "x"})
    await client.call("hi", **turn("t"), metadata={"topic": "y"})

    s = await service.find_by_id("s")
    t = await service.find_by_id("t")
    assert s is not None
    assert t is not None
    assert (s.user_id, s.metadata) == ("bob", {"topic": "x"})
    assert (t.user_id, t.metadata) == ("default-user", {"topic": "y"})


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_foreign_user_is_refused(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """A user id that does not own the session is AccessDenied: nothing is sent or stored."""
    await seed(service, UserMessage(text="secret"), user="alice")

    with pytest.raises(AccessDenied, match="does not belong to user 'mallory'"):
        await ask(
            memory_client(openai_client, service),
            "show me",
            streaming=streaming,
            **turn("s", "mallory"),
        )

    assert server.requests == []
    assert await stored(service, "s") == ["U:secret"]


async def test_without_a_user_id_the_owner_is_not_checked(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Callers that authorise upstream (no user id in the context) are not refused."""
    await seed(service, user="alice")
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service).call("hi", **turn("s"))

    assert await stored(service, "s") == ["U:hi", "A:ok"]


def test_compaction_is_a_pair_or_a_compactor(service: DefaultSessionService) -> None:
    """A trigger without a strategy, or anything that is neither, is a usage error."""
    client = openai.AsyncOpenAI(api_key="t")
    with pytest.raises(UsageError, match="pair"):
        ChatClient(client, model=MODEL, sessions=service, compaction=(always,))  # type: ignore[arg-type]
    with pytest.raises(UsageError, match="compactor"):
        ChatClient(client, model=MODEL, sessions=service, compaction=object())  # type: ignore[arg-type]


# History.


@pytest.mark.parametrize("streaming", PATHS)
async def test_history_is_prepended_and_the_turn_stored(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The second call sends the first turn before its own message; both turns are stored."""
    server.enqueue(ScriptedReply.text("Hi Ann."), ScriptedReply.text("You are Ann."))
    client = memory_client(openai_client, service)

    await ask(client, "I am Ann.", streaming=streaming, **turn("s"))
    reply = await ask(client, "Who am I?", streaming=streaming, **turn("s"))

    assert reply.text == "You are Ann."
    assert sent(server.requests[1].messages) == ["U:I am Ann.", "A:Hi Ann.", "U:Who am I?"]
    assert await stored(service, "s") == [
        "U:I am Ann.",
        "A:Hi Ann.",
        "U:Who am I?",
        "A:You are Ann.",
    ]


async def test_archived_events_never_reach_the_prompt(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Even with an ``all()`` filter, the active view is merged in and archived events stay out."""
    await seed(service, UserMessage(text="old"), AssistantMessage(text="old reply"))
    assert (await service.compact("s", always, ArchiveAll())).applied
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service, event_filter=EventFilter.all()).call(
        "new", **turn("s")
    )

    assert sent(server.requests[0].messages) == ["U:new"]


async def test_a_per_call_filter_is_merged_over_the_advisors(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """``event_filter=`` narrows the history of one call."""
    await seed(
        service,
        UserMessage(text="u1"),
        AssistantMessage(text="a1"),
        UserMessage(text="u2"),
        AssistantMessage(text="a2"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service).call(
        "u3", **turn("s"), event_filter=EventFilter.last_n(2)
    )

    assert sent(server.requests[0].messages) == ["U:u2", "A:a2", "U:u3"]


async def test_a_per_call_filter_of_the_wrong_type_is_a_usage_error(
    openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Only an EventFilter (or None) may be a call's filter, under the keyword or the
    reference's key."""
    with pytest.raises(UsageError, match="must be an EventFilter"):
        await memory_client(openai_client, service).call(
            "hi",
            **turn("s"),
            event_filter=5,  # type: ignore[arg-type]
        )
    with pytest.raises(UsageError, match="must be an EventFilter"):
        await memory_client(openai_client, service).call(
            "hi", **turn("s"), context={EVENT_FILTER_CONTEXT_KEY: 5}
        )


async def test_a_last_n_window_that_starts_mid_turn_is_extended_to_the_turn_start(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """``last_n(2)`` over ``U1 A1 U2 A2(call) T2 A2'`` sends the whole second turn."""
    await seed(
        service,
        UserMessage(text="u1"),
        AssistantMessage(text="a1"),
        UserMessage(text="u2"),
        call("c2"),
        result("c2"),
        AssistantMessage(text="a2"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service, event_filter=EventFilter.last_n(2)).call(
        "u3", **turn("s")
    )

    assert sent(server.requests[0].messages) == ["U:u2", "A[lookup]", "T:c2->r", "A:a2", "U:u3"]


# The read guard.


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_orphaned_stored_tool_call_never_reaches_the_model(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A stored call without its result is dropped from the prompt with one warning."""
    await seed(
        service,
        UserMessage(text="u1"),
        call("lost"),
        UserMessage(text="u2"),
        AssistantMessage(text="a2"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    with caplog.at_level(logging.WARNING, logger="asyncsession.turn"):
        await ask(memory_client(openai_client, service), "u3", streaming=streaming, **turn("s"))

    assert sent(server.requests[0].messages) == ["U:u1", "U:u2", "A:a2", "U:u3"]
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "dropped 1 tool call/result message(s)" in warnings[0].getMessage()
    assert len(await stored(service, "s")) == 6  # the log itself is untouched


async def test_orphaned_results_and_half_answered_parallel_calls_are_dropped(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A result without its call, and a parallel call answered in part, go with their answers."""
    parallel = AssistantMessage(
        tool_calls=(ToolCall(id="p1", name="lookup"), ToolCall(id="p2", name="lookup"))
    )
    await seed(
        service,
        UserMessage(text="u1"),
        result("stray"),
        UserMessage(text="u2"),
        parallel,
        result("p1"),
        UserMessage(text="u3"),
        call("c"),
        result("c"),
        AssistantMessage(text="a3"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    with caplog.at_level(logging.WARNING, logger="asyncsession.turn"):
        await memory_client(openai_client, service).call("u4", **turn("s"))

    assert sent(server.requests[0].messages) == [
        "U:u1",
        "U:u2",
        "U:u3",
        "A[lookup]",
        "T:c->r",
        "A:a3",
        "U:u4",
    ]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1


async def test_a_stored_call_answered_in_the_prompt_is_kept(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A stored call whose result the caller sends now (client-side tools) is kept, and the
    result is stored because its call is the newest stored event."""
    await seed(service, UserMessage(text="u1"), call("c"))
    server.enqueue(ScriptedReply.text("thanks"))

    await memory_client(openai_client, service).call(
        messages=[result("c", "client data")], **turn("s")
    )

    assert sent(server.requests[0].messages) == ["U:u1", "A[lookup]", "T:c->client data"]
    assert await stored(service, "s") == [
        "U:u1",
        "A[lookup]",
        "T[lookup->client data]",
        "A:thanks",
    ]


async def test_separate_results_of_a_parallel_call_are_stored_as_one_message(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A trailing run of tool-result messages answering one stored call is stored as one."""
    parallel = AssistantMessage(
        tool_calls=(ToolCall(id="p1", name="lookup"), ToolCall(id="p2", name="lookup"))
    )
    await seed(service, UserMessage(text="u1"), parallel)
    server.enqueue(ScriptedReply.text("both"))

    await memory_client(openai_client, service).call(
        messages=[result("p1", "one"), result("p2", "two")], **turn("s")
    )

    assert await stored(service, "s") == [
        "U:u1",
        "A[lookup,lookup]",
        "T[lookup->one,lookup->two]",
        "A:both",
    ]


# The write guard and the MessageFilter.


@pytest.mark.parametrize("streaming", PATHS)
async def test_a_filter_that_skips_tool_results_does_not_strand_a_stored_call(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The result of a stored call is stored although the filter rejects TOOL, with a warning."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"}, id="c")]),
        ScriptedReply.text("done"),
        ScriptedReply.text("again"),
    )
    only_chat = MessageFilter.by_message_type(MessageType.USER, MessageType.ASSISTANT)
    client = memory_client(openai_client, service, loop=True, message_filter=only_chat)

    with caplog.at_level(logging.WARNING, logger="asyncsession.turn"):
        await ask(client, "go", streaming=streaming, **turn("s"))
        await ask(client, "next", streaming=streaming, **turn("s"))

    assert await stored(service, "s") == [
        "U:go",
        "A[lookup]",
        "T[lookup->value of k]",
        "A:done",
        "U:next",
        "A:again",
    ]
    assert sent(server.requests[2].messages)[:4] == [
        "U:go",
        "A[lookup]",
        "T:c->value of k",
        "A:done",
    ]
    assert any("although the MessageFilter rejects it" in r.getMessage() for r in caplog.records)


async def test_the_result_of_a_call_the_filter_rejected_is_not_stored(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A filter that skips tool calls but accepts results stores neither: no orphan result."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )
    no_calls = MessageFilter(lambda m: not (isinstance(m, AssistantMessage) and m.tool_calls))
    client = memory_client(openai_client, service, loop=True, message_filter=no_calls)

    with caplog.at_level(logging.WARNING, logger="asyncsession.turn"):
        await client.call("go", **turn("s"))

    assert await stored(service, "s") == ["U:go", "A:done"]
    assert any("although the MessageFilter accepts it" in r.getMessage() for r in caplog.records)


async def test_when_the_read_cannot_tell_the_filter_decides_about_a_result(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Under a page window the newest stored event is unknown: the MessageFilter decides."""
    await seed(service, UserMessage(text="u1"), call("c"))
    server.enqueue(ScriptedReply.text("ok"))
    chat_only = MessageFilter.by_message_type(MessageType.USER, MessageType.ASSISTANT)
    client = memory_client(
        openai_client,
        service,
        event_filter=EventFilter(page=0, page_size=50),
        message_filter=chat_only,
    )

    await client.call(messages=[result("c", "data")], **turn("s"))

    assert await stored(service, "s") == ["U:u1", "A[lookup]", "A:ok"]


async def test_empty_assistant_frames_are_not_stored_by_default(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """The default MessageFilter skips an empty assistant reply."""
    server.enqueue(ScriptedReply.text(""))

    await memory_client(openai_client, service).call("hi", **turn("s"))

    assert await stored(service, "s") == ["U:hi"]


async def test_a_message_filter_keeps_messages_out_of_the_log_not_the_prompt(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A rejected message is still sent to the model, but never stored."""
    server.enqueue(ScriptedReply.text("noted"))
    secret = MessageFilter.contains_text("password").negate() & MessageFilter.skip_empty_messages()

    await memory_client(openai_client, service, message_filter=secret).call(
        "my password is hunter2", **turn("s")
    )

    assert sent(server.requests[0].messages) == ["U:my password is hunter2"]
    assert await stored(service, "s") == ["A:noted"]


# System messages.


async def test_system_messages_move_to_the_front_and_exact_repeats_are_sent_once(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Every system message goes first in its order; an exact text repeat is dropped, none
    is rewritten."""
    await seed(service, UserMessage(text="u1"), AssistantMessage(text="a1"))
    client = ChatClient(
        openai_client,
        model=MODEL,
        sessions=service,
        default_messages=[SystemMessage(text="Be brief.")],
    )
    server.enqueue(ScriptedReply.text("ok"))

    await client.call(
        messages=[
            UserMessage(text="u2"),
            SystemMessage(text="Answer in French."),
            SystemMessage(text="Be brief."),
        ],
        **turn("s"),
    )

    assert sent(server.requests[0].messages) == [
        "S:Be brief.",
        "S:Answer in French.",
        "U:u1",
        "A:a1",
        "U:u2",
    ]


async def test_only_the_latest_stored_system_message_is_sent(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Of the stored system messages only the newest is sent, at the front."""
    await seed(
        service,
        SystemMessage(text="v1"),
        UserMessage(text="u1"),
        AssistantMessage(text="a1"),
        SystemMessage(text="v2"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service).call("u2", **turn("s"))

    assert sent(server.requests[0].messages) == ["S:v2", "U:u1", "A:a1", "U:u2"]


async def test_a_window_never_drops_the_stored_system_message(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """Under a ``last_n`` window the latest stored system message is looked up separately."""
    await seed(
        service,
        SystemMessage(text="rules"),
        UserMessage(text="u1"),
        AssistantMessage(text="a1"),
        UserMessage(text="u2"),
        AssistantMessage(text="a2"),
    )
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service, event_filter=EventFilter.last_n(2)).call(
        "u3", **turn("s")
    )

    assert sent(server.requests[0].messages) == ["S:rules", "U:u2", "A:a2", "U:u3"]


# Rounds of the tool loop and the duplicate-history guard.


@pytest.mark.parametrize("streaming", PATHS)
async def test_round_two_does_not_prepend_the_history_twice(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Each round sends the history once, followed by the turn so far."""
    await seed(service, UserMessage(text="u1"), AssistantMessage(text="a1"))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"}, id="c")]),
        ScriptedReply.text("done"),
    )

    await ask(
        memory_client(openai_client, service, loop=True),
        "u2",
        streaming=streaming,
        **turn("s"),
    )

    assert sent(server.requests[0].messages) == ["U:u1", "A:a1", "U:u2"]
    assert sent(server.requests[1].messages) == [
        "U:u1",
        "A:a1",
        "U:u2",
        "A[lookup]",
        "T:c->value of k",
    ]


async def test_history_the_caller_already_sends_is_not_prepended_again(
    server: ScriptedOpenAIServer, openai_client: openai.AsyncOpenAI, service: DefaultSessionService
) -> None:
    """A prompt that already holds the stored history (compared by content) gets no copy."""
    await seed(service, UserMessage(text="u1"), AssistantMessage(text="a1"))
    server.enqueue(ScriptedReply.text("ok"))

    await memory_client(openai_client, service).call(
        messages=[
            {"role": "user", "content": "u1"},
            {"role": "assistant", "content": "a1"},
            {"role": "user", "content": "u2"},
        ],
        **turn("s"),
    )

    assert sent(server.requests[0].messages) == ["U:u1", "A:a1", "U:u2"]
    assert await stored(service, "s") == ["U:u1", "A:a1", "U:u2", "A:ok"]


# Event ids.


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_ids_of_stored_events_are_on_the_response(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Request-side and reply-side event ids of the call are reported, in order."""
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("done"),
    )

    response = await ask(
        memory_client(openai_client, service, loop=True),
        "go",
        streaming=streaming,
        **turn("s"),
    )

    ids = [e.id for e in await service.get_events("s")]
    assert response.request_event_ids == (ids[0], ids[2])
    assert response.response_event_ids == (ids[1], ids[3])


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_idempotent_generator_turns_a_retried_request_into_a_no_op(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """The same request with the same reply writes the same ids, so the retry stores nothing."""
    client = memory_client(
        openai_client, service, loop=True, event_ids=IdempotentSessionEventIdGenerator()
    )
    for _ in range(2):
        server.enqueue(
            ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"}, id="c")]),
            ScriptedReply.text("done"),
        )

    first = await ask(client, "go", streaming=streaming, **turn("s"))
    version = await service.get_event_version("s")
    second = await ask(client, "go", streaming=streaming, **turn("s"))

    assert await stored(service, "s") == ["U:go", "A[lookup]", "T[lookup->value of k]", "A:done"]
    assert await service.get_event_version("s") == version
    assert first.response_event_ids == second.response_event_ids


# Compaction.


class CountingStrategy:
    """A sliding window that counts how often it was asked to compact."""

    def __init__(self, max_events: int) -> None:
        self.inner = SlidingWindowCompactionStrategy(max_events)
        self.runs = 0

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        self.runs += 1
        return await self.inner.compact(request)


def always(request: CompactionRequest) -> bool:
    return True


class ArchiveAll:
    """A compaction that takes every event out of the active view."""

    async def compact(self, request: CompactionRequest) -> CompactionResult:
        return CompactionResult(compacted_events=(), archived_events=request.events)


async def active(service: DefaultSessionService) -> list[str]:
    events = await service.get_events("s", EventFilter.active())
    return [e.message.text or "" for e in events if e.message is not None]


@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_compacts_once_it_is_complete(
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
) -> None:
    """Compaction runs once per complete turn, never after a round that asked for tools."""
    await seed(service, UserMessage(text="u1"), AssistantMessage(text="a1"))
    strategy = CountingStrategy(max_events=2)
    client = memory_client(openai_client, service, loop=True, compaction=(always, strategy))
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("a2"),
    )

    await ask(client, "u2", streaming=streaming, **turn("s"))

    assert strategy.runs == 1
    assert await active(service) == ["u2", "", "", "a2"]


async def test_a_failing_compaction_does_not_fail_the_call(
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A strategy that raises is logged; the reply is returned and stored."""

    class Broken:
        async def compact(self, request: CompactionRequest) -> CompactionResult:
            raise RuntimeError("summarizer down")

    server.enqueue(ScriptedReply.text("fine"))
    client = memory_client(openai_client, service, compaction=(always, Broken()))

    with caplog.at_level(logging.WARNING, logger="asyncsession.turn"):
        response = await client.call("hi", **turn("s"))

    assert response.text == "fine"
    assert await stored(service, "s") == ["U:hi", "A:fine"]
    assert any("Compaction of session 's' failed" in r.getMessage() for r in caplog.records)
