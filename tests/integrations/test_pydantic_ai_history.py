"""What ``PydanticAIHistory`` adds: real message events, a lossless round trip of every part
kind, end-to-end runs with Pydantic AI's test models, retries that store nothing twice, windows
that never split a tool call from its return, compaction on the same log."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime
from typing import Any, cast

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from losing_service import LosingService
from pydantic_ai import (
    Agent,
    BinaryContent,
    ImageUrl,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    NativeToolCallPart,
    NativeToolReturnPart,
    RetryFeedbackPart,
    RetryInfo,
    SystemPromptPart,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.usage import RequestUsage

from asyncsession import DefaultSessionService, EventType, InMemorySessionRepository, SessionEvent
from asyncsession.compaction import (
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TurnCountTrigger,
)
from asyncsession.exceptions import StorageError, UsageError
from asyncsession.integrations.pydantic_ai import (
    METADATA_KEY,
    PydanticAIHistory,
    _from_event,
    _to_event,
    whole_turns_window,
)
from asyncsession.messages import AssistantMessage, ToolResponseMessage, UserMessage
from asyncsession.service import SessionService

T0 = datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)

EVERY_PART: list[ModelMessage] = [
    ModelRequest(
        parts=[
            SystemPromptPart(content="Be brief.", timestamp=T0),
            UserPromptPart(
                content=[
                    "What is in these?",
                    ImageUrl(url="https://example.com/cat.png"),
                    BinaryContent(data=b"\x89PNG\r\n\x1a\n\x00\xff", media_type="image/png"),
                ],
                timestamp=T0,
            ),
        ],
        timestamp=T0,
        instructions="Answer in English.",
        run_id="run-1",
        metadata={"trace": {"id": 7}},
    ),
    ModelResponse(
        parts=[
            ThinkingPart(content="Two images.", signature="sig-abc", id="th-1", provider_name="x"),
            TextPart(content="Let me look."),
            ToolCallPart(tool_name="lookup", args={"q": "cat"}, tool_call_id="call-1"),
            NativeToolCallPart(
                tool_name="web_search", args={"query": "cat"}, tool_call_id="b-1", provider_name="x"
            ),
            NativeToolReturnPart(
                tool_name="web_search", content={"hits": 3}, tool_call_id="b-1", provider_name="x"
            ),
        ],
        usage=RequestUsage(input_tokens=12, output_tokens=34),
        model_name="test-model",
        timestamp=T0,
        provider_name="x",
        provider_response_id="resp-9",
        provider_details={"future_field": [1, 2, {"nested": True}]},
        finish_reason="tool_call",
        run_id="run-1",
    ),
    ModelRequest(
        parts=[
            ToolReturnPart(tool_name="lookup", content={"found": "a cat"}, tool_call_id="call-1"),
            ToolReturnPart(
                tool_name="other", content="bad arguments", tool_call_id="call-2", outcome="retried"
            ),
        ],
        timestamp=T0,
    ),
    ModelRequest(
        parts=[
            RetryFeedbackPart(
                content="Please answer in text.", retry=RetryInfo(cause="no_output", attempt=1)
            )
        ],
        timestamp=T0,
    ),
    ModelResponse(parts=[TextPart(content="A cat.")], timestamp=T0, finish_reason="stop"),
]


def reference(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """Pydantic AI's own JSON round trip: the definition of "reads back equal"."""
    return ModelMessagesTypeAdapter.validate_json(
        ModelMessagesTypeAdapter.dump_json(list(messages))
    )


def tool_agent() -> Agent[None, str]:
    agent = Agent(TestModel(), system_prompt="Be helpful.")

    @agent.tool_plain
    def add(a: int, b: int) -> int:
        return a + b

    return agent


async def test_every_part_kind_reads_back_equal(service: SessionService) -> None:
    """Every part kind, images and binary content, thinking signatures, builtin tool parts,
    usage, model name, timestamps, provider ids and details read back equal, and equal to
    Pydantic AI's own round trip."""
    history = PydanticAIHistory("every-part", service)
    await history.store(EVERY_PART)
    loaded = await history.load()
    assert loaded == reference(EVERY_PART)
    # Pydantic AI's own round trip narrows BinaryContent to BinaryImage (and fills an ImageUrl's
    # media type in), so only the first message differs from the objects as built.
    assert loaded[1:] == EVERY_PART[1:]


