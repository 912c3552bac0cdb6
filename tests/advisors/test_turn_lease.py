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
from chat_support import CLIENTS, MODEL, PATHS, ask, context, stored

from asyncsession import (
    ChatError,
    DefaultSessionService,
    InMemorySessionRepository,
    TurnInProgress,
    UsageError,
)
from asyncsession.advisors import (
    REQUEST_EVENT_IDS_CONTEXT_KEY,
    REQUEST_ID_CONTEXT_KEY,
    RESPONSE_EVENT_IDS_CONTEXT_KEY,
    IdempotentTurnAdvisor,
    RequestIdEventIdGenerator,
    SessionMemoryAdvisor,
    SessionTurnAdvisor,
)
from asyncsession.chat import ChatResponse
from asyncsession.openai import BaseChatClient, ChatClient
from asyncsession.repository import Lease, SessionRepository
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply


def chain(
    openai_client: openai.AsyncOpenAI,
    service: DefaultSessionService,
    *,
    wait: float = 30.0,
    ttl: timedelta = timedelta(minutes=2),
    leases: Any = None,
    api: type[BaseChatClient] = ChatClient,
) -> BaseChatClient:
    """A client as one process builds it, leasing request ids in the service's store (or in
    ``leases``, a view of it)."""
    leases = service.repository if leases is None else leases
    assert callable(getattr(leases, "acquire_lease", None))
    return api(
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
    return sum(1 for r in server.requests if r.path.endswith(("/chat/completions", "/responses")))


class WatchedLeases:
    """The store's leases, noting every attempt refused because another holds the request."""

    def __init__(self, inner: SessionRepository) -> None:
        self._inner = inner
        self.refused: set[str] = set()
        self._changed = asyncio.Condition()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def acquire_lease(self, session_id: str, version: int, lease: Lease) -> bool:
        taken = await self._inner.acquire_lease(session_id, version, lease)
        if not taken:
            async with self._changed:
                self.refused.add(lease.holder)
                self._changed.notify_all()
        return taken

    async def wait_refused(self, attempts: int) -> None:
        """Until ``attempts`` different attempts were refused (they wait for the holder)."""
        async with self._changed:
            await self._changed.wait_for(lambda: len(self.refused) >= attempts)


async def stream_of(client: BaseChatClient, context: dict[str, Any]) -> tuple[str, ChatResponse]:
    """The text a stream's chunks carried, and its response."""
    async with client.stream("question?", context=context) as stream:
        text = "".join([chunk.text async for chunk in stream])
    return text, stream.response


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


@pytest.mark.parametrize("api", CLIENTS)
async def test_streams_that_wait_for_the_holder_replay_its_stored_reply(
    api: type[BaseChatClient],
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """Six retries stream while the holder's model call is under way on a new session: each
    waits on the lease, then streams the reply the holder stored; the model is called once."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("the streamed answer", hold=hold, chunk_size=4))
    leases = WatchedLeases(store.repository)  # type: ignore[arg-type]
    first = asyncio.create_task(
        stream_of(chain(openai_client, store, leases=leases, api=api), attempt("r1"))
    )
    await asyncio.wait_for(server.wait_for_request(0), 10)
    retries = [
        asyncio.create_task(
            stream_of(chain(openai_client, store, leases=leases, api=api), attempt("r1"))
        )
        for _ in range(6)
    ]
    await asyncio.wait_for(leases.wait_refused(6), 10)  # every retry waits for the holder
    assert not any(r.done() for r in retries)
    hold.set()
    results = await asyncio.gather(first, *retries)

    assert [text for text, _ in results] == ["the streamed answer"] * 7
    assert [reply.message.text for _, reply in results] == ["the streamed answer"] * 7
    [request_ids] = {tuple(reply.context[REQUEST_EVENT_IDS_CONTEXT_KEY]) for _, reply in results}
    [response_ids] = {tuple(reply.context[RESPONSE_EVENT_IDS_CONTEXT_KEY]) for _, reply in results}
    assert len(request_ids) == len(response_ids) == 1
    assert model_calls(server) == 1
    assert await stored(store, "s1") == ["U:question?", "A:the streamed answer"]
    server.assert_done()


async def test_a_waiting_stream_takes_over_when_the_holder_abandons_its_stream(
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """The holder's caller goes away mid-stream (no reply stored): the lease is given back and
    the waiting stream calls the model itself, once."""
    gate = asyncio.Event()
    server.enqueue(
        ScriptedReply.text("never finished", chunk_size=2, pause_after=2, gate=gate),
        ScriptedReply.text("second"),
    )
    leases = WatchedLeases(store.repository)  # type: ignore[arg-type]
    async with chain(openai_client, store, leases=leases).stream(
        "question?", context=attempt("r1")
    ) as abandoned:
        async for chunk in abandoned:
            if chunk.text:
                break
        retry = asyncio.create_task(
            stream_of(chain(openai_client, store, leases=leases), attempt("r1"))
        )
        await asyncio.wait_for(leases.wait_refused(1), 10)
    text, reply = await asyncio.wait_for(retry, 10)

    assert (text, reply.message.text) == ("second", "second")
    assert model_calls(server) == 2
    assert await stored(store, "s1") == ["U:question?", "A:second"]
    gate.set()


@pytest.mark.parametrize("streaming", PATHS)
async def test_an_attempt_waits_no_longer_than_asked_and_raises_turn_in_progress(
    streaming: bool,
    store: DefaultSessionService,
    server: ScriptedOpenAIServer,
    openai_client: openai.AsyncOpenAI,
) -> None:
    """While the holder waits for the model, an impatient retry (a call, or a stream at its
    first chunk) gets ``TurnInProgress``; once the reply is stored, a retry replays it."""
    hold = asyncio.Event()
    server.enqueue(ScriptedReply.text("slow", hold=hold))
    first = asyncio.create_task(chain(openai_client, store).call("q", context=attempt("r1")))
    await asyncio.wait_for(server.wait_for_request(0), 10)

    with pytest.raises(TurnInProgress) as raised:
        await ask(
            chain(openai_client, store, wait=0), "q", streaming=streaming, context=attempt("r1")
        )

    assert raised.value.request_id == "r1"
    assert raised.value.retry_after >= 1
    hold.set()
    assert (await first).message.text == "slow"
    retry = await ask(
        chain(openai_client, store, wait=0), "q", streaming=streaming, context=attempt("r1")
    )
    assert retry.message.text == "slow"
    assert model_calls(server) == 1
    assert await stored(store, "s1") == ["U:q", "A:slow"]


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
