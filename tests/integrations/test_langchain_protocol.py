"""LangChain's own chat history tests (``tests/unit_tests/chat_history/test_chat_history.py``)
and ``RunnableWithMessageHistory`` tests (``tests/unit_tests/runnables/test_history.py``) of
langchain-core 1.8, run on the history under test.

Each test runs on LangChain's ``InMemoryChatMessageHistory`` (the reference) and on
``LangChainHistory`` over both stores, with the original assertions. Two changes, the same for
every history: the sync tests run their body in a worker thread (``off_the_loop``), since a sync
call on the event loop's thread would block it (ours raises ``UsageError`` there, see
``test_langchain_history.py``); and where an original compares its dict of history objects
(``store == {...}``), the translation compares each history's messages, since our histories are
handles on a store, not lists. The chat-history tests that subclass ``BaseChatMessageHistory``
test the base class's defaults: here the same calls and assertions run on the history itself.
The input-schema tests check ``RunnableWithMessageHistory``'s own schema, which no history takes
part in, and are left out.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.config import RunnableConfig
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.runnables.utils import ConfigurableFieldSpec
from langchain_support import ChatHistoryFactory, off_the_loop

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


async def test_add_message_and_add_messages(any_chat_history: ChatHistoryFactory) -> None:
    history = any_chat_history("add")

    def body() -> list[BaseMessage]:
        history.add_message(HumanMessage(content="Hello"))
        assert len(history.messages) == 1
        assert history.messages[0] == HumanMessage(content="Hello")
        history.add_message(HumanMessage(content="World"))
        assert len(history.messages) == 2
        assert history.messages[1] == HumanMessage(content="World")
        history.add_messages([HumanMessage(content="Hello"), HumanMessage(content="World")])
        return history.messages

    store = await off_the_loop(body)
    assert len(store) == 4
    assert store[2] == HumanMessage(content="Hello")
    assert store[3] == HumanMessage(content="World")


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


async def test_interfaces(any_chat_history: ChatHistoryFactory) -> None:
    history = any_chat_history("interfaces")

    def body() -> str:
        history.add_message(SystemMessage(content="system"))
        history.add_user_message("human 1")
        history.add_ai_message("ai")
        history.add_message(HumanMessage(content="human 2"))
        return str(history)

    assert await off_the_loop(body) == "System: system\nHuman: human 1\nAI: ai\nHuman: human 2"


async def test_input_messages(any_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(said)
    with_history = RunnableWithMessageHistory(runnable, any_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "1"}}

    def body() -> None:
        output = with_history.invoke([HumanMessage(content="hello")], config)
        assert output == "you said: hello"
        output = with_history.invoke([HumanMessage(content="good bye")], config)
        assert output == "you said: hello\ngood bye"
        output = [*with_history.stream([HumanMessage(content="hi again")], config)]
        assert output == ["you said: hello\ngood bye\nhi again"]

    await off_the_loop(body)
    assert await any_chat_history("1").aget_messages() == [
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


async def test_input_dict(any_chat_history: ChatHistoryFactory) -> None:
    runnable = RunnableLambda(lambda params: said(params["messages"]))
    with_history = RunnableWithMessageHistory(
        runnable, any_chat_history, input_messages_key="messages"
    )
    config: RunnableConfig = {"configurable": {"session_id": "2"}}

    def body() -> None:
        output = with_history.invoke({"messages": [HumanMessage(content="hello")]}, config)
        assert output == "you said: hello"
        output = with_history.invoke({"messages": [HumanMessage(content="good bye")]}, config)
        assert output == "you said: hello\ngood bye"

    await off_the_loop(body)


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


def history_key_chain(factory: ChatHistoryFactory, output: str = "text") -> Any:
    def answer(params: dict[str, Any]) -> Any:
        text = said(params["history"], params["input"])
        if output == "message":
            return AIMessage(content=text)
        if output == "messages":
            return [AIMessage(content=text)]
        if output == "dict":
            return {"output": [AIMessage(content=text)]}
        return text

    return RunnableWithMessageHistory(
        RunnableLambda(answer),
        factory,
        input_messages_key="input",
        history_messages_key="history",
        output_messages_key="output" if output == "dict" else None,
    )


def wrap(output: str, text: str) -> Any:
    if output == "message":
        return AIMessage(content=text)
    if output == "messages":
        return [AIMessage(content=text)]
    if output == "dict":
        return {"output": [AIMessage(content=text)]}
    return text


async def check_history_key(factory: ChatHistoryFactory, output: str, session: str) -> None:
    """test_input_dict_with_history_key, test_output_message, test_output_messages and
    test_output_dict: one body, one output shape each."""
    with_history = history_key_chain(factory, output)
    config: RunnableConfig = {"configurable": {"session_id": session}}

    def body() -> None:
        assert with_history.invoke({"input": "hello"}, config) == wrap(output, "you said: hello")
        assert with_history.invoke({"input": "good bye"}, config) == wrap(
            output, "you said: hello\ngood bye"
        )

    await off_the_loop(body)


async def check_history_key_async(factory: ChatHistoryFactory, output: str, session: str) -> None:
    with_history = history_key_chain(factory, output)
    config: RunnableConfig = {"configurable": {"session_id": session}}
    assert await with_history.ainvoke({"input": "hello"}, config) == wrap(output, "you said: hello")
    assert await with_history.ainvoke({"input": "good bye"}, config) == wrap(
        output, "you said: hello\ngood bye"
    )


async def test_input_dict_with_history_key(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key(any_chat_history, "text", "3")


async def test_input_dict_with_history_key_async(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key_async(any_chat_history, "text", "3_async")


async def test_output_message(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key(any_chat_history, "message", "4")


async def test_output_message_async(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key_async(any_chat_history, "message", "4_async")


async def test_output_messages(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key(any_chat_history, "messages", "6")


async def test_output_messages_async(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key_async(any_chat_history, "messages", "6_async")


async def test_output_dict(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key(any_chat_history, "dict", "7")


async def test_output_dict_async(any_chat_history: ChatHistoryFactory) -> None:
    await check_history_key_async(any_chat_history, "dict", "7_async")


async def test_input_messages_output_message(any_chat_history: ChatHistoryFactory) -> None:
    with_history = RunnableWithMessageHistory(LengthChatModel(), any_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "5"}}

    def body() -> None:
        assert with_history.invoke([HumanMessage(content="hi")], config).content == "1"
        assert with_history.invoke([HumanMessage(content="hi")], config).content == "3"

    await off_the_loop(body)


async def test_input_messages_output_message_async(any_chat_history: ChatHistoryFactory) -> None:
    with_history = RunnableWithMessageHistory(LengthChatModel(), any_chat_history)
    config: RunnableConfig = {"configurable": {"session_id": "5_async"}}
    assert (await with_history.ainvoke([HumanMessage(content="hi")], config)).content == "1"
    assert (await with_history.ainvoke([HumanMessage(content="hi")], config)).content == "3"


async def test_using_custom_config_specs(any_chat_history: ChatHistoryFactory) -> None:
    """The session factory takes the keys the config specs name."""
    store: dict[tuple[str, str], BaseChatMessageHistory] = {}

    def get_session_history(user_id: str, conversation_id: str) -> BaseChatMessageHistory:
        return store.setdefault(
            (user_id, conversation_id), any_chat_history(f"{user_id}/{conversation_id}")
        )

    with_message_history = RunnableWithMessageHistory(
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

    async def turn(text: str, user: str) -> Any:
        config: RunnableConfig = {"configurable": {"user_id": user, "conversation_id": "1"}}
        return await with_message_history.ainvoke(
            {"messages": [HumanMessage(content=text)]}, config
        )

    async def contents() -> dict[tuple[str, str], list[BaseMessage]]:
        return {key: await history.aget_messages() for key, history in store.items()}

    assert await turn("hello", "user1") == [AIMessage(content="you said: hello")]
    assert await contents() == {
        ("user1", "1"): [HumanMessage(content="hello"), AIMessage(content="you said: hello")]
    }
    assert await turn("goodbye", "user1") == [AIMessage(content="you said: goodbye")]
    assert await turn("meow", "user2") == [AIMessage(content="you said: meow")]
    assert await contents() == {
        ("user1", "1"): [
            HumanMessage(content="hello"),
            AIMessage(content="you said: hello"),
            HumanMessage(content="goodbye"),
            AIMessage(content="you said: goodbye"),
        ],
        ("user2", "1"): [HumanMessage(content="meow"), AIMessage(content="you said: meow")],
    }
