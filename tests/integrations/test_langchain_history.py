"""What ``LangChainHistory`` adds: real message events, a lossless round trip of every message
kind, end-to-end runs with LangChain's fake chat models, retries that store nothing twice,
windows that never split a turn, sync methods that never block the loop, compaction."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    FunctionMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from losing_service import LosingService

from asyncsession import DefaultSessionService, EventType, InMemorySessionRepository, SessionEvent
from asyncsession.compaction import SlidingWindowCompactionStrategy, TurnCountTrigger
from asyncsession.exceptions import StorageError, UsageError
from asyncsession.integrations._session import whole_turns
from asyncsession.integrations.langchain import (
    METADATA_KEY,
    LangChainHistory,
    _from_event,
    _starts_turn,
    _to_event,
)
from asyncsession.messages import (
    AssistantMessage,
    ToolResponseMessage,
    UserMessage,
)
from asyncsession.messages import (
    SystemMessage as OurSystemMessage,
)
from asyncsession.service import SessionService

EVERY_KIND: list[BaseMessage] = [
    SystemMessage(content="Be brief.", id="sys-1"),
    HumanMessage(
        content=[
            {"type": "text", "text": "What is in this?"},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            {"type": "image", "source_type": "url", "url": "https://example.com/cat.png"},
        ],
        name="alice",
        additional_kwargs={"future_field": [1, {"nested": True}]},
    ),
    AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "One image.", "id": "rs-1"},
            {"type": "text", "text": "Let me look."},
        ],
        tool_calls=[{"name": "lookup", "args": {"q": "cat"}, "id": "call-1", "type": "tool_call"}],
        invalid_tool_calls=[
            {"name": "broken", "args": "{not json", "id": "call-2", "error": "bad json"}
        ],
        usage_metadata={"input_tokens": 12, "output_tokens": 34, "total_tokens": 46},
        response_metadata={"model_name": "fake", "finish_reason": "tool_calls"},
        id="run-ai-1",
    ),
    ToolMessage(
        content="a cat",
        tool_call_id="call-1",
        name="lookup",
        artifact={"pixels": [1, 2, 3]},
        status="success",
    ),
    ToolMessage(content="bad arguments", tool_call_id="call-2", status="error"),
    FunctionMessage(content="42", name="legacy_fn"),
    ChatMessage(content="a note", role="critic"),
    AIMessageChunk(content="A cat.", id="run-ai-2"),
]


def reference(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """LangChain's own dict round trip: the definition of "reads back equal"."""
    return messages_from_dict(messages_to_dict(messages))


def tool_round(n: int) -> list[BaseMessage]:
    """A turn with a tool call: question, call, result, answer."""
    return [
        HumanMessage(content=f"q{n}"),
        AIMessage(content="", tool_calls=[{"name": "t", "args": {"n": n}, "id": f"c{n}"}]),
        ToolMessage(content=f"r{n}", tool_call_id=f"c{n}"),
        AIMessage(content=f"a{n}"),
    ]


async def test_every_kind_reads_back_equal(service: SessionService) -> None:
    """Content blocks with images and reasoning, tool calls, invalid tool calls, usage, names,
    ids, artifacts, statuses, unknown ``additional_kwargs``, chunks and custom roles read back
    equal to what was stored, and to LangChain's own round trip."""
    history = LangChainHistory("every-kind", service)
    await history.aadd_messages(EVERY_KIND)
    loaded = await history.aget_messages()
    assert loaded == EVERY_KIND
    assert loaded == reference(EVERY_KIND)
    assert [type(m) for m in loaded] == [type(m) for m in EVERY_KIND]


async def test_messages_are_real_message_events(service: SessionService) -> None:
    history = LangChainHistory("real", service)
    await history.aadd_messages(EVERY_KIND)
    events = await service.get_events("real")
    assert [e.type for e in events] == [
        EventType.SYSTEM,
        EventType.USER,
        EventType.ASSISTANT,
        EventType.TOOL,
        EventType.TOOL,
        EventType.TOOL,
        EventType.USER,
        EventType.ASSISTANT,
    ]
    system, user, reply, tool, *_ = (e.message for e in events)
    assert isinstance(system, OurSystemMessage)
    assert system.text == "Be brief."
    assert isinstance(user, UserMessage)
    assert user.text == "What is in this?"
    assert isinstance(reply, AssistantMessage)
    assert reply.text == "Let me look."
    assert [(c.id, c.name, c.arguments) for c in reply.tool_calls] == [
        ("call-1", "lookup", '{"q":"cat"}')
    ]
    assert isinstance(tool, ToolResponseMessage)
    assert [(r.id, r.name, r.data) for r in tool.responses] == [("call-1", "lookup", "a cat")]
    assert all(METADATA_KEY in e.metadata for e in events)


