"""Idempotent turns across processes: a lease on the request id, one model call per request.

Each ``chain`` below has its own ``IdempotentTurnAdvisor``, so its in-process lock is its own:
chains stand for processes, and only the store's lease keeps their attempts apart (the OS
process tests are in ``test_turn_lease_processes.py``).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import openai
import pytest
from chat_support import MODEL, PATHS, ask, context, stored

from asyncsession import (
    ChatError,
    DefaultSessionService,
    InMemorySessionRepository,
    MongoSessionRepository,
    TurnInProgress,
    UsageError,
)
from asyncsession.advisors import (
    REQUEST_ID_CONTEXT_KEY,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.openai import ChatClient
from asyncsession.repository import TurnLeaseRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


@pytest.fixture(params=["memory", "mongo"])
def repository(request: pytest.FixtureRequest) -> Any:
    if request.param == "memory":
        return InMemorySessionRepository()
    return MongoSessionRepository(request.getfixturevalue("mongo_db"))


@pytest.fixture
async def store(repository: Any) -> DefaultSessionService:
    if isinstance(repository, MongoSessionRepository):
        await repository.ensure_indexes()
    return DefaultSessionService(repository)


def chain(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    *,
    wait: float = 30.0,
    ttl: timedelta = timedelta(minutes=2),
) -> ChatClient:
    """A client as one process builds it, leasing request ids in the service's store."""
    leases = service.repository
    assert isinstance(leases, TurnLeaseRepository)
    return ChatClient(
        openai_client,
        model=MODEL,
        advisors=[
            IdempotentTurnAdvisor(service, leases=leases, wait=wait, lease_ttl=ttl, poll=0.01),
            SessionTurnAdvisor(service),
            SessionMemoryAdvisor(service, request_event_id_generator=RequestIdEventIdGenerator()),
        ],
    )


def attempt(request_id: str, session_id: str = "s1") -> dict[str, Any]:
    return context(session_id, "alice", **{REQUEST_ID_CONTEXT_KEY: request_id})


def model_calls(server: ScriptedOpenAIServer) -> int:
    return sum(1 for r in server.requests if r.path.endswith("/chat/completions"))


@pytest.mark.parametrize("streaming", PATHS)
async def test_eight_overlapping_first_attempts_on_a_new_session_call_the_model_once(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Eight "processes" send the same request at once: one model call, one stored reply."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("the answer", hold=hold))
    clients = [chain(openai_client, store) for _ in range(8)]

    tasks = [
        asyncio.create_task(ask(c, "question?", streaming=streaming, context=attempt("r1")))
        for c in clients
    ]
    await asyncio.wait_for(server.wait_for_request(0), 10)
    hold.set()
    replies = await asyncio.gather(*tasks)

    assert [r.message.text for r in replies] == ["the answer"] * 8
    assert model_calls(server) == 1
    assert await stored(store, "s1") == ["U:question?", "A:the answer"]
    server.assert_done()


async def test_an_attempt_waits_no_longer_than_asked_and_raises_turn_in_progress(
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """While the holder waits for the model, an impatient retry gets ``TurnInProgress``."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("slow", hold=hold))
    first = asyncio.create_task(chain(openai_client, store).call("q", context=attempt("r1")))
    await asyncio.wait_for(server.wait_for_request(0), 10)

    with pytest.raises(TurnInProgress) as raised:
        await chain(openai_client, store, wait=0).call("q", context=attempt("r1"))

    assert raised.value.request_id == "r1"
    assert raised.value.retry_after >= 1
    hold.set()
    assert (await first).message.text == "slow"
    retry = await chain(openai_client, store, wait=0).call("q", context=attempt("r1"))
    assert retry.message.text == "slow"
    assert model_calls(server) == 1


async def test_a_failed_holder_lets_the_waiting_retry_call_the_model(
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """The holder's model call fails: it gives the lease back and the waiter takes over."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.error(500, "boom", hold=hold), ScriptedReply.text("second"))
    first = asyncio.create_task(chain(openai_client, store).call("q", context=attempt("r1")))
    await asyncio.wait_for(server.wait_for_request(0), 10)
    retry = asyncio.create_task(chain(openai_client, store).call("q", context=attempt("r1")))
    hold.set()

    with pytest.raises(ChatError):
        await first
    assert (await retry).message.text == "second"
    assert model_calls(server) == 2
    assert await stored(store, "s1") == ["U:q", "A:second"]


async def test_an_expired_lease_is_taken_over_by_the_next_attempt(
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """A holder whose lease has run out (it hangs) no longer keeps a retry out."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("hung", hold=hold), ScriptedReply.text("taken over"))
    expired = timedelta(microseconds=1)  # over before the retry starts
    first = asyncio.create_task(
        chain(openai_client, store, ttl=expired).call("q", context=attempt("r1"))
    )
    await asyncio.wait_for(server.wait_for_request(0), 10)

    retry = await chain(openai_client, store, wait=0).call("q", context=attempt("r1"))

    assert retry.message.text == "taken over"
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first


def test_leases_must_be_a_lease_store() -> None:
    """Anything else is refused at construction."""
    service = DefaultSessionService(InMemorySessionRepository())
    with pytest.raises(UsageError):
        IdempotentTurnAdvisor(service, leases=object())  # type: ignore[arg-type]