async def test_bytes_in_a_tool_return_come_back_as_bytes(service: SessionService) -> None:
    """Bytes and a bytearray a tool returned (on their own, nested in a dict and a list, in the
    part's metadata) load back as bytes, where Pydantic AI's own JSON round trip turns them
    into base64 text; a tool's text stays text, and storing them again stores nothing."""
    raw = bytes(range(256))
    returned = [
        ModelRequest(
            parts=[
                ToolReturnPart(tool_name="read", content=raw, tool_call_id="c1"),
                ToolReturnPart(
                    tool_name="pack",
                    content={"image": bytearray(b"\x89PNG"), "pages": [b"one", "two", 3]},
                    tool_call_id="c2",
                    metadata={"digest": b"\x00\xff"},
                ),
            ],
            timestamp=T0,
        )
    ]
    history = PydanticAIHistory("bytes", service)
    await history.store(returned)
    (loaded,) = await history.load()
    first, second = cast("list[ToolReturnPart]", loaded.parts)
    assert first.content == raw
    assert type(first.content) is bytes
    assert second.content == {"image": b"\x89PNG", "pages": [b"one", "two", 3]}
    assert type(second.content["image"]) is bytes
    assert second.metadata == {"digest": b"\x00\xff"}
    assert loaded == returned[0]
    assert isinstance(cast("ToolReturnPart", reference(returned)[0].parts[0]).content, str)
    await history.store(returned)
    assert len(await service.get_events("bytes")) == 1


async def test_messages_are_real_message_events(service: SessionService) -> None:
    """Requests, responses and tool returns are user, assistant and tool message events that our
    clients, compaction and recall read; the message itself is kept in metadata."""
    history = PydanticAIHistory("real", service)
    await history.store(EVERY_PART)
    events = await service.get_events("real")
    assert [e.type for e in events] == [
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.USER,
        EventType.ASSISTANT,
    ]
    user, reply, tools, retry, final = (e.message for e in events)
    assert isinstance(user, UserMessage)
    assert user.text == "What is in these?"
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call-1", "lookup", '{"q":"cat"}')
    ]
    assert isinstance(tools, ToolResponseMessage)
    assert [(r.id, r.name) for r in tools.responses] == [("call-1", "lookup"), ("call-2", "other")]
    assert isinstance(retry, UserMessage)
    assert "Please answer in text." in retry.text
    assert isinstance(final, AssistantMessage)
    assert final.text == "A cat."
    assert all(METADATA_KEY in e.metadata for e in events)
    assert events[0].timestamp == T0


def test_unknown_fields_stay_in_the_log() -> None:
    """A field this Pydantic AI version does not know (written by a later one) is kept in the
    event as stored; reading it drops only what this version cannot represent."""
    event = _to_event(EVERY_PART[-1], "s", "e")
    stored = dict(event.metadata[METADATA_KEY])  # type: ignore[arg-type]
    stored["added_in_a_later_version"] = {"x": 1}
    later = event.model_copy(update={"metadata": {METADATA_KEY: stored}})
    assert later.metadata[METADATA_KEY]["added_in_a_later_version"] == {"x": 1}  # type: ignore[index,call-overload]
    assert _from_event(later) == EVERY_PART[-1]


def test_events_of_other_writers_convert() -> None:
    """A summary or a message our chat client wrote has no stored message: it converts."""
    user = _from_event(SessionEvent(session_id="s", message=UserMessage(text="hi")))
    assert isinstance(user, ModelRequest)
    assert user.parts[0].content == "hi"
    reply = _from_event(SessionEvent(session_id="s", message=AssistantMessage(text="yo")))
    assert isinstance(reply, ModelResponse)
    assert reply.text == "yo"


async def test_agent_runs_end_to_end(service: SessionService) -> None:
    """Runs with TestModel (tools called), streamed runs and ``iter`` store their new messages
    and hand the next run the same history Pydantic AI keeps itself."""
    agent = tool_agent()
    history = PydanticAIHistory("e2e", service)
    first = await agent.run("add", message_history=await history.load())
    await history.store(first.new_messages())
    assert await history.load() == first.all_messages()
    assert any(isinstance(p, ToolCallPart) for m in first.all_messages() for p in m.parts)

    async with agent.run_stream("again", message_history=await history.load()) as streamed:
        async for _ in streamed.stream_text():
            pass
    await history.store(streamed.new_messages())
    assert await history.load() == streamed.all_messages()

    async with agent.iter("third", message_history=await history.load()) as run:
        async for _ in run:
            pass
    assert run.result is not None
    await history.store(run.result.new_messages())
    assert await history.load() == run.result.all_messages()
    assert await history.load() == reference(run.result.all_messages())


