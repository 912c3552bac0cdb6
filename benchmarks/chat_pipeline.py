"""The cost of a chat turn: time to first chunk, and database work per turn.

``python -m benchmarks.chat_pipeline [--runs N] [--mongo]`` prints Markdown tables:

1. **Time to first chunk**, through a whole turn (a ``ChatClient`` with session memory and a
   tool, on the in-memory store, and with ``--mongo`` on MongoDB) next to a
   bare ``openai`` stream of the same reply from the same scripted server, median and p95 over
   ``N`` runs. The runs are interleaved, in an order rotated every run, so drift and position hit
   every path alike, and the garbage collector is paused during each run (as ``timeit`` does). Every
   chain run is a turn on an existing session with two earlier turns: the session resolve, the
   history read and the write of the user message all happen before the first chunk.
2. **Database work per turn**: repository calls on the in-memory store and, with ``--mongo``,
   commands counted by PyMongo command monitoring, for a plain turn, a turn on a new session and a
   two-round tool turn, next to what the same reads and appends cost done directly.

``--mongo`` starts the local test server (``ASYNCSESSION_SECANTUSD``) unless ``MONGODB_URI`` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import math
import os
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import openai
from pymongo import AsyncMongoClient, monitoring

from asyncsession import (
    AssistantMessage,
    CreateSessionRequest,
    DefaultSessionService,
    EventFilter,
    InMemorySessionRepository,
    SessionEvent,
    SessionRepository,
    UserMessage,
    tool,
)
from asyncsession.advisors import Advisor, CallContext
from asyncsession.chat import ChatRequest
from asyncsession.openai import ChatClient
from asyncsession.testing import ScriptedOpenAIServer, ScriptedReply, ScriptedToolCall

MODEL = "bench-model"
REPLY = "The quick brown fox jumps over the lazy dog. " * 4
_NOT_COUNTED = frozenset(
    {"hello", "ismaster", "isMaster", "ping", "endSessions", "saslStart", "saslContinue"}
)


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile."""
    ordered = sorted(samples)
    return ordered[max(1, math.ceil(q / 100 * len(ordered))) - 1]


def median(samples: list[float]) -> float:
    """The median."""
    ordered = sorted(samples)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


class CountingRepository:
    """Delegates to a repository and counts the calls per method."""

    def __init__(self, inner: SessionRepository) -> None:
        self._inner = inner
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name: str) -> Any:
        method = getattr(self._inner, name)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.calls[name] += 1
            return await method(*args, **kwargs)

        return counted


class CommandCounter(monitoring.CommandListener):
    """Counts the commands a client sends, handshakes aside."""

    def __init__(self) -> None:
        self.names: list[str] = []

    def started(self, event: monitoring.CommandStartedEvent) -> None:
        if event.command_name not in _NOT_COUNTED:
            self.names.append(event.command_name)

    def succeeded(self, event: monitoring.CommandSucceededEvent) -> None:
        pass

    def failed(self, event: monitoring.CommandFailedEvent) -> None:
        pass


class Probe(Advisor):
    """A model advisor: notes when the request is ready to go to the model."""

    async def before(self, ctx: CallContext, request: ChatRequest) -> ChatRequest:
        ctx.context.setdefault("bench_ready", time.perf_counter())
        return request


def chain(sdk: openai.AsyncOpenAI, service: DefaultSessionService) -> ChatClient:
    return ChatClient(sdk, model=MODEL, sessions=service, tools=[lookup], model_advisors=[Probe()])


async def with_history(service: DefaultSessionService, session_id: str, turns: int = 2) -> None:
    await service.create(CreateSessionRequest(id=session_id, user_id="bench"))
    for turn in range(turns):
        await service.append_message(session_id, UserMessage(text=f"question {turn}"))
        await service.append_message(session_id, AssistantMessage(text=f"answer {turn}"))


async def first_chunk_bare(sdk: openai.AsyncOpenAI, body: dict[str, Any]) -> float:
    started = time.perf_counter()
    stream = await sdk.chat.completions.create(
        model=MODEL,
        messages=body["messages"],
        tools=body.get("tools", openai.omit),
        stream=True,
        stream_options={"include_usage": True},
    )
    async with stream:
        elapsed = -1.0
        async for _ in stream:
            if elapsed < 0:
                elapsed = time.perf_counter() - started
    return elapsed