def test_unknown_fields_stay_in_the_log() -> None:
    """A field this LangChain version does not know is kept in the event as stored."""
    event = _to_event(AIMessage(content="hi", id="x"), "s", "e")
    stored = dict(event.metadata[METADATA_KEY])  # type: ignore[arg-type]
    stored["added_in_a_later_version"] = {"x": 1}
    later = event.model_copy(update={"metadata": {METADATA_KEY: stored}})
    assert later.metadata[METADATA_KEY]["added_in_a_later_version"] == {"x": 1}  # type: ignore[index,call-overload]
    assert _from_event(later) == [AIMessage(content="hi", id="x")]


def test_events_of_other_writers_convert() -> None:
    """A summary or a message our chat client wrote has no stored message: it converts."""
    assert _from_event(SessionEvent(session_id="s", message=UserMessage(text="hi"))) == [
        HumanMessage(content="hi")
    ]
    reply = _from_event(SessionEvent(session_id="s", message=AssistantMessage(text="yo")))
    assert reply == [AIMessage(content="yo")]


@pytest.mark.filterwarnings(  # langchain-core 1.x deprecates the runnable (removal in 2.0)
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)
async def test_runs_end_to_end_with_fake_chat_models(service: SessionService) -> None:
    """A prompt and a fake chat model under ``RunnableWithMessageHistory`` (``ainvoke`` and
    ``astream``): the model sees the stored history, the history holds every turn."""
    seen: list[int] = []
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    model = GenericFakeChatModel(messages=iter([AIMessage(content="one"), "two", "three"]))

    def count(value: Any) -> Any:
        seen.append(len(value.to_messages()))
        return value

    chain = RunnableWithMessageHistory(
        prompt | count | model,
        lambda session_id: LangChainHistory(session_id, service),
        input_messages_key="question",
        history_messages_key="history",
    )
    config: Any = {"configurable": {"session_id": "e2e"}}
    first = await chain.ainvoke({"question": "a"}, config)
    assert first.content == "one"
    second = await chain.ainvoke({"question": "b"}, config)
    assert second.content == "two"
    chunks = [chunk async for chunk in chain.astream({"question": "c"}, config)]
    assert "".join(str(c.content) for c in chunks) == "three"
    assert seen == [1, 3, 5]
    stored = await LangChainHistory("e2e", service).aget_messages()
    assert [(m.type, m.content) for m in stored] == [
        ("human", "a"),
        ("ai", "one"),
        ("human", "b"),
        ("ai", "two"),
        ("human", "c"),
        ("AIMessageChunk", "three"),  # what LangChain hands the history of a streamed run
    ]


async def test_fake_list_model_keeps_ids(service: SessionService) -> None:
    """A model's message ids are stored and read back."""
    model = FakeListChatModel(responses=["hello"])
    history = LangChainHistory("ids", service)
    question = HumanMessage(content="hi")
    reply = await model.ainvoke([question])
    await history.aadd_messages([question, reply])
    assert await history.aget_messages() == [question, reply]
    assert reply.id is not None


@pytest.mark.parametrize("after_write", [True, False], ids=["ack-lost", "not-written"])
@pytest.mark.parametrize("with_ids", [True, False], ids=["framework-ids", "drawn-ids"])
async def test_retry_after_a_failed_write_stores_once(
    service: SessionService, after_write: bool, with_ids: bool
) -> None:
    """Retrying ``aadd_messages`` whose write failed stores the messages exactly once."""
    losing = LosingService(service, fail=0, after_write=after_write)
    history = LangChainHistory("retry", losing)
    turn = [
        HumanMessage(content="q", id="h-1" if with_ids else None),
        AIMessage(content="a", id="a-1" if with_ids else None),
    ]
    await history.aadd_messages([HumanMessage(content="before")])
    losing.fail = 2
    for _ in range(2):
        with pytest.raises(StorageError):
            await history.aadd_messages(turn)
    await history.aadd_messages(turn)
    assert await history.aget_messages() == [HumanMessage(content="before"), *turn]
    await history.aadd_messages(turn)  # a success clears the memory: new, unless ids say not
    assert len(await history.aget_messages()) == (3 if with_ids else 5)