async def test_function_model_sees_the_stored_history(service: SessionService) -> None:
    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart(content=f"reply {len(messages)}")])

    async def stream(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        seen.append(list(messages))
        yield "streamed"

    agent = Agent(FunctionModel(model, stream_function=stream))
    history = PydanticAIHistory("fn", service)
    for prompt in ("one", "two"):
        result = await agent.run(prompt, message_history=await history.load())
        await history.store(result.new_messages())
    assert [m.kind for m in seen[-1]] == ["request", "response", "request"]
    assert (await history.load())[-1] == result.all_messages()[-1]


@pytest.mark.parametrize("after_write", [True, False], ids=["ack-lost", "not-written"])
async def test_retry_after_a_failed_write_stores_once(
    service: SessionService, after_write: bool
) -> None:
    """Retrying ``store`` of a run's messages whose write failed stores them exactly once; so
    does storing them again from another history object (a retry of another process)."""
    losing = LosingService(service, fail=0, after_write=after_write)
    history = PydanticAIHistory("retry", losing)
    result = await tool_agent().run("add")
    await history.store(EVERY_PART[-1:])
    losing.fail = 2
    for _ in range(2):
        with pytest.raises(StorageError):
            await history.store(result.new_messages())
    await history.store(result.new_messages())
    assert await history.load() == [*EVERY_PART[-1:], *result.new_messages()]
    await PydanticAIHistory("retry", service).store(result.new_messages())
    assert len(await history.load()) == 1 + len(result.new_messages())


async def test_storing_all_messages_again_stores_only_what_is_new(
    service: SessionService,
) -> None:
    """The common idiom ``store(result.all_messages())`` after each run keeps one copy of each
    message: four runs of two messages each are 8 messages, not 20."""
    agent = Agent(TestModel(custom_output_text="ok"))
    history = PydanticAIHistory("idiom", service)
    for question in ("one", "two", "three", "four"):
        result = await agent.run(question, message_history=await history.load())
        await history.store(result.all_messages())
        await history.store(result.all_messages())  # and once more, by mistake
    assert len(result.all_messages()) == 8
    assert await history.load() == result.all_messages()
    events = await service.get_events("idiom")
    assert len(events) == 8
    fresh = PydanticAIHistory("idiom", service)  # another object (a later request) stores none
    await fresh.store(result.all_messages())
    assert len(await service.get_events("idiom")) == 8


class FixedSummarizer:
    """A summarizer that always writes the same summary (the model call is not under test)."""

    async def summarize(self, system_prompt: str, prompt: str) -> str:
        return "SUMMARY of the first questions."


async def test_all_messages_after_compaction_keep_the_summary_once(service: SessionService) -> None:
    """After compaction wrote a summary turn, ``load`` hands it in (converted from its events),
    and storing ``all_messages()`` stores neither the summary nor the archived messages again:
    only the run's two new messages."""
    agent = Agent(TestModel(custom_output_text="ok"))
    history = PydanticAIHistory("compacted", service)
    for question in ("one", "two", "three", "four"):
        result = await agent.run(question, message_history=await history.load())
        await history.store(result.all_messages())
    strategy = RecursiveSummarizationCompactionStrategy(
        FixedSummarizer(), max_events_to_keep=2, overlap_size=1
    )
    assert (await service.compact("compacted", TurnCountTrigger(2), strategy)).applied
    before = await service.get_events("compacted")
    active = await history.load()
    assert [shape[1] for shape in map(kinds, active[:2])] == [["user-prompt"], ["text"]]
    result = await agent.run("five", message_history=active)
    await history.store(result.all_messages())
    after = await service.get_events("compacted")
    assert [e.id for e in after[: len(before)]] == [e.id for e in before]
    assert len(after) == len(before) + 2
    assert (await history.load())[-2:] == result.new_messages()


def kinds(message: ModelMessage) -> tuple[str, list[str]]:
    return (message.kind, [part.part_kind for part in message.parts])


async def test_concurrent_stores_keep_every_batch_once_and_whole(service: SessionService) -> None:
    """Thirty concurrent stores of ten runs' messages, each batch stored by three history
    objects at once: every batch is stored once, contiguous."""
    agent = tool_agent()
    batches = [(await agent.run(f"add {n}")).new_messages() for n in range(10)]
    histories = [PydanticAIHistory("busy", service) for _ in range(30)]
    await asyncio.gather(*(h.store(batches[n % 10]) for n, h in enumerate(histories)))
    loaded = await histories[0].load()
    assert len(loaded) == sum(len(batch) for batch in batches)
    found = [loaded[start : start + 4] for start in range(0, len(loaded), 4)]
    assert sorted(found, key=str) == sorted(batches, key=str)


async def test_windows_never_split_a_tool_call_from_its_return(service: SessionService) -> None:
    history = PydanticAIHistory("window", service)
    agent = tool_agent()
    for prompt in ("a", "b", "c"):
        result = await agent.run(prompt, message_history=await history.load())
        await history.store(result.new_messages())
    everything = await history.load()
    for limit in range(1, len(everything) + 2):
        window = await history.load(limit=limit)
        assert window == everything[-len(window) :]
        assert len(window) >= min(limit, len(everything))
        assert isinstance(window[0], ModelRequest)
        assert not any(isinstance(p, ToolReturnPart) for p in window[0].parts)
        processed = whole_turns_window(limit)(everything)
        assert processed == window
    assert await history.load(limit=0) == []


async def test_the_processor_hands_the_agent_a_window(service: SessionService) -> None:
    from pydantic_ai.capabilities import ProcessHistory

    seen: list[list[ModelMessage]] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(list(messages))
        return ModelResponse(parts=[TextPart(content="ok")])

    agent = Agent(FunctionModel(model), capabilities=[ProcessHistory(whole_turns_window(3))])
    history = PydanticAIHistory("processor", service)
    for prompt in ("1", "2", "3", "4"):
        result = await agent.run(prompt, message_history=await history.load())
        await history.store(result.new_messages())
    assert len(seen[-1]) == 3
    assert isinstance(seen[-1][0], ModelRequest)


async def test_compaction_works_on_the_same_log(service: SessionService) -> None:
    """A trigger and a strategy compact after a store; ``load`` is the active view."""
    history = PydanticAIHistory(
        "compacted",
        service,
        trigger=TurnCountTrigger(3),
        strategy=SlidingWindowCompactionStrategy(max_events=4),
    )
    agent = Agent(TestModel())
    for prompt in ("1", "2", "3", "4"):
        result = await agent.run(prompt, message_history=await history.load())
        await history.store(result.new_messages())
    active = await history.load()
    assert len(active) <= 4
    log = await service.get_events("compacted")
    assert len([e for e in log if e.is_message]) == 8
    assert all(e.type == EventType.COMPACTION for e in log if not e.is_message)
    assert active == (await PydanticAIHistory("compacted", service).load())


async def test_system_only_requests_need_system_messages_enabled() -> None:
    history = PydanticAIHistory("sys", DefaultSessionService(InMemorySessionRepository()))
    with pytest.raises(UsageError):
        await history.store([ModelRequest(parts=[SystemPromptPart(content="x")])])


@pytest.mark.parametrize(
    "values",
    [{"session_id": " "}, {"session_id": "s", "trigger": TurnCountTrigger(1)}],
)
def test_bad_arguments_are_usage_errors(values: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        PydanticAIHistory(service=DefaultSessionService(InMemorySessionRepository()), **values)


_text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
_ids = st.text("abcdef0123456789", min_size=1, max_size=8)
_request = st.builds(
    lambda texts, returns: ModelRequest(
        parts=[UserPromptPart(content=t, timestamp=T0) for t in texts]
        + [
            ToolReturnPart(tool_name=n, content=c, tool_call_id=i, timestamp=T0)
            for n, c, i in returns
        ],
        timestamp=T0,
    ),
    st.lists(_text, max_size=2),
    st.lists(st.tuples(_text, _text, _ids), max_size=2),
)
_response = st.builds(
    lambda texts, thoughts, calls: ModelResponse(
        parts=[ThinkingPart(content=c, signature=s) for c, s in thoughts]
        + [TextPart(content=t) for t in texts]
        + [ToolCallPart(tool_name=n, args={"v": a}, tool_call_id=i) for n, a, i in calls],
        timestamp=T0,
    ),
    st.lists(_text, max_size=2),
    st.lists(st.tuples(_text, _text), max_size=1),
    st.lists(st.tuples(_text, _text, _ids), max_size=2),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(_request, _response), max_size=6))
def test_round_trip_property(messages: list[ModelMessage]) -> None:
    """Any history of text, thinking, tool calls and returns converts to events and back equal."""
    events = [_to_event(m, "prop", str(i)) for i, m in enumerate(messages)]
    assert [_from_event(SessionEvent.model_validate_json(e.model_dump_json())) for e in events] == (
        reference(messages)
    )
