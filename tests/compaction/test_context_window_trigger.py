"""ContextWindowTrigger: fires on the usage the model reported, else on the estimate."""

from __future__ import annotations

from datetime import timedelta

import openai
import pytest
from chat_support import MODEL, PATHS, ask, openai_client, server

from asyncsession import DefaultSessionService, EventType, SessionEvent
from asyncsession.compaction import (
    CompactionRequest,
    CompactionWorker,
    ContextWindowTrigger,
    SlidingWindowCompactionStrategy,
    TokenCountTrigger,
    usage_metadata,
)
from asyncsession.compaction.triggers import USAGE_METADATA_KEY
from asyncsession.events import SYNTHETIC, CreateSessionRequest, Session, utc_now
from asyncsession.exceptions import UsageError
from asyncsession.messages import AssistantMessage, UserMessage
from asyncsession.openai import ChatClient, ResponsesClient
from asyncsession.repository import InMemorySessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply

__all__ = ["openai_client", "server"]

SESSION = Session(id="s", user_id="u")
NOW = utc_now()


def event(message: object, *, seconds: int, **metadata: object) -> SessionEvent:
    return SessionEvent(
        session_id="s",
        message=message,  # type: ignore[arg-type]
        timestamp=NOW + timedelta(seconds=seconds),
        metadata=metadata,  # type: ignore[arg-type]
    )


def request(*events: SessionEvent) -> CompactionRequest:
    return CompactionRequest.of(SESSION, events)


def turn(input_tokens: int, output_tokens: int = 0) -> list[SessionEvent]:
    return [
        event(UserMessage(text="hi"), seconds=0),
        event(
            AssistantMessage(text="ok"),
            seconds=1,
            **usage_metadata(input_tokens, output_tokens),
        ),
    ]


@pytest.mark.parametrize(
    ("input_tokens", "output_tokens", "fires"),
    [
        pytest.param(79, 0, False, id="below"),
        pytest.param(79, 1, True, id="output-counts"),
        pytest.param(120, 0, True, id="above"),
    ],
)
async def test_it_fires_on_the_reported_usage(
    input_tokens: int, output_tokens: int, fires: bool
) -> None:
    """The newest reply's reported tokens are measured against the window's fraction."""
    trigger = ContextWindowTrigger(context_window=100, fraction=0.8)
    assert trigger.threshold == 80
    assert await trigger.should_compact(request(*turn(input_tokens, output_tokens))) is fires


async def test_events_after_the_report_are_estimated_on_top() -> None:
    """A message stored after the reported reply adds its estimate to the report."""
    trigger = ContextWindowTrigger(context_window=100, fraction=0.8)
    later = event(UserMessage(text="word " * 40), seconds=2)
    assert not await trigger.should_compact(request(*turn(70)))
    assert await trigger.should_compact(request(*turn(70), later))


async def test_without_usage_it_falls_back_to_the_estimate() -> None:
    """With no usage reported the trigger counts like TokenCountTrigger does."""
    long = [event(UserMessage(text="word " * 100), seconds=0)]
    trigger = ContextWindowTrigger(context_window=100, fraction=0.5)
    estimate = TokenCountTrigger(50)
    assert await trigger.should_compact(request(*long)) is await estimate.should_compact(
        request(*long)
    )
    assert await trigger.should_compact(request(*long))
    assert not await trigger.should_compact(request(event(UserMessage(text="hi"), seconds=0)))


async def test_a_report_older_than_a_summary_is_not_trusted() -> None:
    """After a compaction wrote its summary, the older report (of archived events) is ignored."""
    summary = event(UserMessage(text="summary"), seconds=5, **{SYNTHETIC: True})
    trigger = ContextWindowTrigger(context_window=100, fraction=0.8)
    assert await trigger.should_compact(request(*turn(500)))
    assert not await trigger.should_compact(request(summary, *turn(500)))


@pytest.mark.parametrize(
    ("window", "fraction"),
    [
        pytest.param(0, 0.8, id="no-window"),
        pytest.param(100, 0, id="zero-fraction"),
        pytest.param(100, 1.5, id="fraction-above-one"),
        pytest.param(100, True, id="bool-fraction"),
    ],
)
def test_bad_settings_are_usage_errors(window: int, fraction: float) -> None:
    """A non-positive window or a fraction outside (0, 1] is refused."""
    with pytest.raises(UsageError):
        ContextWindowTrigger(context_window=window, fraction=fraction)


API_CLIENTS = [
    pytest.param(ChatClient, id="chat-completions"),
    pytest.param(ResponsesClient, id="responses"),
]


@pytest.mark.parametrize("client_type", API_CLIENTS)
@pytest.mark.parametrize("streaming", PATHS)
async def test_the_turn_stores_usage_and_the_trigger_compacts_inline(
    client_type: type[ChatClient] | type[ResponsesClient],
    streaming: bool,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """On both APIs the reply carries the reported usage, and compaction fires on it alone."""
    service = DefaultSessionService(InMemorySessionRepository())
    trigger = ContextWindowTrigger(context_window=1000, fraction=0.5)
    client = client_type(
        openai_client,
        model=MODEL,
        sessions=service,
        compaction=(trigger, SlidingWindowCompactionStrategy(1)),
    )
    server.enqueue(
        ScriptedReply.text("small", prompt_tokens=100, completion_tokens=5),
        ScriptedReply.text("large", prompt_tokens=600, completion_tokens=5),
    )

    await ask(client, "one", streaming=streaming, session_id="s")
    first = await service.get_events("s")
    await ask(client, "two", streaming=streaming, session_id="s")
    second = await service.get_events("s")

    assert first[-1].metadata[USAGE_METADATA_KEY] == {"input_tokens": 100, "output_tokens": 5}
    assert not any(e.archived for e in first)
    assert [e.archived for e in second if e.is_message] == [True, True, False, False]
    assert [e.type for e in second if not e.is_message] == [EventType.COMPACTION]


async def test_a_worker_compacts_on_the_stored_usage() -> None:
    """The worker reads the usage from the stored events: no model call is needed."""
    service = DefaultSessionService(InMemorySessionRepository())
    created = await service.create(CreateSessionRequest(id="w", user_id="u"))
    for index, tokens in enumerate([10, 900]):
        await service.append_message(created.id, UserMessage(text=f"u{index}"))
        await service.append_message(
            created.id, AssistantMessage(text=f"a{index}"), metadata=usage_metadata(tokens, 1)
        )
    trigger = ContextWindowTrigger(context_window=1000, fraction=0.8)

    async with CompactionWorker(service, trigger, SlidingWindowCompactionStrategy(1)) as worker:
        outcome = await worker.submit(created.id).result()

    assert outcome.applied
    log = await service.get_events("w")
    assert [e.archived for e in log if e.is_message] == [True, True, False, False]
    assert [e.type for e in log if not e.is_message] == [EventType.COMPACTION]
