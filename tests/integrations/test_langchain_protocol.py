"""LangChain's own chat history tests (``tests/unit_tests/chat_history/test_chat_history.py``)
and ``RunnableWithMessageHistory`` tests (``tests/unit_tests/runnables/test_history.py``) of
langchain-core 1.8, run on the history under test.

Each test runs on LangChain's ``InMemoryChatMessageHistory`` (the reference) and on
``LangChainHistory`` over both stores, with the original assertions. The sync tests are sync,
as LangChain wrote them: no event loop runs in the test's thread, and the MongoDB store is one
built as a plain script builds it (``MongoSessionRepository.from_uri``), whose client no loop
has used. The async tests run on the test's loop, which the MongoDB client belongs to. One
change, the same for every history: where an original compares its dict of history objects
(``store == {...}``), the translation compares each history's messages, since our histories are
handles on a store, not lists. The chat-history tests that subclass ``BaseChatMessageHistory``
test the base class's defaults (``add_message`` from ``add_messages`` and back): here the same
calls and assertions run on the history itself. The input and output schema tests check
``RunnableWithMessageHistory``'s own schema, which no history takes part in, and are left out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable, RunnableBinding, RunnableLambda
from langchain_core.runnables.config import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.runnables.utils import ConfigurableFieldSpec
from langchain_core.tracers.root_listeners import RootListenersTracer
from langchain_support import ChatHistoryFactory

pytestmark = pytest.mark.filterwarnings(
    # langchain-core 1.x deprecates RunnableWithMessageHistory and InMemoryChatMessageHistory
    # (for removal in 2.0) in favour of LangGraph's persistence; they still run as tested.
    "ignore::langchain_core._api.deprecation.LangChainDeprecationWarning"
)


def said(messages: list[BaseMessage], *extra: str) -> str:
    return "you said: " + "\n".join(
        [str(m.content) for m in messages if isinstance(m, HumanMessage)] + list(extra)
    )


class LengthChatModel(BaseChatModel):
    """A fake chat model that returns the length of the messages passed in."""

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(content=str(len(messages))))]
        )

    @property
    def _llm_type(self) -> str:
        return "length-fake-chat-model"


class RaisingListenersLambda(RunnableLambda[Any, Any]):
    """A ``RunnableLambda`` whose sync listeners let their errors through (LangChain swallows
    and logs them by default), so a history write that fails in ``_exit_history`` fails the
    call: the runnable of LangChain's two ``test_get_output_messages_*`` tests."""

    def with_listeners(
        self, *, on_start: Any = None, on_end: Any = None, on_error: Any = None
    ) -> Runnable[Any, Any]:
        def tracing(config: RunnableConfig) -> RunnableConfig:
            tracer = RootListenersTracer(
                config=config, on_start=on_start, on_end=on_end, on_error=on_error
            )
            tracer.raise_error = True
            return {"callbacks": [tracer]}

        return RunnableBinding(bound=self, config_factories=[tracing])


# --- tests/unit_tests/chat_history/test_chat_history.py ------------------------------------------


def test_add_message_and_add_messages(sync_chat_history: ChatHistoryFactory) -> None:
    """test_add_message_implementation_only and test_bulk_message_implementation_only."""
    history = sync_chat_history("add")
    history.add_message(HumanMessage(content="Hello"))
    assert len(history.messages) == 1
    assert history.messages[0] == HumanMessage(content="Hello")
    history.add_message(HumanMessage(content="World"))
    assert len(history.messages) == 2
    assert history.messages[1] == HumanMessage(content="World")
    history.add_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert len(history.messages) == 4
    assert history.messages[2] == HumanMessage(content="Hello")
    assert history.messages[3] == HumanMessage(content="World")


async def test_async_interface(any_chat_history: ChatHistoryFactory) -> None:
    chat_history = any_chat_history("async")
    await chat_history.aadd_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
    assert await chat_history.aget_messages() == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
    ]
    await chat_history.aadd_messages([HumanMessage(content="!")])
    assert await chat_history.aget_messages() == [
        HumanMessage(content="Hello"),
        HumanMessage(content="World"),
        HumanMessage(content="!"),
    ]
    await chat_history.aclear()
    assert await chat_history.aget_messages() == []


# --- tests/unit_tests/runnables/test_history.py ---------------------------------------------------


def test_interfaces(sync_chat_history: ChatHistoryFactory) -> None:
    history = sync_chat_history("interfaces")
    history.add_message(SystemMessage(content="system"))
    history.add_user_message("human 1")
    history.add_ai_message("ai")
    history.add_message(HumanMessage(content="human 2"))
    assert str(history) == "System: system\nHuman: human 1\nAI: ai\nHuman: human 2"


def test_input_messages(sync_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(said)
    with_history = RunnableWithMessageHistory(runnable, sync_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "1"}}
    output = with_history.invoke([HumanMessage(content="hello")], config)
    assert output == "you said: hello"
    output = with_history.invoke([HumanMessage(content="good bye")], config)
    assert output == "you said: hello\ngood bye"
    output = [*with_history.stream([HumanMessage(content="hi again")], config)]
    assert output == ["you said: hello\ngood bye\nhi again"]
    assert sync_chat_history("1").messages == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="good bye"),
        AIMessage(content="you said: hello\ngood bye"),
        HumanMessage(content="hi again"),
        AIMessage(content="you said: hello\ngood bye\nhi again"),
    ]


