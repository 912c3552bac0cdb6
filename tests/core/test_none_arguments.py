"""``None`` where an object is needed is refused where it is passed, with ``UsageError``.

Accepting it would only fail later, deep inside a chat call or a compaction.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import openai
import pytest

from asyncsession import (
    CreateSessionRequest,
    DefaultSessionService,
    InMemorySessionRepository,
    Session,
    UsageError,
)
from asyncsession._compaction_pass import should_compact
from asyncsession.advisors import MessageFilter
from asyncsession.compaction import (
    CompactionRequest,
    RecursiveSummarizationCompactionStrategy,
    SlidingWindowCompactionStrategy,
    TokenCountCompactionStrategy,
    TokenCountTrigger,
    TurnCountTrigger,
    TurnWindowCompactionStrategy,
)
from asyncsession.openai import ChatClient

NONE: Any = None  # passed where the types forbid it, as an untyped caller would
JUNK: Any = object()


class _Summarizer:
    async def summarize(self, *args: Any, **kwargs: Any) -> str:
        return "summary"


def _service() -> DefaultSessionService:
    return DefaultSessionService(InMemorySessionRepository())


def _client() -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="unused", base_url="http://unused.test/v1")


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: MessageFilter.all().and_(NONE), id="MessageFilter.and_"),
        pytest.param(lambda: MessageFilter.all().or_(NONE), id="MessageFilter.or_"),
        pytest.param(lambda: MessageFilter.all() & NONE, id="MessageFilter-&"),
        pytest.param(lambda: MessageFilter(NONE), id="MessageFilter()"),
        pytest.param(lambda: MessageFilter.contains_text(NONE), id="MessageFilter.contains_text"),
        pytest.param(lambda: MessageFilter.by_message_type(NONE), id="MessageFilter.by_type"),
        pytest.param(lambda: CompactionRequest.of(NONE, []), id="CompactionRequest.of-session"),
        pytest.param(
            lambda: CompactionRequest.of(Session(user_id="u"), NONE),
            id="CompactionRequest.of-events",
        ),
        pytest.param(lambda: DefaultSessionService(NONE), id="DefaultSessionService"),
        pytest.param(lambda: ChatClient(NONE, model="m"), id="ChatClient"),
        pytest.param(lambda: ChatClient(_client(), model=NONE), id="ChatClient-model"),
        pytest.param(
            lambda: ChatClient(_client(), model="m", sessions=_service(), event_ids=JUNK),
            id="ChatClient-event-ids",
        ),
        pytest.param(
            lambda: ChatClient(
                _client(),
                model="m",
                sessions=_service(),
                compaction=(TurnCountTrigger(1), JUNK),
            ),
            id="client-strategy-not-a-strategy",
        ),
    ],
)
def test_a_constructor_refuses_none(build: Callable[[], object]) -> None:
    """The constructor or combinator raises UsageError instead of keeping the ``None``."""
    with pytest.raises(UsageError):
        build()


def test_a_client_without_compaction_takes_none() -> None:
    """``compaction=None`` is the documented way to turn compaction off."""
    chat = ChatClient(_client(), model="m", sessions=_service(), compaction=None)
    assert chat.memory is not None
    assert chat.memory.compaction is None


_STRATEGIES = [
    pytest.param(SlidingWindowCompactionStrategy(), id="sliding-window"),
    pytest.param(TurnWindowCompactionStrategy(), id="turn-window"),
    pytest.param(TokenCountCompactionStrategy(), id="token-count"),
    pytest.param(RecursiveSummarizationCompactionStrategy(_Summarizer()), id="recursive"),
]


@pytest.mark.parametrize("strategy", _STRATEGIES)
async def test_a_strategy_refuses_a_none_request(strategy: Any) -> None:
    """``compact(None)`` is a usage error naming the strategy, not an AttributeError."""
    with pytest.raises(UsageError, match=type(strategy).__name__):
        await strategy.compact(NONE)


@pytest.mark.parametrize(
    "trigger",
    [
        pytest.param(TurnCountTrigger(3), id="turns"),
        pytest.param(TokenCountTrigger(9), id="tokens"),
    ],
)
async def test_a_trigger_refuses_a_none_request(trigger: Any) -> None:
    """``should_compact(None)`` is a usage error, on the trigger and through the helper."""
    with pytest.raises(UsageError):
        await trigger.should_compact(NONE)
    with pytest.raises(UsageError):
        await should_compact(trigger, NONE)


async def test_should_compact_refuses_a_none_trigger() -> None:
    """A ``None`` trigger is refused before anything is asked."""
    request = CompactionRequest.of(Session(user_id="u"), [])
    with pytest.raises(UsageError, match="trigger"):
        await should_compact(NONE, request)


async def _none_trigger(service: DefaultSessionService) -> object:
    return await service.compact("s", NONE, SlidingWindowCompactionStrategy())


async def _none_strategy(service: DefaultSessionService) -> object:
    return await service.compact("s", TurnCountTrigger(1), NONE)


@pytest.mark.parametrize(
    "compact",
    [pytest.param(_none_trigger, id="trigger"), pytest.param(_none_strategy, id="strategy")],
)
async def test_service_compact_refuses_none_before_reading(
    compact: Callable[[DefaultSessionService], Awaitable[object]],
) -> None:
    """The service refuses a ``None`` trigger or strategy before it reads the session."""
    service = _service()
    await service.create(CreateSessionRequest(id="s", user_id="u"))
    with pytest.raises(UsageError):
        await compact(service)
