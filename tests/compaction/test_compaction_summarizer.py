"""OpenAISummarizer through the real ``openai.AsyncOpenAI`` client and a local scripted server."""

from __future__ import annotations

from collections.abc import AsyncIterator

import openai
import pytest

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    UserMessage,
)
from asyncsession.compaction import (
    RecursiveSummarizationCompactionStrategy,
    Summarizer,
    TurnCountTrigger,
)
from asyncsession.compaction._strategies import DEFAULT_SUMMARIZER_SYSTEM_PROMPT
from asyncsession.exceptions import CompactionError, UsageError
from asyncsession.openai import OpenAISummarizer
from asyncsession.testing.openai_server import ScriptedOpenAIServer, ScriptedReply


@pytest.fixture
async def server() -> AsyncIterator[ScriptedOpenAIServer]:
    async with ScriptedOpenAIServer() as server:
        yield server


@pytest.fixture
async def client(server: ScriptedOpenAIServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with server.client() as client:
        yield client


async def test_summarize_sends_one_chat_completion_and_returns_its_text(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """The summarizer sends the system and user prompts with the model and options."""
    server.enqueue(ScriptedReply.text("The user greeted the assistant."))
    summarizer = OpenAISummarizer(client, "gpt-test", temperature=0.2)
    assert isinstance(summarizer, Summarizer)

    summary = await summarizer.summarize("Be brief.", "User: hi")

    assert summary == "The user greeted the assistant."
    (sent,) = server.requests
    assert sent.path == "/v1/chat/completions"
    assert sent.model == "gpt-test"
    assert sent.body["temperature"] == 0.2
    assert not sent.is_stream
    assert sent.messages == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "User: hi"},
    ]
    server.assert_done()


async def test_an_api_error_becomes_a_chained_compaction_error(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """An HTTP error from the API is raised as CompactionError with the SDK error as cause."""
    server.enqueue(ScriptedReply.error(500, "overloaded"))
    summarizer = OpenAISummarizer(client, "gpt-test")
    with pytest.raises(CompactionError, match="HTTP 500") as caught:
        await summarizer.summarize("s", "p")
    assert isinstance(caught.value.__cause__, openai.InternalServerError)


async def test_a_connection_failure_becomes_a_compaction_error(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A dropped connection is raised as CompactionError too."""
    server.enqueue(ScriptedReply.text("never sent", drop_after=0))
    with pytest.raises(CompactionError) as caught:
        await OpenAISummarizer(client, "gpt-test").summarize("s", "p")
    assert isinstance(caught.value.__cause__, openai.APIConnectionError)


def test_options_the_summarizer_owns_are_refused(client: openai.AsyncOpenAI) -> None:
    """model, messages, stream and n cannot be passed as options; the model must be named."""
    with pytest.raises(UsageError, match="stream"):
        OpenAISummarizer(client, "gpt-test", stream=True)
    with pytest.raises(UsageError, match="model"):
        OpenAISummarizer(client, " ")
    assert repr(OpenAISummarizer(client, "m")) == "OpenAISummarizer(model='m')"


async def test_recursive_summarization_through_the_real_client(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A session is compacted with a summary the scripted model wrote, end to end."""
    server.enqueue(ScriptedReply.text("The user asked about Paris and Rome."))
    service = DefaultSessionService(InMemorySessionRepository())
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for question, answer in [("Paris?", "Nice."), ("Rome?", "Old."), ("Oslo?", "Cold.")]:
        await service.append_message(session.id, UserMessage(text=question))
        await service.append_message(session.id, AssistantMessage(text=answer))
    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(client, "gpt-test"), max_events_to_keep=2, overlap_size=1
    )

    result = await service.compact(session.id, TurnCountTrigger(2), strategy)

    assert result.applied
    view = await service.get_events(session.id, EventFilter.active())
    assert [e.text for e in view] == [
        "Summarize the conversation we had so far.",
        "The user asked about Paris and Rome.",
        "Oslo?",
        "Cold.",
    ]
    (sent,) = server.requests
    assert sent.messages[0] == {"role": "system", "content": DEFAULT_SUMMARIZER_SYSTEM_PROMPT}
    assert sent.messages[1]["content"] == (
        "=== CONVERSATION TO SUMMARIZE ===\n"
        "User: Paris?\nAssistant: Nice.\nUser: Rome?\nAssistant: Old.\n\n"
        "=== UPCOMING CONTEXT (do not summarize — for continuity only) ===\n"
        "User: Oslo?\n\n"
        "Please write the summary now:"
    )


async def test_a_model_error_leaves_the_session_untouched(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """When the model call fails, compaction reports the error and changes nothing."""
    server.enqueue(ScriptedReply.error(429, "rate limited"))
    service = DefaultSessionService(InMemorySessionRepository())
    session = await service.create(CreateSessionRequest(user_id="alice"))
    for text in ["q1", "q2", "q3"]:
        await service.append_message(session.id, UserMessage(text=text))
    strategy = RecursiveSummarizationCompactionStrategy(
        OpenAISummarizer(client, "gpt-test"), max_events_to_keep=1, overlap_size=0
    )
    result = await service.compact(session.id, lambda r: True, strategy)
    assert not result.applied
    assert result.error is not None
    assert "HTTP 429" in result.error
    assert [e.text for e in await service.get_events(session.id, EventFilter.active())] == [
        "q1",
        "q2",
        "q3",
    ]


async def test_an_empty_reply_is_an_empty_summary(
    server: ScriptedOpenAIServer, client: openai.AsyncOpenAI
) -> None:
    """A reply without content comes back as an empty string (the strategy then reports it)."""
    server.enqueue(ScriptedReply.text(""))
    assert await OpenAISummarizer(client, "gpt-test").summarize("s", "p") == ""