async def test_input_messages_async(any_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(said)
    with_history = RunnableWithMessageHistory(runnable, any_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "1_async"}}
    output = await with_history.ainvoke([HumanMessage(content="hello")], config)
    assert output == "you said: hello"
    output = await with_history.ainvoke([HumanMessage(content="good bye")], config)
    assert output == "you said: hello\ngood bye"
    chunks = [c async for c in with_history.astream([HumanMessage(content="hi again")], config)]
    assert chunks == ["you said: hello\ngood bye\nhi again"]
    assert await any_chat_history("1_async").aget_messages() == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="good bye"),
        AIMessage(content="you said: hello\ngood bye"),
        HumanMessage(content="hi again"),
        AIMessage(content="you said: hello\ngood bye\nhi again"),
    ]


def test_input_dict(sync_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(lambda params: said(params["messages"]))
    with_history = RunnableWithMessageHistory(
        runnable, sync_chat_history, input_messages_key="messages"
    )
    config: RunnableConfig = {"configurable": {"session_id": "2"}}
    output = with_history.invoke({"messages": [HumanMessage(content="hello")]}, config)
    assert output == "you said: hello"
    output = with_history.invoke({"messages": [HumanMessage(content="good bye")]}, config)
    assert output == "you said: hello\ngood bye"


async def test_input_dict_async(any_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(lambda params: said(params["messages"]))
    with_history = RunnableWithMessageHistory(
        runnable, any_chat_history, input_messages_key="messages"
    )
    config: RunnableConfig = {"configurable": {"session_id": "2_async"}}
    output = await with_history.ainvoke({"messages": [HumanMessage(content="hello")]}, config)
    assert output == "you said: hello"
    output = await with_history.ainvoke({"messages": [HumanMessage(content="good bye")]}, config)
    assert output == "you said: hello\ngood bye"


def wrap(output: str, text: str) -> Any:
    if output == "message":
        return AIMessage(content=text)
    if output == "messages":
        return [AIMessage(content=text)]
    if output == "dict":
        return {"output": [AIMessage(content=text)]}
    return text


def history_key_chain(factory: ChatHistoryFactory, output: str = "text") -> Any:
    """The runnable of test_input_dict_with_history_key (``output="text"``),
    test_output_message, test_output_messages and test_output_dict."""
    return RunnableWithMessageHistory(
        RunnableLambda(lambda params: wrap(output, said(params["history"], params["input"]))),
        factory,
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output" if output == "dict" else None,
    )


HISTORY_KEY_TESTS = [
    ("text", "3", "test_input_dict_with_history_key"),
    ("message", "4", "test_output_message"),
    ("messages", "6", "test_output_messages"),
    ("dict", "7", "test_output_dict"),
]
"""The output shape, the session id and the name of each original."""


@pytest.mark.parametrize(
    ("output", "session"), [pytest.param(o, s, id=name) for o, s, name in HISTORY_KEY_TESTS]
)
def test_history_key(sync_chat_history: ChatHistoryFactory, output: str, session: str) -> None:
    with_history = history_key_chain(sync_chat_history, output)
    config: RunnableConfig = {"configurable": {"session_id": session}}
    assert with_history.invoke({"input": "hello"}, config) == wrap(output, "you said: hello")
    assert with_history.invoke({"input": "good bye"}, config) == wrap(
        output, "you said: hello\ngood bye"
    )


@pytest.mark.parametrize(
    ("output", "session"),
    [pytest.param(o, f"{s}_async", id=f"{name}_async") for o, s, name in HISTORY_KEY_TESTS],
)
async def test_history_key_async(
    any_chat_history: ChatHistoryFactory, output: str, session: str
) -> None:
    with_history = history_key_chain(any_chat_history, output)
    config: RunnableConfig = {"configurable": {"session_id": session}}
    assert await with_history.ainvoke({"input": "hello"}, config) == wrap(output, "you said: hello")
    assert await with_history.ainvoke({"input": "good bye"}, config) == wrap(
        output, "you said: hello\ngood bye"
    )


def test_input_messages_output_message(sync_chat_history: ChatHistoryFactory) -> None:
    with_history = RunnableWithMessageHistory(LengthChatModel(), sync_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "5"}}
    assert with_history.invoke([HumanMessage(content="hi")], config).content == "1"
    assert with_history.invoke([HumanMessage(content="hi")], config).content == "3"


async def test_input_messages_output_message_async(any_chat_history: ChatHistoryFactory) -> None:
    with_history = RunnableWithMessageHistory(LengthChatModel(), any_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "5_async"}}
    assert (await with_history.ainvoke([HumanMessage(content="hi")], config)).content == "1"
    assert (await with_history.ainvoke([HumanMessage(content="hi")], config)).content == "3"