async def test_framework_ids_make_retries_from_anywhere_replays(service: SessionService) -> None:
    """A message with an id stored again by another history object is the same message."""
    losing = LosingService(service, fail=1, after_write=True)
    turn = [HumanMessage(content="q", id="h-1"), AIMessage(content="a", id="a-1")]
    with pytest.raises(StorageError):
        await LangChainHistory("anywhere", losing).aadd_messages(turn)
    await LangChainHistory("anywhere", service).aadd_messages(turn)
    assert await LangChainHistory("anywhere", service).aget_messages() == turn
    other = LangChainHistory("elsewhere", service)  # the same ids in another session: stored
    await other.aadd_messages(turn)
    assert await other.aget_messages() == turn


async def test_concurrent_adds_keep_every_batch_once_and_whole(service: SessionService) -> None:
    """Thirty concurrent adds from ten history objects store every batch once, contiguous."""
    batch = tool_round(0)
    histories = [LangChainHistory("busy", service) for _ in range(10)]
    await asyncio.gather(*(h.aadd_messages(batch) for h in histories for _ in range(3)))
    loaded = await histories[0].aget_messages()
    assert len(loaded) == 30 * len(batch)
    for start in range(0, len(loaded), len(batch)):
        assert loaded[start : start + len(batch)] == batch


async def test_windows_never_split_a_turn(service: SessionService) -> None:
    history = LangChainHistory("window", service)
    for n in range(4):
        await history.aadd_messages(tool_round(n))
    everything = await history.aget_messages()
    for size in range(1, len(everything) + 2):
        window = await LangChainHistory("window", service, history_size=size).aget_messages()
        assert window == everything[-len(window) :]
        assert len(window) >= min(size, len(everything))
        assert isinstance(window[0], HumanMessage)
        assert window == whole_turns(everything, size, _starts_turn)
    assert whole_turns(everything, 0, _starts_turn) == []


async def test_sync_methods_refuse_to_block_the_loop(service: SessionService) -> None:
    history = LangChainHistory("sync", service)
    with pytest.raises(UsageError, match="block"):
        history.add_messages([HumanMessage(content="x")])
    with pytest.raises(UsageError, match="block"):
        _ = history.messages
    with pytest.raises(UsageError, match="block"):
        history.clear()
    assert await history.aget_messages() == []
    await asyncio.to_thread(history.add_messages, [HumanMessage(content="x")])
    assert await asyncio.to_thread(lambda: history.messages) == [HumanMessage(content="x")]
    await asyncio.to_thread(history.clear)
    assert await history.aget_messages() == []


def test_sync_methods_without_a_loop() -> None:
    """No loop anywhere: the sync methods run their calls themselves (in-memory store)."""
    history = LangChainHistory("no-loop", DefaultSessionService(InMemorySessionRepository()))
    history.add_user_message("hi")
    history.add_ai_message("yo")
    assert history.messages == [HumanMessage(content="hi"), AIMessage(content="yo")]


async def test_compaction_works_on_the_same_log(service: SessionService) -> None:
    history = LangChainHistory(
        "compacted",
        service,
        trigger=TurnCountTrigger(3),
        strategy=SlidingWindowCompactionStrategy(max_events=4),
    )
    for n in range(4):
        await history.aadd_messages([HumanMessage(content=f"q{n}"), AIMessage(content=f"a{n}")])
    active = await history.aget_messages()
    assert len(active) <= 4
    stored = await service.get_events("compacted")
    assert len([e for e in stored if e.type != EventType.COMPACTION]) == 8
    assert active == await LangChainHistory("compacted", service).aget_messages()


async def test_clear_deletes_the_session(service: SessionService) -> None:
    history = LangChainHistory("cleared", service)
    await history.aadd_messages([HumanMessage(content="x", id="m")])
    await history.aclear()
    assert await service.find_by_id("cleared") is None
    await history.aadd_messages([HumanMessage(content="x", id="m")])  # starts it again
    assert await history.aget_messages() == [HumanMessage(content="x", id="m")]


async def test_system_messages_need_system_messages_enabled() -> None:
    history = LangChainHistory("sys", DefaultSessionService(InMemorySessionRepository()))
    with pytest.raises(UsageError):
        await history.aadd_messages([SystemMessage(content="x")])


@pytest.mark.parametrize(
    "values",
    [
        {"session_id": " "},
        {"session_id": "s", "history_size": 0},
        {"session_id": "s", "trigger": TurnCountTrigger(1)},
    ],
)
def test_bad_arguments_are_usage_errors(values: dict[str, Any]) -> None:
    with pytest.raises(UsageError):
        LangChainHistory(service=DefaultSessionService(InMemorySessionRepository()), **values)