async def first_chunk_chain(client: ChatClient, session_id: str) -> tuple[float, float]:
    """Time to first chunk, and the part of it the pipeline took before sending the request."""
    started = time.perf_counter()
    async with client.stream("Go", session_id=session_id) as stream:
        elapsed = -1.0
        async for _ in stream:
            if elapsed < 0:
                elapsed = time.perf_counter() - started
    return elapsed, float(stream.context["bench_ready"]) - started


WARMUP = 10
"""Warm-up runs per path before the recorded ones (not recorded)."""


async def time_to_first_chunk(
    server: ScriptedOpenAIServer,
    sdk: openai.AsyncOpenAI,
    services: dict[str, DefaultSessionService],
    runs: int,
    warmup: int = WARMUP,
) -> dict[str, list[float]]:
    minimal = "bare openai stream, one user message"
    same = "bare openai stream, the chain's request"
    samples: dict[str, list[float]] = {minimal: [], same: []}
    clients = {name: chain(sdk, service) for name, service in services.items()}
    for name, service in services.items():
        samples[f"full chain, {name}"] = []
        for run in range(runs + warmup):
            await with_history(service, f"{name}-{run}")
    # The exact request the chain sends (history, user message, tool definition), for the
    # bare stream: the difference is then the pipeline's own cost, not the SDK's per-message cost.
    await with_history(next(iter(services.values())), "shape")
    server.enqueue(ScriptedReply.text(REPLY))
    await first_chunk_chain(next(iter(clients.values())), "shape")  # the chain's request shape
    chain_body = dict(server.requests[-1].body)
    minimal_body: dict[str, Any] = {"messages": [{"role": "user", "content": "Go"}]}
    paths: list[tuple[str, Callable[[int], Awaitable[float]]]] = [
        (minimal, lambda run: _bare(sdk, minimal_body)),
        (same, lambda run: _bare(sdk, chain_body)),
    ]
    for name, client in clients.items():
        paths.append((f"full chain, {name}", _chain_path(client, name, samples, warmup)))
        samples[f"  of which the pipeline before the request, {name}"] = []
    for run in range(runs + warmup):  # warm-up runs, not recorded
        # Rotate the order every run, so no path always runs right after another.
        shift = run % len(paths)
        for label, path in paths[shift:] + paths[:shift]:
            server.enqueue(ScriptedReply.text(REPLY))
            gc.collect()
            gc.disable()  # as timeit does: a collection inside one run is noise, not cost
            try:
                value = await path(run)
            finally:
                gc.enable()
            if run >= warmup:
                samples[label].append(value)
    return samples


async def _bare(sdk: openai.AsyncOpenAI, body: dict[str, Any]) -> float:
    return await first_chunk_bare(sdk, body)


def _chain_path(
    client: ChatClient, name: str, samples: dict[str, list[float]], warmup: int
) -> Callable[[int], Awaitable[float]]:
    async def path(run: int) -> float:
        elapsed, pipeline = await first_chunk_chain(client, f"{name}-{run}")
        if run >= warmup:
            samples[f"  of which the pipeline before the request, {name}"].append(pipeline)
        return elapsed

    return path


async def turn_costs(
    server: ScriptedOpenAIServer,
    sdk: openai.AsyncOpenAI,
    service: DefaultSessionService,
    measure: Callable[[], int],
    reset: Callable[[], None],
    direct: Callable[[str], Awaitable[None]],
) -> list[tuple[str, int, int]]:
    """(turn, cost through the chain, cost of the same reads and appends done directly)."""
    client = chain(sdk, service)
    rows: list[tuple[str, int, int]] = []
    tag = uuid.uuid4().hex[:8]

    await with_history(service, f"plain-{tag}")
    await with_history(service, f"plain-ref-{tag}")
    reset()
    await direct(f"plain-ref-{tag}")
    budget = measure()
    reset()
    server.enqueue(ScriptedReply.text("ok"))
    await client.call("hi", session_id=f"plain-{tag}")
    rows.append(("plain turn, existing session (1 read + 2 appends)", measure(), budget))

    reset()
    await service.create(CreateSessionRequest(id=f"new-ref-{tag}", user_id="bench"))
    await direct(f"new-ref-{tag}")
    budget = measure() + 1  # + the read that finds nothing
    reset()
    server.enqueue(ScriptedReply.text("ok"))
    await client.call("hi", session_id=f"new-{tag}")
    rows.append(("plain turn, new session (+ create)", measure(), budget))

    await with_history(service, f"tools-{tag}")
    await with_history(service, f"tools-ref-{tag}")
    reset()
    await direct(f"tools-ref-{tag}")
    await direct_appends(service, f"tools-ref-{tag}")
    budget = measure()
    reset()
    server.enqueue(
        ScriptedReply.tool_calls([ScriptedToolCall("lookup", {"key": "k"})]),
        ScriptedReply.text("ok"),
    )
    await client.call("hi", session_id=f"tools-{tag}")
    rows.append(("two-round tool turn (1 read + 4 appends)", measure(), budget))
    return rows