def config_specs_chain(
    factory: ChatHistoryFactory,
) -> tuple[Runnable[Any, Any], Callable[[], dict[tuple[str, str], list[BaseMessage]]]]:
    """The runnable of test_using_custom_config_specs, and its store's messages by key."""
    store: dict[tuple[str, str], BaseChatMessageHistory] = {}

    def get_session_history(user_id: str, conversation_id: str) -> BaseChatMessageHistory:
        return store.setdefault((user_id, conversation_id), factory(f"{user_id}/{conversation_id}"))

    chain = RunnableWithMessageHistory(
        RunnableLambda(lambda params: [AIMessage(content=said(params["messages"]))]),
        get_session_history=get_session_history,
        input_messages_key="messages",
        history_messages_key="history",
        history_factory_config=[
            ConfigurableFieldSpec(id="user_id", annotation=str, default="", is_shared=True),
            ConfigurableFieldSpec(
                id="conversation_id", annotation=str, default=None, is_shared=True
            ),
        ],
    )
    return chain, lambda: {key: history.messages for key, history in store.items()}


def test_using_custom_config_specs(sync_chat_history: ChatHistoryFactory) -> None:
    """The session factory takes the keys the config specs name."""
    chain, contents = config_specs_chain(sync_chat_history)

    def turn(text: str, user: str) -> Any:
        config: RunnableConfig = {"configurable": {"user_id": user, "conversation_id": "1"}}
        return chain.invoke({"messages": [HumanMessage(content=text)]}, config)

    assert turn("hello", "user1") == [AIMessage(content="you said: hello")]
    assert contents() == {
        ("user1", "1"): [HumanMessage(content="hello"), AIMessage(content="you said: hello")]
    }
    assert turn("goodbye", "user1") == [AIMessage(content="you said: goodbye")]
    assert contents() == {
        ("user1", "1"): [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="goodbye"),
            AIMessage(content="you said: goodbye"),
        ]
    }
    assert turn("meow", "user2") == [AIMessage(content="you said: meow")]
    assert contents() == {
        ("user1", "1"): [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="goodbye"),
            AIMessage(content="you said: goodbye"),
        ],
        ("user2", "1"): [HumanMessage(content="meow"), AIMessage(content="you said: meow")],
    }


async def test_using_custom_config_specs_async(any_chat_history: ChatHistoryFactory) -> None:
    """The same through ``ainvoke``."""
    chain, _ = config_specs_chain(any_chat_history)

    async def turn(text: str, user: str) -> Any:
        config: RunnableConfig = {"configurable": {"user_id": user, "conversation_id": "1_async"}}
        return await chain.ainvoke({"messages": [HumanMessage(content=text)]}, config)

    assert await turn("hello", "user1_async") == [AIMessage(content="you said: hello")]
    assert await turn("goodbye", "user1_async") == [AIMessage(content="you said: goodbye")]
    assert await turn("meow", "user2_async") == [AIMessage(content="you said: meow")]
    assert await any_chat_history("user1_async/1_async").aget_messages() == [
        HumanMessage(content="hello"),
        AIMessage(content="you said: hello"),
        HumanMessage(content="goodbye"),
        AIMessage(content="you said: goodbye"),
    ]
    assert await any_chat_history("user2_async/1_async").aget_messages() == [
        HumanMessage(content="meow"),
        AIMessage(content="you said: meow"),
    ]


def test_ignore_session_id(sync_chat_history: ChatHistoryFactory) -> None:
    """Without a session id in the config the factory takes no arguments."""
    history = sync_chat_history("ignore")
    with_message_history = RunnableWithMessageHistory(
        RunnableLambda(lambda messages: [AIMessage(content=said(messages))]),
        lambda: history,  # type: ignore[arg-type,return-value]
    )
    with_message_history.invoke("hello")
    with_message_history.invoke("hello again")
    assert len(history.messages) == 4


def test_get_output_messages_no_value_error(sync_chat_history: ChatHistoryFactory) -> None:
    runnable = RaisingListenersLambda(said)
    with_history = RunnableWithMessageHistory(runnable, sync_chat_history)
    config: RunnableConfig = {
        "configurable": {"session_id": "1", "message_history": sync_chat_history("1")}
    }
    may_catch_value_error = None
    try:
        with_history.bound.invoke([HumanMessage(content="hello")], config)
    except ValueError as error:
        may_catch_value_error = error
    assert may_catch_value_error is None


@pytest.mark.parametrize("illegal", [False, 123], ids=["bool", "int"])
def test_get_output_messages_with_value_error(
    sync_chat_history: ChatHistoryFactory, illegal: object
) -> None:
    with_history = RunnableWithMessageHistory(
        RaisingListenersLambda(lambda messages: illegal), sync_chat_history
    )
    config: RunnableConfig = {
        "configurable": {"session_id": "1", "message_history": sync_chat_history("1")}
    }
    with pytest.raises(ValueError) as caught:  # noqa: PT011 - the original checks the text below
        with_history.bound.invoke([HumanMessage(content="hello")], config)
    expected = (
        f"Expected str, BaseMessage, list[BaseMessage], or tuple[BaseMessage]. Got {illegal}."
    )
    assert expected in str(caught.value)