async def direct_appends(service: DefaultSessionService, session_id: str) -> None:
    for message in (UserMessage(text="x"), AssistantMessage(text="y")):
        await service.repository.append_event(SessionEvent(session_id=session_id, message=message))


def direct_turn(service: DefaultSessionService) -> Callable[[str], Awaitable[None]]:
    async def run(session_id: str) -> None:
        await service.repository.read_snapshot(session_id, EventFilter.active())
        await direct_appends(service, session_id)

    return run


def ms(value: float) -> str:
    return f"{value * 1000:.2f}"


async def main(runs: int, use_mongo: bool, warmup: int = WARMUP) -> None:
    mongo_server: Any = None
    mongo_client: AsyncMongoClient[dict[str, Any]] | None = None
    counter = CommandCounter()
    database = f"bench_{uuid.uuid4().hex[:12]}"
    try:
        async with ScriptedOpenAIServer() as server:
            sdk = server.client()
            counting = CountingRepository(InMemorySessionRepository())
            memory_service = DefaultSessionService(counting)  # pyright: ignore[reportArgumentType]
            services = {"in-memory store": memory_service}
            mongo_service: DefaultSessionService | None = None
            if use_mongo:
                from asyncsession.repository.mongo import MongoSessionRepository

                uri = os.environ.get("MONGODB_URI")
                if uri is None:
                    from asyncsession.testing._mongo_server import (
                        LocalMongoServer,
                        find_server_executable,
                    )

                    executable = find_server_executable()
                    if executable is None:
                        sys.exit("--mongo needs MONGODB_URI or ASYNCSESSION_SECANTUSD")
                    mongo_server = LocalMongoServer(executable)
                    mongo_server.start()
                    uri = mongo_server.uri(w="majority", journal="true")
                mongo_client = AsyncMongoClient(uri, tz_aware=True, event_listeners=[counter])
                repository = MongoSessionRepository(mongo_client[database])
                await repository.ensure_indexes()
                mongo_service = DefaultSessionService(repository)
                services["MongoDB"] = mongo_service

            samples = await time_to_first_chunk(server, sdk, services, runs, warmup)
            print(f"## Time to first chunk ({runs} runs, ms)\n")
            print("| path | median | p95 | median vs bare, same request |")
            print("|---|---:|---:|---:|")
            bare = median(samples["bare openai stream, the chain's request"])
            for label, values in samples.items():
                full = label.startswith("full")
                overhead = f"{(median(values) - bare) * 1000:+.2f}" if full else ""
                row = f"| {label} | {ms(median(values))} | {ms(percentile(values, 95))} |"
                print(f"{row} {overhead} |")

            print("\n## Database work per turn\n")
            print("| store | turn | through the chain | same operations done directly |")
            print("|---|---|---:|---:|")
            rows = await turn_costs(
                server,
                sdk,
                memory_service,
                lambda: sum(counting.calls.values()),
                counting.calls.clear,
                direct_turn(memory_service),
            )
            for turn, used, budget in rows:
                print(f"| in-memory (repository calls) | {turn} | {used} | {budget} |")
            if mongo_service is not None:
                rows = await turn_costs(
                    server,
                    sdk,
                    mongo_service,
                    lambda: len(counter.names),
                    counter.names.clear,
                    direct_turn(mongo_service),
                )
                for turn, used, budget in rows:
                    print(f"| MongoDB (commands) | {turn} | {used} | {budget} |")
    finally:
        if mongo_client is not None:
            await mongo_client.drop_database(database)
            await mongo_client.close()
        if mongo_server is not None:
            mongo_server.stop()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="The cost of a chat turn.")
    parser.add_argument(
        "--warmup", type=int, default=WARMUP, help="warm-up runs per path, not recorded"
    )
    parser.add_argument("--runs", type=int, default=200, help="recorded runs per path")
    parser.add_argument("--mongo", action="store_true", help="also run on MongoDB")
    arguments = parser.parse_args()
    asyncio.run(main(arguments.runs, arguments.mongo, arguments.warmup))
